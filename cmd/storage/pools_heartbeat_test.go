package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolPathChecks: `nodes heartbeat` checks every declared pool path; a
// failing one makes the attachment unavailable, and no new object goes
// through it.
func TestPoolPathChecks(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		mnt := filepath.Join(t.TempDir(), "ceph-a")
		require.NoError(t, os.Mkdir(mnt, 0o755))
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:" + mnt}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		request := obj{"volumes": []string{"POOL:/data:rw:10G"}}

		t.Run("a node that never heartbeat keeps its attachment available", func(t *testing.T) {
			require.True(t, poolGet(t, env, "ceph-a").Attachments[0].Available)
		})
		t.Run("an existing directory passes --pool-check=exists", func(t *testing.T) {
			heartbeat(t, env, "n1", t.TempDir(), "--pool-check", "exists")
			require.True(t, poolGet(t, env, "ceph-a").Attachments[0].Available)
			deploy(t, env, "n1", 1, request)
		})
		t.Run("a directory that is no mount point fails the default check", func(t *testing.T) {
			heartbeat(t, env, "n1", t.TempDir())
			a := poolGet(t, env, "ceph-a").Attachments[0]
			require.False(t, a.Available)
			require.Equal(t, mnt+" is not a mount point", a.Reason)
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": request})
			require.Contains(t, line, "failed_precondition: this node's attachment to pool ceph-a is unavailable")
		})
		t.Run("a usage write through an unavailable attachment is refused and writes nothing", func(t *testing.T) {
			heartbeat(t, env, "n1", t.TempDir(), "--pool-check", "exists")
			d := deploy(t, env, "n1", 1, request)
			require.NoError(t, os.Remove(mnt))
			heartbeat(t, env, "n1", t.TempDir(), "--pool-check", "exists")
			require.Contains(t, poolGet(t, env, "ceph-a").Attachments[0].Reason, "no such file or directory")
			before := env.Dump(t)
			line := env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": d.WorkloadsResource, "delta": true, "incr": true})
			require.Contains(t, line, "failed_precondition: this node's attachment to pool ceph-a is unavailable")
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("an unknown --pool-check is invalid_argument", func(t *testing.T) {
			res := env.Op(t, "storage", "nodes", "heartbeat", "n1", "--proc-root", t.TempDir(), "--pool-check", "maybe")
			require.Equal(t, 2, res.Code)
		})
	})
}

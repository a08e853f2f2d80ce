package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolCapacityLeavesOutFailingAttachments: the capacity query deals no
// slot of a pool to a node whose last heartbeat found the pool's path
// failing (calculate-deploy and the usage write would refuse it there); the
// other nodes get those slots, and a heartbeat that finds the path again
// gives the node its share back.
func TestPoolCapacityLeavesOutFailingAttachments(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		mnt := filepath.Join(t.TempDir(), "ceph-a")
		require.NoError(t, os.Mkdir(mnt, 0o755))
		names := []string{"n1", "n2", "n3"}
		for _, n := range names {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:" + mnt}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "40G", "--if-version", "0")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:10G"}}

		t.Run("with every attachment available, the four slots go round-robin", func(t *testing.T) {
			c := capacity(t, env, names, request)
			require.Equal(t, 4, c.Total)
			require.Equal(t, 2, c.Nodes["n1"].Capacity)
			require.Equal(t, 1, c.Nodes["n2"].Capacity)
			require.Equal(t, 1, c.Nodes["n3"].Capacity)
		})
		t.Run("a node whose heartbeat found the path no mount point gets none, the others get its share", func(t *testing.T) {
			heartbeat(t, env, "n1", t.TempDir())
			require.False(t, poolGet(t, env, "ceph-a").Attachments[0].Available)
			c := capacity(t, env, names, request)
			require.Equal(t, 4, c.Total)
			require.NotContains(t, c.Nodes, "n1")
			require.Equal(t, 2, c.Nodes["n2"].Capacity)
			require.Equal(t, 2, c.Nodes["n3"].Capacity)
		})
		t.Run("a heartbeat that finds the path again gives the node its share back", func(t *testing.T) {
			heartbeat(t, env, "n1", t.TempDir(), "--pool-check", "exists")
			c := capacity(t, env, names, request)
			require.Equal(t, 2, c.Nodes["n1"].Capacity)
			require.Equal(t, 4, c.Total)
		})
	})
}

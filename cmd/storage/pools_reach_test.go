package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolFailoverCapacityOnlyWhereThePoolIsReached: the capacity query of
// a failover (a binding attaching an existing object) offers only the
// nodes that reach the object's pool through an available attachment:
// calculate-deploy and the usage write refuse the attach anywhere else, so
// a node core could pick there would fail the failover (pools.md: slots
// are 0 when the node's attachment is absent or unavailable).
func TestPoolFailoverCapacityOnlyWhereThePoolIsReached(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		addNode(t, env, "n2", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		addNode(t, env, "n3", obj{"storage": "1T", "pools": []string{"nfs1:/mnt/nfs1"}})
		addNode(t, env, "n4", obj{"storage": "1T"})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:10G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		object := poolPlans(t, d.WorkloadsResource[0])["POOL:/data:rw:10737418240:0:0:0:0"].Object
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")

		failover := obj{"volumes": []string{"POOL@ceph-a/" + object + ":/data:rw"}}
		for _, n := range []string{"n3", "n4"} {
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": n, "deploy_count": 1, "workload_resource_request": failover})
			require.Contains(t, line, "failed_precondition: this node does not declare pool ceph-a")
		}
		c := capacity(t, env, []string{"n1", "n2", "n3", "n4"}, failover)
		require.Equal(t, 1, c.Nodes["n2"].Capacity)
		require.NotContains(t, c.Nodes, "n3", "n3 does not declare ceph-a: the attach is refused there")
		require.NotContains(t, c.Nodes, "n4", "n4 declares no pool: the attach is refused there")
		require.Equal(t, 1, c.Total)

		t.Run("nowhere once the object's pool is lost", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "nodes", "isolate", "n2")
			env.OpOK(t, "storage", nil, "pools", "declare-lost", "ceph-a")
			addNode(t, env, "n5", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n5", "deploy_count": 1, "workload_resource_request": failover})
			require.Contains(t, line, "LOST")
			c := capacity(t, env, []string{"n2", "n5"}, failover)
			require.Empty(t, c.Nodes)
		})
	})
}

// TestPoolMovedObjectReallocChangesTheVolume: pools.md, Moves: "The bound
// workload sees its new source at its next realloc (volume_changed: true,
// since the source changed)". With volume_changed false core keeps the
// container's old bind, the source copy the move removed.
func TestPoolMovedObjectReallocChangesTheVolume(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, workloads, objects := movablePoolObjects(t, env, 1)
		object, current := objects[0], workloads[0]
		require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
		env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1")

		for name, request := range map[string]obj{
			"a realloc that does not touch the volume": {"storage": "1G"},
			"a growth of the volume":                   {"volumes": []string{"POOL:/data:rw:1G"}},
		} {
			t.Run(name, func(t *testing.T) {
				var r reallocAnswer
				env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current,
					"workload_resource_request": request}, &r)
				require.Len(t, r.EngineParams.Volumes, 1)
				require.Contains(t, r.EngineParams.Volumes[0], filepath.Join(b, object)+":/data:rw:")
				require.True(t, r.EngineParams.VolumeChanged, "the source moved from %s to %s", filepath.Join(a, object), filepath.Join(b, object))
			})
		}
		t.Run("once the workload's plan names the new pool, a pure resize changes no volume", func(t *testing.T) {
			var r reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current,
				"workload_resource_request": obj{"storage": "1G"}}, &r)
			var again reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": r.WorkloadResource,
				"workload_resource_request": obj{"volumes": []string{"POOL:/data:rw:1G"}}}, &again)
			require.False(t, again.EngineParams.VolumeChanged)
		})
	})
}

// TestPoolObjectsInTheNodeTableInBinaryUnits: README, "Node and pool tables
// print sizes in binary units (1.5 TiB)". A node's pool object is a size.
func TestPoolObjectsInTheNodeTableInBinaryUnits(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:10G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		object := poolPlans(t, d.WorkloadsResource[0])["POOL:/data:rw:10737418240:0:0:0:0"].Object

		for _, args := range [][]string{{"nodes", "get", "n1", "-o", "table"}, {"nodes", "isolate", "n1", "-o", "table"}} {
			res := env.Op(t, "storage", args...)
			require.Equal(t, 0, res.Code, "%v: %s", args, res.Stderr)
			require.Contains(t, res.Stdout, "pool object "+object)
			require.NotContains(t, res.Stdout, "10737418240", "%v prints a raw byte count:\n%s", args, res.Stdout)
			require.Contains(t, res.Stdout, "10 GiB")
		}
	})
}

// TestPoolDeployThroughAnUnavailableAttachmentSaysWhy: calculate-deploy
// refuses a new object through an attachment that is unavailable, and says
// why, as `storage pools get` does: the path the node's last heartbeat found
// failing (with what it found), or the pool's loss.
func TestPoolDeployThroughAnUnavailableAttachmentSaysWhy(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		missing := filepath.Join(t.TempDir(), "ceph-a")
		gone := t.TempDir()
		addNode(t, env, "x", obj{"storage": "1T", "pools": []string{"gone:" + gone}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "gone", "100G", "--if-version", "0")
		env.OpOK(t, "storage", nil, "nodes", "isolate", "x")
		env.OpOK(t, "storage", nil, "pools", "declare-lost", "gone")
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:" + missing, "gone:" + gone}, "default-pool": "ceph-a"})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		heartbeat(t, env, "n1", t.TempDir(), "--pool-check", "exists")
		for _, c := range []struct {
			name, binding, want string
		}{
			{"a pool whose path the last heartbeat found failing names what it found", "POOL@ceph-a:/data:rw:1G", missing + ": no such file or directory"},
			{"a pool declared lost says so", "POOL@gone:/data:rw:1G", "pool gone was declared lost"},
		} {
			t.Run(c.name, func(t *testing.T) {
				before := env.Dump(t)
				line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumes": []string{c.binding}}})
				require.Contains(t, line, "failed_precondition")
				require.Contains(t, line, c.want)
				require.Equal(t, before, env.Dump(t))
			})
		}
	})
}

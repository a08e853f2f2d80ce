package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolMovedObjectLivesWhereItsRecordSays: after `pools move`, the
// workload's plan still names the pool the object was deployed in; the
// node's record names the pool it lives in now, and that one is used for
// diffs, fix, calculate-realloc's paths and growth.
func TestPoolMovedObjectLivesWhereItsRecordSays(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, workloads, objects := movablePoolObjects(t, env, 1)
		object, current := objects[0], workloads[0]
		require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
		env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1")
		require.Equal(t, "nfs1", poolObjects(t, env, "n1")[object].Pool)

		t.Run("the workload's plan naming the old pool is no diff", func(t *testing.T) {
			require.Empty(t, info(t, env, "n1", current).Diffs)
		})
		t.Run("fix leaves the object in the pool it moved to", func(t *testing.T) {
			before := env.Dump(t)
			env.Call(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": []json.RawMessage{current}}, nil)
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("a realloc that does not touch the volume gives the engine the new pool's path", func(t *testing.T) {
			var r reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current,
				"workload_resource_request": obj{"storage": "1G"}}, &r)
			require.Contains(t, r.EngineParams.Volumes, filepath.Join(b, object)+":/data:rw:10737418240")
		})
		t.Run("a growth is admitted and written in the new pool", func(t *testing.T) {
			var r reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current,
				"workload_resource_request": obj{"volumes": []string{"POOL:/data:rw:1G"}}}, &r)
			require.Equal(t, []string{filepath.Join(b, object) + ":/data:rw:11811160064"}, r.EngineParams.Volumes)
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []json.RawMessage{r.DeltaResource}, "delta": true, "incr": true}, nil)
			require.Empty(t, exactPool(t, env, "ceph-a"))
			living := exactPool(t, env, "nfs1")
			require.Equal(t, storedObject{Node: "n1", Pool: "nfs1", Bytes: 11 * gib, Held: true}, living[object])
			require.Equal(t, 11*gib, poolGet(t, env, "nfs1").Reserved)
			require.Zero(t, poolGet(t, env, "ceph-a").Reserved)
			require.Empty(t, info(t, env, "n1", r.WorkloadResource).Diffs)
		})
	})
}

// TestPoolRestoreKeepsAMovedObjectWhereItLives: core's rollback of a deploy
// on n1 (or set-node-resource-info) replays a snapshot taken before an
// operator moved one of n1's objects to another pool. The record is what
// counts: the object stays in the pool it moved to, where its data is (the
// move removed the old copy), and nothing is reserved for it in the old
// pool. Put back in the old pool, the engine would be given an empty path
// at the workload's next realloc, and the data's copy in the new pool would
// reserve nothing and be cleaned up by no one.
func TestPoolRestoreKeepsAMovedObjectWhereItLives(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		restores := []struct {
			name    string
			restore func(t *testing.T, node string, capacity, usage json.RawMessage)
		}{
			{"core's rollback of the usage", func(t *testing.T, node string, _, usage json.RawMessage) {
				rollbackUsage(t, env, node, usage)
			}},
			{"set-node-resource-info", func(t *testing.T, node string, capacity, usage json.RawMessage) {
				env.Call(t, "storage", "set-node-resource-info", obj{"nodename": node, "capacity": capacity, "usage": usage}, nil)
			}},
		}
		for i, c := range restores {
			t.Run("a restore by "+c.name+" of a snapshot from before a move keeps the object in the pool it moved to", func(t *testing.T) {
				node, from, to := "m"+strconv.Itoa(i), "from"+strconv.Itoa(i), "to"+strconv.Itoa(i)
				a, b := t.TempDir(), t.TempDir()
				addNode(t, env, node, obj{"storage": "1T", "pools": []string{from + ":" + a, to + ":" + b}, "default-pool": from})
				env.OpOK(t, "storage", nil, "pools", "set-capacity", from, "100G", "--if-version", "0")
				env.OpOK(t, "storage", nil, "pools", "set-capacity", to, "100G", "--if-version", "0")
				first := deploy(t, env, node, 1, obj{"volumes": []string{"POOL:/data:rw:10G"}})
				commit(t, env, node, first.WorkloadsResource, true)
				object := planObjects(first.WorkloadsResource[0])[0]
				second := deploy(t, env, node, 1, obj{"volumes": []string{"POOL:/data:rw:1G"}})
				var ba beforeAfter
				env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": node, "workloads_resource": second.WorkloadsResource, "delta": true, "incr": true}, &ba)
				require.Contains(t, string(ba.Before), object)
				require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
				env.OpOK(t, "storage", nil, "pools", "move", object, "--to", to, "--node", node)
				require.NoDirExists(t, filepath.Join(a, object))
				require.DirExists(t, filepath.Join(b, object))

				var stored struct {
					Capacity json.RawMessage `json:"capacity"`
				}
				require.True(t, env.Record(t, "/resource/storage/"+node, &stored))
				c.restore(t, node, stored.Capacity, ba.Before)
				require.Empty(t, exactPool(t, env, from), "the old pool keeps no object: its copy was removed")
				living := exactPool(t, env, to)
				require.Equal(t, storedObject{Node: node, Pool: to, Bytes: 10 * gib, Held: true}, living[object])
				require.Zero(t, poolGet(t, env, from).Reserved)
				require.Equal(t, 10*gib, poolGet(t, env, to).Reserved)
			})
		}
	})
}

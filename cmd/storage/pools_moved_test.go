package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
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

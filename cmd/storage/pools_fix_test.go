package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolDiffsAndFix: an object whose workload core never recorded (a
// half-failed deploy) is a diff, and fix-node-resource releases it, moving
// the pool's counter by exactly its bytes.
func TestPoolDiffsAndFix(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		addNode(t, env, "n2", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "300G", "--if-version", "0")
		kept := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:100G"}})
		orphan := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:50G"}})
		other := deploy(t, env, "n2", 1, obj{"volumes": []string{"POOL:/data:rw:10G"}})
		commit(t, env, "n1", kept.WorkloadsResource, true)
		commit(t, env, "n1", orphan.WorkloadsResource, true)
		commit(t, env, "n2", other.WorkloadsResource, true)
		orphanID := poolPlans(t, orphan.WorkloadsResource[0])["POOL:/data:rw:53687091200:0:0:0:0"].Object
		workloads := []json.RawMessage{kept.WorkloadsResource[0]}

		t.Run("the object no workload holds is a diff naming it and its pool", func(t *testing.T) {
			got := info(t, env, "n1", workloads...)
			require.Len(t, got.Diffs, 1)
			require.Contains(t, got.Diffs[0], "pool object "+orphanID+" in pool ceph-a")
			require.Empty(t, info(t, env, "n2", other.WorkloadsResource...).Diffs)
		})
		t.Run("fix releases it and moves the counter by its bytes only", func(t *testing.T) {
			require.Equal(t, 160*gib, poolGet(t, env, "ceph-a").Reserved)
			env.Call(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": workloads}, nil)
			require.NotContains(t, poolObjects(t, env, "n1"), orphanID)
			require.Len(t, poolObjects(t, env, "n1"), 1)
			v := poolGet(t, env, "ceph-a")
			require.Equal(t, 110*gib, v.Reserved, "n2's share survives n1's absolute write")
			require.Equal(t, int64(2), v.Objects)
			require.Empty(t, info(t, env, "n1", workloads...).Diffs)
			noDrift(t, env)
		})
	})
}

// TestPoolFixCountsPoolsNewToTheNode: fix-node-resource and
// set-node-resource-info put objects in pools the node's record had no
// object in; the pools' counters move by exactly those objects.
func TestPoolFixCountsPoolsNewToTheNode(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a", "nfs1:/mnt/nfs1"}, "default-pool": "ceph-a"})
		addNode(t, env, "n2", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a", "nfs1:/mnt/nfs1"}, "default-pool": "ceph-a"})
		for _, p := range []string{"ceph-a", "nfs1"} {
			env.OpOK(t, "storage", nil, "pools", "set-capacity", p, "10G", "--if-version", "0")
		}
		// A half-failed deploy on n1: core never wrote its usage.
		lost := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:1G"}}).WorkloadsResource
		t.Run("fix on a node without objects counts the object its workload holds", func(t *testing.T) {
			env.Call(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": lost}, nil)
			living := exactPool(t, env, "ceph-a")
			require.Len(t, living, 1)
			require.Equal(t, storedObject{Node: "n1", Pool: "ceph-a", Bytes: gib, Held: true}, living[planObjects(lost[0])[0]])
			require.Equal(t, gib, poolGet(t, env, "ceph-a").Reserved)
			require.Empty(t, info(t, env, "n1", lost...).Diffs)
		})
		t.Run("fix counts an object in a pool the node had none in beside one it had", func(t *testing.T) {
			more := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL@nfs1:/data:rw:2G"}}).WorkloadsResource
			all := append(append([]json.RawMessage{}, lost...), more...)
			env.Call(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": all}, nil)
			require.Len(t, exactPool(t, env, "ceph-a"), 1)
			living := exactPool(t, env, "nfs1")
			require.Equal(t, storedObject{Node: "n1", Pool: "nfs1", Bytes: 2 * gib, Held: true}, living[planObjects(more[0])[0]])
			v := poolGet(t, env, "nfs1")
			require.Equal(t, 2*gib, v.Reserved)
			require.Equal(t, int64(1), v.Objects)
			require.Equal(t, gib, poolGet(t, env, "ceph-a").Reserved)
		})
		t.Run("set-node-resource-info with an object on a node without objects counts it", func(t *testing.T) {
			var read struct {
				Capacity json.RawMessage `json:"capacity"`
				Usage    json.RawMessage `json:"usage"`
			}
			env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n2", "workloads_resource": []json.RawMessage{}}, &read)
			var usage map[string]any
			require.NoError(t, json.Unmarshal(read.Usage, &usage))
			require.NotContains(t, usage, "pool_objects")
			object := "v-00000000000000a1"
			usage["pool_objects"] = obj{object: obj{"pool": "nfs1", "bytes": gib, "held": true}}
			env.Call(t, "storage", "set-node-resource-info", obj{"nodename": "n2", "capacity": read.Capacity, "usage": usage}, nil)
			living := exactPool(t, env, "nfs1")
			require.Len(t, living, 2)
			require.Equal(t, storedObject{Node: "n2", Pool: "nfs1", Bytes: gib, Held: true}, living[object])
			v := poolGet(t, env, "nfs1")
			require.Equal(t, 3*gib, v.Reserved)
			require.Equal(t, int64(2), v.Objects)
			require.Equal(t, gib, poolGet(t, env, "ceph-a").Reserved, "a pool the write does not touch keeps its counters")
		})
	})
}

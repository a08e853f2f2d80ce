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

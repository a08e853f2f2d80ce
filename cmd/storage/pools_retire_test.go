package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolRetirement: retiring a node ends its pool declarations in the
// same transaction; its objects keep reserving and can be attached
// elsewhere.
func TestPoolRetirement(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		addNode(t, env, "n2", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:10G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		object := poolPlans(t, d.WorkloadsResource[0])["POOL:/data:rw:10737418240:0:0:0:0"].Object

		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
		env.OpOK(t, "storage", nil, "nodes", "retire", "n1")

		t.Run("the retired node declares no pool and has no attachment", func(t *testing.T) {
			require.Empty(t, storedPools(t, env, "n1").Pools)
			v := poolGet(t, env, "ceph-a")
			require.Len(t, v.Attachments, 1)
			require.Equal(t, "n2", v.Attachments[0].Node)
		})
		t.Run("its object still reserves and is attached on another node", func(t *testing.T) {
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
			a := deploy(t, env, "n2", 1, obj{"volumes": []string{"POOL@ceph-a/" + object + ":/data:rw"}})
			commit(t, env, "n2", a.WorkloadsResource, true)
			require.Contains(t, poolObjects(t, env, "n2"), object)
			require.NotContains(t, poolObjects(t, env, "n1"), object)
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
			noDrift(t, env)
		})
	})
}

// TestHeldPoolObjectsKeepANodeFromBeingDrainedOrRetired: an object a
// node's workload holds is usage like any other (pools.md): after a drain
// the node is DRAINING, not DRAINED, and may not be retired (which would
// let another node attach the volume a live workload still uses); only
// isolation releases it.
func TestHeldPoolObjectsKeepANodeFromBeingDrainedOrRetired(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:10G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)

		env.OpOK(t, "storage", nil, "nodes", "drain", "n1")
		require.Equal(t, "DRAINING", nodeGet(t, env, "n1").Status)
		res := env.Op(t, "storage", "nodes", "retire", "n1")
		require.Equal(t, 4, res.Code, "failed_precondition: %s", res.Stderr)
		require.Contains(t, res.Stderr, "node n1 is DRAINING: it still holds usage")
		require.Equal(t, "DRAINING", nodeGet(t, env, "n1").Status)

		commit(t, env, "n1", d.WorkloadsResource, false) // the workload goes: its object is released
		require.Equal(t, "DRAINED", nodeGet(t, env, "n1").Status)
		env.OpOK(t, "storage", nil, "nodes", "retire", "n1")
	})
}

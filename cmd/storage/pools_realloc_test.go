package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

func TestPoolRealloc(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "300G", "--if-version", "0")
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:100G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		object := poolPlans(t, d.WorkloadsResource[0])["POOL:/data:rw:107374182400:0:0:0:0"].Object
		require.Regexp(t, objectID, object)
		current := d.WorkloadsResource[0]

		realloc := func(t *testing.T, delta string) reallocAnswer {
			t.Helper()
			var out reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current,
				"workload_resource_request": obj{"volumes": []string{"POOL:/data:rw:" + delta}}}, &out)
			return out
		}
		t.Run("a growth within the pool's room keeps the object id and is no volume change", func(t *testing.T) {
			r := realloc(t, "100G")
			require.False(t, r.EngineParams.VolumeChanged)
			require.Equal(t, []string{"/mnt/ceph-a/" + object + ":/data:rw:214748364800"}, r.EngineParams.Volumes)
			plans := poolPlans(t, r.WorkloadResource)
			require.Equal(t, poolPlan{Pool: "ceph-a", Object: object, Bytes: 200 * gib}, plans["POOL:/data:rw:214748364800:0:0:0:0"])
			deltaPlans := poolPlans(t, r.DeltaResource)
			require.Equal(t, 100*gib, deltaPlans["POOL:/data:rw:214748364800:0:0:0:0"].Bytes)
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []json.RawMessage{r.DeltaResource}, "delta": true, "incr": true}, nil)
			current = r.WorkloadResource
			require.Equal(t, 200*gib, poolGet(t, env, "ceph-a").Reserved)
			require.Equal(t, 200*gib, poolObjects(t, env, "n1")[object].Bytes)
			noDrift(t, env)
		})
		t.Run("a growth past the pool's capacity is refused", func(t *testing.T) {
			line := env.Fail(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current,
				"workload_resource_request": obj{"volumes": []string{"POOL:/data:rw:200G"}}})
			require.Contains(t, line, "resource_exhausted: pool ceph-a has 100 GiB free, 200 GiB asked")
		})
		t.Run("a shrink while over capacity passes and releases the bytes", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "150G", "--if-version", "1")
			r := realloc(t, "-50G")
			require.False(t, r.EngineParams.VolumeChanged)
			require.Equal(t, -50*gib, poolPlans(t, r.DeltaResource)["POOL:/data:rw:161061273600:0:0:0:0"].Bytes)
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []json.RawMessage{r.DeltaResource}, "delta": true, "incr": true}, nil)
			current = r.WorkloadResource
			require.Equal(t, 150*gib, poolGet(t, env, "ceph-a").Reserved)
			noDrift(t, env)
		})
		t.Run("a realloc that does not touch the pool volume carries its plan", func(t *testing.T) {
			var out reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current,
				"workload_resource_request": obj{"storage": "1G"}}, &out)
			require.Equal(t, poolPlans(t, current), poolPlans(t, out.WorkloadResource))
			require.Contains(t, out.EngineParams.Volumes, "/mnt/ceph-a/"+object+":/data:rw:161061273600")
		})
	})
}

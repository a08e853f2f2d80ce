package main_test

import (
	"encoding/json"
	"strconv"
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

// failedOver places a 1 GiB object on n1, isolates n1 and attaches the
// object on n2 (deploy and usage write): it returns the object's id and
// n2's workload resource.
func failedOver(t *testing.T, env *testenv.Env) (string, json.RawMessage) {
	t.Helper()
	object := planObjects(placed(t, env, "n1", 1, "1G")[0])[0]
	env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
	d := deploy(t, env, "n2", 1, obj{"volumes": []string{"POOL@ceph-a/" + object + ":/data:rw"}})
	commit(t, env, "n2", d.WorkloadsResource, true)
	require.True(t, poolObjects(t, env, "n2")[object].Held)
	return object, d.WorkloadsResource[0]
}

// TestPoolReallocOfAnAttachedObject: a workload that attached an existing
// object (a failover) grows and shrinks it by realloc like any pool
// volume: the usage write adds the delta's signed bytes to the object and
// the pool, and the node's record agrees with the workload's plan.
func TestPoolReallocOfAnAttachedObject(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		for _, n := range []string{"n1", "n2"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "10G", "--if-version", "0")
		object, current := failedOver(t, env)
		binding := "POOL@ceph-a/" + object + ":/data:rw"

		steps := []struct {
			name  string
			delta string
			step  int64
			want  int64
		}{
			{"a growth adds its bytes to the object and to the pool", "1G", gib, 2 * gib},
			{"a shrink takes its bytes off the object and the pool", "-512M", -gib / 2, 3 * gib / 2},
		}
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				var r reallocAnswer
				env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n2", "workload_resource": current,
					"workload_resource_request": obj{"volumes": []string{binding + ":" + s.delta}}}, &r)
				require.Equal(t, []string{"/mnt/ceph-a/" + object + ":/data:rw:" + strconv.FormatInt(s.want, 10)}, r.EngineParams.Volumes)
				require.Equal(t, s.step, poolPlans(t, r.DeltaResource)[binding+":0:0:0:0:0"].Bytes)
				env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n2", "workloads_resource": []json.RawMessage{r.DeltaResource}, "delta": true, "incr": true}, nil)
				current = r.WorkloadResource

				living := exactPool(t, env, "ceph-a")
				require.Len(t, living, 1)
				require.Equal(t, storedObject{Node: "n2", Pool: "ceph-a", Bytes: s.want, Held: true}, living[object])
				v := poolGet(t, env, "ceph-a")
				require.Equal(t, s.want, v.Reserved)
				require.Equal(t, int64(1), v.Objects)
				require.Empty(t, info(t, env, "n2", current).Diffs)
			})
		}
	})
}

// TestPoolReallocSumsGrowthsPerPool: calculate-realloc admits the growths
// of a workload's pool volumes against each pool's room together, as the
// usage write will: two growths that fit only one by one are refused.
func TestPoolReallocSumsGrowthsPerPool(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "10G", "--if-version", "0")
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/a:rw:1G", "POOL:/b:rw:1G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		current := d.WorkloadsResource[0]

		cases := []struct {
			name    string
			volumes []string
			refusal string
		}{
			{"two growths that fit one by one but not together are refused naming their sum",
				[]string{"POOL:/a:rw:5G", "POOL:/b:rw:5G"}, "resource_exhausted: pool ceph-a has 8 GiB free, 10 GiB asked"},
			{"a growth and a new volume that fit one by one but not together are refused",
				[]string{"POOL:/a:rw:5G", "POOL:/c:rw:4G"}, "resource_exhausted: pool ceph-a has 8 GiB free, 9 GiB asked"},
			{"two growths that fit together pass and the usage write takes them", []string{"POOL:/a:rw:4G", "POOL:/b:rw:4G"}, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				req := obj{"nodename": "n1", "workload_resource": current, "workload_resource_request": obj{"volumes": c.volumes}}
				if c.refusal != "" {
					require.Contains(t, env.Fail(t, "storage", "calculate-realloc", req), c.refusal)
					return
				}
				var r reallocAnswer
				env.Call(t, "storage", "calculate-realloc", req, &r)
				env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []json.RawMessage{r.DeltaResource}, "delta": true, "incr": true}, nil)
				require.Len(t, exactPool(t, env, "ceph-a"), 2)
				require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
				require.Empty(t, info(t, env, "n1", r.WorkloadResource).Diffs)
			})
		}
	})
}

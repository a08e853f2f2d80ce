package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// The worked examples below run on standardNode: /data0 and /data1 of 1 TiB
// each, disk /dev/vda covering / and /data0 with 1000/1000 IOPS and 1/1 GiB
// BPS, and a 4 TiB storage total.

func TestCalculateDeployPlans(t *testing.T) {
	t.Parallel()
	vdaZero := disk{Device: "/dev/vda", Mounts: []string{"/", "/data0"}}
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("normal bindings open the smallest unused device and pack it", func(t *testing.T) {
			addNode(t, env, "n1", standardNode)
			d := deploy(t, env, "n1", 3, obj{"volumes": []string{"AUTO:/data:rw:100G"}})
			for i := range 3 {
				require.Equal(t, engineParams{
					Volumes:     []string{"/data0:/data:rw:107374182400"},
					Storage:     100 * gib,
					IOPSOptions: map[string]string{},
				}, d.EnginesParams[i])
				require.Equal(t, workload{
					VolumesRequest:    []string{"AUTO:/data:rw:107374182400:0:0:0:0"},
					VolumesLimit:      []string{"AUTO:/data:rw:107374182400:0:0:0:0"},
					VolumePlanRequest: map[string]map[string]int64{"AUTO:/data:rw:107374182400:0:0:0:0": {"/data0": 100 * gib}},
					VolumePlanLimit:   map[string]map[string]int64{"AUTO:/data:rw:107374182400:0:0:0:0": {"/data0": 100 * gib}},
					StorageRequest:    100 * gib,
					StorageLimit:      100 * gib,
					DisksRequest:      []disk{vdaZero},
					DisksLimit:        []disk{vdaZero},
				}, decodeWorkload(t, d.WorkloadsResource[i]))
			}
		})
		t.Run("a used device is filled before an unused one is opened", func(t *testing.T) {
			addNode(t, env, "n2", standardNode)
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n2", "resource_request": obj{"volumes": []string{"/data1:900G"}}, "delta": true, "incr": true}, nil)
			d := deploy(t, env, "n2", 2, obj{"volumes": []string{"AUTO:/data:rw:50G"}})
			require.Equal(t, []string{"/data1:/data:rw:53687091200"}, d.EnginesParams[0].Volumes)
			require.Equal(t, []string{"/data1:/data:rw:53687091200"}, d.EnginesParams[1].Volumes)
			d = deploy(t, env, "n2", 3, obj{"volumes": []string{"AUTO:/data:rw:50G"}})
			require.Equal(t, "/data1:/data:rw:53687091200", d.EnginesParams[1].Volumes[0], "/data1 holds two more of 50G (124G free)")
			require.Equal(t, "/data0:/data:rw:53687091200", d.EnginesParams[2].Volumes[0], "the third opens /data0")
		})
		t.Run("IO quota is charged to the covering disk and limits the plans", func(t *testing.T) {
			addNode(t, env, "n3", standardNode)
			req := obj{"volumes": []string{"AUTO:/data:rw:100G:400:300:10M:0"}}
			require.Equal(t, 2, capacity(t, env, []string{"n3"}, req).Nodes["n3"].Capacity, "1000 IOPS hold two of 400")
			d := deploy(t, env, "n3", 2, req)
			require.Equal(t, engineParams{
				Volumes:     []string{"/data0:/data:rw:107374182400:400:300:10485760:0"},
				Storage:     100 * gib,
				IOPSOptions: map[string]string{"/dev/vda": "400:300:10485760:0"},
			}, d.EnginesParams[0])
			w := decodeWorkload(t, d.WorkloadsResource[0])
			require.Equal(t, []disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 400, WriteIOPS: 300, ReadBPS: 10 << 20}}, w.DisksRequest)
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n3", "deploy_count": 3, "workload_resource_request": req})
			require.Equal(t, "storage: calculate-deploy: node n3: resource_exhausted: need 3 plans, have 2: plan 3: volume AUTO:/data:rw:107374182400:400:300:10485760:0 (100 GiB): the volumes with 100 GiB free (/data0) are on disk /dev/vda, which has 200:400:1052770304:1073741824 (asked 400:300:10485760:0) of IO quota left", line)
		})
		t.Run("a mount binding is not placed and charges the disk of its longest mount", func(t *testing.T) {
			addNode(t, env, "n4", obj{
				"volumes": []string{"/data0:1T"},
				"disks":   []string{"/dev/vda:/:1000:1000:0:0", "/dev/vdb:/data:100:100:0:0"},
			})
			cases := []struct {
				name, binding string
				want          int
				disk          string
			}{
				{"a path under /data is covered by /dev/vdb", "/data/logs:/logs:rw:0:50:50:0:0", 2, "/dev/vdb"},
				{"/database is not under /data and falls to /", "/database:/db:rw:0:50:50:0:0", 20, "/dev/vda"},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					req := obj{"volumes": []string{c.binding}}
					require.Equal(t, c.want, capacity(t, env, []string{"n4"}, req).Nodes["n4"].Capacity)
					d := deploy(t, env, "n4", 1, req)
					w := decodeWorkload(t, d.WorkloadsResource[0])
					require.Empty(t, w.VolumePlanRequest, "a mount binding is not placed")
					require.Len(t, w.DisksRequest, 1)
					require.Equal(t, c.disk, w.DisksRequest[0].Device)
					require.Equal(t, []string{c.binding}, d.EnginesParams[0].Volumes)
				})
			}
		})
		t.Run("a monopoly group splits one unused device in proportion, the remainder to the first", func(t *testing.T) {
			addNode(t, env, "n5", standardNode)
			req := obj{"volumes": []string{"AUTO:/b:mrw:200G", "AUTO:/a:mrw:100G"}}
			require.Equal(t, 2, capacity(t, env, []string{"n5"}, req).Nodes["n5"].Capacity, "one group per unused device")
			d := deploy(t, env, "n5", 1, req)
			// floor(100/300 of 1 TiB) = 366503875925, floor(200/300) = 733007751850,
			// and the byte left over goes to the smaller, first binding.
			w := decodeWorkload(t, d.WorkloadsResource[0])
			require.Equal(t, map[string]map[string]int64{
				"AUTO:/a:mrw:107374182400:0:0:0:0": {"/data0": 366503875926},
				"AUTO:/b:mrw:214748364800:0:0:0:0": {"/data0": 733007751850},
			}, w.VolumePlanRequest)
			require.ElementsMatch(t, []string{"/data0:/b:rw:733007751850", "/data0:/a:rw:366503875926"}, d.EnginesParams[0].Volumes)
			commit(t, env, "n5", d.WorkloadsResource, true)
			require.Equal(t, map[string]int64{"/data0": tib, "/data1": 0}, info(t, env, "n5", d.WorkloadsResource...).Usage.Volumes)
		})
		t.Run("unused devices become used while monopoly capacity exceeds normal capacity", func(t *testing.T) {
			addNode(t, env, "n6", standardNode)
			req := obj{"volumes": []string{"AUTO:/n:rw:100G", "AUTO:/m:mrw:500G"}}
			require.Equal(t, 1, capacity(t, env, []string{"n6"}, req).Nodes["n6"].Capacity)
			d := deploy(t, env, "n6", 1, req)
			w := decodeWorkload(t, d.WorkloadsResource[0])
			require.Equal(t, map[string]map[string]int64{
				"AUTO:/n:rw:107374182400:0:0:0:0":  {"/data0": 100 * gib},
				"AUTO:/m:mrw:536870912000:0:0:0:0": {"/data1": tib},
			}, w.VolumePlanRequest)
		})
		t.Run("an unlimited binding lands on the device with the most space left, charged nothing", func(t *testing.T) {
			addNode(t, env, "n7", standardNode)
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n7", "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true}, nil)
			req := obj{"volumes": []string{"AUTO:/u:rw:0"}}
			require.Equal(t, 10000, capacity(t, env, []string{"n7"}, req).Nodes["n7"].Capacity)
			d := deploy(t, env, "n7", 1, req)
			require.Equal(t, []string{"/data1:/u:rw:0"}, d.EnginesParams[0].Volumes)
			require.Equal(t, map[string]map[string]int64{"AUTO:/u:rw:0:0:0:0:0": {"/data1": 0}}, decodeWorkload(t, d.WorkloadsResource[0]).VolumePlanRequest)
		})
	})
}

func TestGetNodesDeployCapacity(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		addNode(t, env, "small", obj{"volumes": []string{"/data0:150G"}, "storage": "0"})
		nodes := []string{"n1", "small", "unknown"}
		t.Run("each node answers how many fit, its used fraction and one workload's share", func(t *testing.T) {
			got := capacity(t, env, nodes, obj{"volumes": []string{"AUTO:/data:rw:100G"}})
			require.Len(t, got.Nodes, 2, "the unknown node holds no storage and is left out")
			require.Equal(t, 20, got.Nodes["n1"].Capacity)
			require.Equal(t, 0.048828125, got.Nodes["n1"].Rate, "100G of 2T of volumes")
			require.Equal(t, 1.0, got.Nodes["n1"].Weight)
			require.Equal(t, 1, got.Nodes["small"].Capacity)
			require.Equal(t, 21, got.Total)
		})
		t.Run("usage counts in the used fraction", func(t *testing.T) {
			d := deploy(t, env, "n1", 3, obj{"volumes": []string{"AUTO:/data:rw:100G"}})
			commit(t, env, "n1", d.WorkloadsResource, true)
			got := capacity(t, env, nodes, obj{"volumes": []string{"AUTO:/data:rw:100G"}})
			require.Equal(t, 17, got.Nodes["n1"].Capacity)
			require.Equal(t, 300.0/2048, got.Nodes["n1"].Usage)
		})
		t.Run("the storage budget caps the count", func(t *testing.T) {
			got := capacity(t, env, nodes, obj{"storage": "1T"})
			require.Equal(t, 3, got.Nodes["n1"].Capacity, "4T total, 300G used")
			require.NotContains(t, got.Nodes, "small", "no budget at all")
			require.InDelta(t, 300.0/4096, got.Nodes["n1"].Usage, 1e-12)
			require.InDelta(t, 0.25, got.Nodes["n1"].Rate, 1e-12)
		})
		t.Run("a request with nothing to place answers max_deploy_count for every node", func(t *testing.T) {
			got := capacity(t, env, nodes, obj{})
			require.Equal(t, 10000, got.Nodes["n1"].Capacity)
			require.Equal(t, 10000, got.Nodes["small"].Capacity)
			require.Equal(t, 10000, got.Nodes["unknown"].Capacity)
			require.Equal(t, 30000, got.Total)
		})
		t.Run("nodes that fit nothing give an empty map, never null", func(t *testing.T) {
			raw := env.Call(t, "storage", "get-nodes-deploy-capacity", obj{"nodenames": nodes, "workload_resource": obj{"volumes": []string{"AUTO:/data:rw:100T"}}}, nil)
			require.JSONEq(t, `{"nodes_deploy_capacity_map": {}, "total": 0}`, string(raw))
		})
	})
}

func TestCalculateRealloc(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/data:rw:100G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		current := d.WorkloadsResource[0]

		realloc := func(t *testing.T, request obj) reallocAnswer {
			t.Helper()
			var out reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current, "workload_resource_request": request}, &out)
			return out
		}
		t.Run("a size adds to the binding it matches, which stays on its device", func(t *testing.T) {
			r := realloc(t, obj{"volumes": []string{"AUTO:/data:rw:100G"}})
			w := decodeWorkload(t, r.WorkloadResource)
			require.Equal(t, []string{"AUTO:/data:rw:214748364800:0:0:0:0"}, w.VolumesRequest)
			require.Equal(t, map[string]map[string]int64{"AUTO:/data:rw:214748364800:0:0:0:0": {"/data0": 200 * gib}}, w.VolumePlanRequest)
			require.Equal(t, 200*gib, w.StorageRequest)
			require.Equal(t, []string{"/data0:/data:rw:214748364800"}, r.EngineParams.Volumes)
			require.False(t, r.EngineParams.VolumeChanged, "a resize on the same device is no new volume: core updates in place")
			delta := decodeWorkload(t, r.DeltaResource)
			require.Equal(t, 100*gib, delta.StorageRequest)
			var onData0 int64
			for _, devs := range delta.VolumePlanRequest {
				onData0 += devs["/data0"]
			}
			require.Equal(t, 100*gib, onData0, "the delta charges only the difference")

			commit(t, env, "n1", []json.RawMessage{r.DeltaResource}, true)
			got := info(t, env, "n1", r.WorkloadResource)
			require.Equal(t, []string{}, got.Diffs, "usage after the delta equals the new workload")
			require.Equal(t, 200*gib, got.Usage.Volumes["/data0"])
			current = r.WorkloadResource
		})
		t.Run("a negative size shrinks", func(t *testing.T) {
			r := realloc(t, obj{"volumes": []string{"AUTO:/data:rw:-50G"}})
			require.Equal(t, map[string]map[string]int64{"AUTO:/data:rw:161061273600:0:0:0:0": {"/data0": 150 * gib}}, decodeWorkload(t, r.WorkloadResource).VolumePlanRequest)
			require.Equal(t, -50*gib, decodeWorkload(t, r.DeltaResource).StorageRequest)
		})
		t.Run("a storage-only change carries the plan through untouched", func(t *testing.T) {
			r := realloc(t, obj{"storage": "10G"})
			w := decodeWorkload(t, r.WorkloadResource)
			require.Equal(t, decodeWorkload(t, current).VolumePlanRequest, w.VolumePlanRequest)
			require.Equal(t, 210*gib, w.StorageRequest)
			require.False(t, r.EngineParams.VolumeChanged)
			require.Equal(t, 210*gib, r.EngineParams.Storage)
		})
		t.Run("shrinking a binding to nothing removes it", func(t *testing.T) {
			r := realloc(t, obj{"volumes": []string{"AUTO:/data:rw:-200G"}})
			w := decodeWorkload(t, r.WorkloadResource)
			require.Empty(t, w.VolumesRequest)
			require.Empty(t, w.VolumePlanRequest)
			require.True(t, r.EngineParams.VolumeChanged)
		})
		t.Run("growing past the device is refused", func(t *testing.T) {
			line := env.Fail(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": current, "workload_resource_request": obj{"volumes": []string{"AUTO:/data:rw:900G"}}})
			require.Contains(t, line, "node n1: resource_exhausted: volume AUTO:/data cannot grow")
		})
		t.Run("a new binding is scheduled afresh", func(t *testing.T) {
			r := realloc(t, obj{"volumes": []string{"AUTO:/more:rw:900G"}})
			w := decodeWorkload(t, r.WorkloadResource)
			require.Equal(t, map[string]int64{"/data1": 900 * gib}, w.VolumePlanRequest["AUTO:/more:rw:966367641600:0:0:0:0"], "/data0 has 824G free, so /data1 opens")
			require.Equal(t, map[string]int64{"/data0": 200 * gib}, w.VolumePlanRequest["AUTO:/data:rw:214748364800:0:0:0:0"])
		})
	})
}

func TestReallocKeepsAMonopolyGroupWhole(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/a:mrw:100G", "AUTO:/b:mrw:200G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		var r reallocAnswer
		env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": d.WorkloadsResource[0], "workload_resource_request": obj{"volumes": []string{"AUTO:/a:mrw:100G"}}}, &r)
		w := decodeWorkload(t, r.WorkloadResource)
		require.Equal(t, map[string]map[string]int64{
			"AUTO:/a:mrw:214748364800:0:0:0:0": {"/data0": tib / 2},
			"AUTO:/b:mrw:214748364800:0:0:0:0": {"/data0": tib / 2},
		}, w.VolumePlanRequest, "the group stays on /data0 and is split again")
		delta := decodeWorkload(t, r.DeltaResource)
		var total int64
		for _, devs := range delta.VolumePlanRequest {
			require.Len(t, devs, 1)
			total += devs["/data0"]
		}
		require.Zero(t, total, "the device was and stays wholly taken")
		require.Equal(t, 100*gib, delta.StorageRequest)
	})
}

// TestAnEmptyBindingListIsAMissingOne: core reads an empty list as no list
// (RawParams.OneOfStringSlice), and so did the upstream plugin; a client
// that sends every flag, given or not, sends "volumes-request": [].
func TestAnEmptyBindingListIsAMissingOne(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		plan := func(request obj) string {
			return string(env.Call(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 2, "workload_resource_request": request}, nil))
		}
		want := plan(obj{"volumes": []string{"AUTO:/data:rw:10G"}})
		for _, c := range []struct {
			name    string
			request obj
		}{
			{"an empty request list beside the limits", obj{"volumes-request": []string{}, "volumes": []string{"AUTO:/data:rw:10G"}}},
			{"an empty limit list beside the requests", obj{"volumes-request": []string{"AUTO:/data:rw:10G"}, "volumes-limit": []string{}}},
			{"an empty second spelling", obj{"volume": []string{}, "volumes": []string{"AUTO:/data:rw:10G"}}},
		} {
			t.Run(c.name+" plans as the list alone", func(t *testing.T) {
				require.Equal(t, want, plan(c.request))
			})
		}
	})
}

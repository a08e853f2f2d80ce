package main_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

func TestName(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	var name string
	env.Call(t, "storage", "name", obj{}, &name)
	require.Equal(t, "storage", name)
}

func TestAddNode(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("the request's volumes, disks and budget are recorded, the volumes added to the budget", func(t *testing.T) {
			got := addNode(t, env, "n1", standardNode)
			require.Equal(t, nodeResource{
				Volumes: map[string]int64{"/data0": tib, "/data1": tib},
				Disks:   []disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 1000, WriteIOPS: 1000, ReadBPS: gib, WriteBPS: gib}},
				Storage: 4 * tib,
			}, got.Capacity)
			require.Equal(t, nodeResource{
				Volumes: map[string]int64{"/data0": 0, "/data1": 0},
				Disks:   []disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}}},
			}, got.Usage)
			dump := env.Dump(t)
			require.Contains(t, dump, "/resource/storage/n1")
			require.Contains(t, dump, "/nodes/n1", "the registration is written with the first record")
		})
		t.Run("without a budget the node offers 80% of the engine's storage plus its volumes", func(t *testing.T) {
			var got nodeInfo
			env.Call(t, "storage", "add-node", obj{"nodename": "n2", "resource": obj{"volumes": []string{"/data0:100G"}}, "info": obj{"StorageTotal": 1000 * gib}}, &got)
			require.Equal(t, 800*gib+100*gib, got.Capacity.Storage)
		})
		t.Run("the engine's own storage report supplies what the request leaves out", func(t *testing.T) {
			reported, err := json.Marshal(obj{"volumes": obj{"/data0": 500 * gib}, "disks": []disk{{Device: "/dev/sda", Mounts: []string{"/data0"}, ReadIOPS: 10}}, "storage": 1000 * gib})
			require.NoError(t, err)
			var got nodeInfo
			env.Call(t, "storage", "add-node", obj{"nodename": "n3", "resource": obj{}, "info": obj{
				"StorageTotal": 1, "Resources": obj{"storage": base64.StdEncoding.EncodeToString(reported)},
			}}, &got)
			require.Equal(t, map[string]int64{"/data0": 500 * gib}, got.Capacity.Volumes)
			require.Equal(t, "/dev/sda", got.Capacity.Disks[0].Device)
			require.Equal(t, 800*gib+500*gib, got.Capacity.Storage)
		})
		t.Run("adding a node twice is refused and changes nothing", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "add-node", obj{"nodename": "n1", "resource": standardNode})
			require.Equal(t, "storage: add-node: node n1: already_exists: node exists", line)
			require.Equal(t, before, env.Dump(t))
		})
	})
}

func TestRemoveNode(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		t.Run("removing a node removes its record and its registration", func(t *testing.T) {
			env.Call(t, "storage", "remove-node", obj{"nodename": "n1"}, nil)
			require.Empty(t, env.Dump(t))
			require.Equal(t, "null", string(env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n1"}, nil)))
		})
		t.Run("removing an unknown node succeeds", func(t *testing.T) {
			var out map[string]any
			env.Call(t, "storage", "remove-node", obj{"nodename": "nobody"}, &out)
			require.Empty(t, out)
		})
		t.Run("the registration stays while another plugin still has the node", func(t *testing.T) {
			addNode(t, env, "n2", standardNode)
			env.Call(t, "compute", "add-node", obj{"nodename": "n2", "resource": obj{"cpu": 4, "memory": "8G"}}, nil)
			env.Call(t, "storage", "remove-node", obj{"nodename": "n2"}, nil)
			require.Equal(t, []string{"/nodes/n2", "/resource/compute/n2"}, testenv.Keys(env.Dump(t)))
			env.Call(t, "compute", "remove-node", obj{"nodename": "n2"}, nil)
			require.Empty(t, env.Dump(t))
		})
	})
}

func TestSetNodeResourceCapacity(t *testing.T) {
	t.Parallel()
	vda := disk{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 1000, WriteIOPS: 1000, ReadBPS: gib, WriteBPS: gib}
	cases := []struct {
		name         string
		request      obj
		delta, incr  bool
		wantVolumes  map[string]int64
		wantDisks    []disk
		wantStorage  int64
		wantUsageVol map[string]int64
	}{
		{
			name:        "an absolute request keeps what it leaves out and moves storage by the change of volumes",
			request:     obj{"volumes": []string{"/data2:1T"}},
			wantVolumes: map[string]int64{"/data0": tib, "/data1": tib, "/data2": tib},
			wantDisks:   []disk{vda}, wantStorage: 5 * tib,
			wantUsageVol: map[string]int64{"/data0": 0, "/data1": 0, "/data2": 0},
		},
		{
			name:        "a storage value alone becomes the node's storage total",
			request:     obj{"storage": "2T"},
			wantVolumes: map[string]int64{"/data0": tib, "/data1": tib}, wantDisks: []disk{vda}, wantStorage: 2 * tib,
			wantUsageVol: map[string]int64{"/data0": 0, "/data1": 0},
		},
		{
			name:        "a storage value is the total plus the volumes given with it",
			request:     obj{"storage": "1T", "volumes": []string{"/data1:2T"}},
			wantVolumes: map[string]int64{"/data0": tib, "/data1": 2 * tib}, wantDisks: []disk{vda}, wantStorage: 3 * tib,
			wantUsageVol: map[string]int64{"/data0": 0, "/data1": 0},
		},
		{
			name:        "a volume set to zero is removed with its size and its usage entry",
			request:     obj{"volumes": []string{"/data1:0"}},
			wantVolumes: map[string]int64{"/data0": tib}, wantDisks: []disk{vda}, wantStorage: 3 * tib,
			wantUsageVol: map[string]int64{"/data0": 0},
		},
		{
			name:        "an absolute disk is added beside the kept ones",
			request:     obj{"disks": []string{"/dev/vdb:/data1:500:500:100M:100M"}},
			wantVolumes: map[string]int64{"/data0": tib, "/data1": tib},
			wantDisks:   []disk{vda, {Device: "/dev/vdb", Mounts: []string{"/data1"}, ReadIOPS: 500, WriteIOPS: 500, ReadBPS: 100 << 20, WriteBPS: 100 << 20}},
			wantStorage: 4 * tib, wantUsageVol: map[string]int64{"/data0": 0, "/data1": 0},
		},
		{
			name:        "rm-disks removes disks in absolute mode",
			request:     obj{"rm-disks": "/dev/vda"},
			wantVolumes: map[string]int64{"/data0": tib, "/data1": tib}, wantDisks: []disk{}, wantStorage: 4 * tib,
			wantUsageVol: map[string]int64{"/data0": 0, "/data1": 0},
		},
		{
			name:    "a delta adds volumes and their size plus the budget to storage",
			request: obj{"volumes": []string{"/data0:1T"}, "storage": "1T"}, delta: true, incr: true,
			wantVolumes: map[string]int64{"/data0": 2 * tib, "/data1": tib}, wantDisks: []disk{vda}, wantStorage: 6 * tib,
			wantUsageVol: map[string]int64{"/data0": 0, "/data1": 0},
		},
		{
			name:    "a delta taking a volume to zero removes it",
			request: obj{"volumes": []string{"/data1:1T"}}, delta: true, incr: false,
			wantVolumes: map[string]int64{"/data0": tib}, wantDisks: []disk{vda}, wantStorage: 3 * tib,
			wantUsageVol: map[string]int64{"/data0": 0},
		},
		{
			name:    "a delta adds disk quota and mounts",
			request: obj{"disks": []string{"/dev/vda:/data1:100:100:0:0"}}, delta: true, incr: true,
			wantVolumes: map[string]int64{"/data0": tib, "/data1": tib},
			wantDisks:   []disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0", "/data1"}, ReadIOPS: 1100, WriteIOPS: 1100, ReadBPS: gib, WriteBPS: gib}},
			wantStorage: 4 * tib, wantUsageVol: map[string]int64{"/data0": 0, "/data1": 0},
		},
	}
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				node := "n" + string(rune('a'+i))
				original := addNode(t, env, node, standardNode)
				var ba beforeAfter
				env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": node, "resource_request": c.request, "delta": c.delta, "incr": c.incr}, &ba)
				var before, after nodeResource
				require.NoError(t, json.Unmarshal(ba.Before, &before))
				require.NoError(t, json.Unmarshal(ba.After, &after))
				require.Equal(t, original.Capacity, before, "before is the capacity as it was")
				got := info(t, env, node)
				require.Equal(t, after, got.Capacity, "after is the capacity as stored")
				require.Equal(t, c.wantVolumes, got.Capacity.Volumes)
				require.Equal(t, c.wantDisks, got.Capacity.Disks)
				require.Equal(t, c.wantStorage, got.Capacity.Storage)
				require.Equal(t, c.wantUsageVol, got.Usage.Volumes)
			})
		}
	})
}

// TestRollbackSnapshotsRestoreExactly replays each set verb's before the way
// core rolls a failed multi-plugin call back: delta false, a capacity
// snapshot through resource_request, a usage snapshot through resource.
func TestRollbackSnapshotsRestoreExactly(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		d := deploy(t, env, "n1", 2, obj{"volumes": []string{"AUTO:/data:rw:100G:100:100:0:0"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		original := env.Dump(t)["/resource/storage/n1"]

		t.Run("a capacity change is undone by replaying before", func(t *testing.T) {
			var ba beforeAfter
			env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data2:3T"}, "disks": []string{"/dev/vdb:/data2:1:1:1:1"}}, "delta": true, "incr": true}, &ba)
			require.NotEqual(t, original, env.Dump(t)["/resource/storage/n1"])
			env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "resource": nil, "resource_request": ba.Before, "delta": false, "incr": false}, nil)
			require.Equal(t, original, env.Dump(t)["/resource/storage/n1"])
		})
		t.Run("a usage change is undone by replaying before", func(t *testing.T) {
			var ba beforeAfter
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data1:10G"}}, "delta": true, "incr": true}, &ba)
			require.NotEqual(t, original, env.Dump(t)["/resource/storage/n1"])
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource": ba.Before, "resource_request": nil, "workloads_resource": nil, "delta": false, "incr": false}, nil)
			require.Equal(t, original, env.Dump(t)["/resource/storage/n1"])
		})
		t.Run("a removed node comes back verbatim through set-node-resource-info", func(t *testing.T) {
			got := info(t, env, "n1")
			env.Call(t, "storage", "remove-node", obj{"nodename": "n1"}, nil)
			env.Call(t, "storage", "set-node-resource-info", obj{"nodename": "n1", "capacity": got.Capacity, "usage": got.Usage}, nil)
			require.Equal(t, original, env.Dump(t)["/resource/storage/n1"])
		})
	})
}

func TestSetNodeResourceUsage(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		set := func(t *testing.T, req obj) nodeResource {
			t.Helper()
			req["nodename"] = "n1"
			var ba beforeAfter
			env.Call(t, "storage", "set-node-resource-usage", req, &ba)
			var after nodeResource
			require.NoError(t, json.Unmarshal(ba.After, &after))
			require.Equal(t, after, info(t, env, "n1").Usage)
			return after
		}
		t.Run("a request-form delta adds volume bytes, their size to storage, and quota", func(t *testing.T) {
			u := set(t, obj{"resource_request": obj{"volumes": []string{"/data0:10G"}, "storage": "1G", "disks": []string{"/dev/vda:/:10:20:0:0"}}, "delta": true, "incr": true})
			require.Equal(t, map[string]int64{"/data0": 10 * gib, "/data1": 0}, u.Volumes)
			require.Equal(t, 11*gib, u.Storage)
			require.Equal(t, int64(10), u.Disks[0].ReadIOPS)
			require.Equal(t, int64(20), u.Disks[0].WriteIOPS)
		})
		t.Run("a stored-form resource replaces the usage in absolute mode", func(t *testing.T) {
			u := set(t, obj{"resource": obj{"volumes": obj{"/data1": 5 * gib}, "disks": []obj{}, "storage": 5 * gib}, "delta": false})
			require.Equal(t, map[string]int64{"/data0": 0, "/data1": 5 * gib}, u.Volumes)
			require.Equal(t, 5*gib, u.Storage)
			require.Equal(t, int64(0), u.Disks[0].ReadIOPS)
		})
		t.Run("the workloads' sum replaces the usage in absolute mode", func(t *testing.T) {
			d := deploy(t, env, "n1", 2, obj{"volumes": []string{"AUTO:/data:rw:100G"}})
			u := set(t, obj{"workloads_resource": d.WorkloadsResource, "delta": false})
			require.Equal(t, map[string]int64{"/data0": 0, "/data1": 200 * gib}, u.Volumes, "best fit: /data1 is the only used device and holds both")
			require.Equal(t, 200*gib, u.Storage)
		})
		t.Run("the workloads' usage is subtracted as core removes them", func(t *testing.T) {
			var ws []json.RawMessage
			for range 2 {
				ws = append(ws, json.RawMessage(`{"volume_plan_request":{"AUTO:/data:rw:107374182400:0:0:0:0":{"/data1":107374182400}},"storage_request":107374182400}`))
			}
			u := set(t, obj{"workloads_resource": ws, "delta": true, "incr": false})
			require.Equal(t, map[string]int64{"/data0": 0, "/data1": 0}, u.Volumes)
			require.Equal(t, int64(0), u.Storage)
		})
	})
}

func TestGetNodeResourceInfoAndFix(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("an unknown node answers null", func(t *testing.T) {
			require.Equal(t, "null", string(env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "nobody"}, nil)))
		})
		t.Run("fixing an unknown node is not found", func(t *testing.T) {
			line := env.Fail(t, "storage", "fix-node-resource", obj{"nodename": "nobody", "workloads_resource": []any{}})
			require.Contains(t, line, "node nobody: not_found:")
		})
		addNode(t, env, "n1", standardNode)
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/data:rw:100G:10:0:0:0"}})
		t.Run("usage that disagrees with the workloads is reported in both directions", func(t *testing.T) {
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data1:1G"}}, "delta": true, "incr": true}, nil)
			got := info(t, env, "n1", d.WorkloadsResource...)
			require.Equal(t, []string{
				"storage: stored usage 1073741824, workloads hold 107374182400",
				"volume /data0: stored usage 0, workloads hold 107374182400",
				"volume /data1: stored usage 1073741824, workloads hold 0",
				"disk /dev/vda read_IOPS: stored usage 0, workloads hold 10",
			}, got.Diffs)
		})
		t.Run("workloads holding more than the node can are reported, and fix refuses to write them", func(t *testing.T) {
			impossible := []json.RawMessage{
				json.RawMessage(`{"volume_plan_request": {"AUTO:/x:rw:1:0:0:0:0": {"/gone": 1073741824}}, "storage_request": 8000000000000000}`),
			}
			got := info(t, env, "n1", impossible...)
			require.Contains(t, got.Diffs, "volume /gone: stored usage 0, workloads hold 1073741824")
			require.Contains(t, got.Diffs, "storage: stored usage 1073741824, workloads hold 8000000000000000")
			before := env.Dump(t)
			line := env.Fail(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": impossible})
			require.Contains(t, line, "node n1: failed_precondition: the workloads' usage cannot be written: ")
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("fix writes the workloads' usage and reports what it fixed", func(t *testing.T) {
			var fixed nodeInfo
			env.Call(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": d.WorkloadsResource}, &fixed)
			require.Len(t, fixed.Diffs, 4)
			require.Equal(t, map[string]int64{"/data0": 100 * gib, "/data1": 0}, fixed.Usage.Volumes)
			got := info(t, env, "n1", d.WorkloadsResource...)
			require.Equal(t, []string{}, got.Diffs)
			require.Equal(t, fixed.Usage, got.Usage)
		})
	})
}

func TestGetMostIdleNodeAnswersTheFirstNode(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	var out struct {
		Nodename string `json:"nodename"`
		Priority int    `json:"priority"`
	}
	env.Call(t, "storage", "get-most-idle-node", obj{"nodenames": []string{"n2", "n1"}}, &out)
	require.Equal(t, "n2", out.Nodename)
	require.Equal(t, 1, out.Priority)
}

func TestCalculateRemapIsANoOp(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	raw := env.Call(t, "storage", "calculate-remap", obj{"nodename": "n1", "workloads_resource": obj{"w1": obj{}}}, nil)
	require.JSONEq(t, `{"engine_params_map": {}}`, string(raw))
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("the description declares the gauges and their label names", func(t *testing.T) {
			var desc []struct {
				Name   string   `json:"name"`
				Type   string   `json:"type"`
				Labels []string `json:"labels"`
			}
			env.Call(t, "storage", "get-metrics-description", obj{}, &desc)
			require.Len(t, desc, 6)
			names := map[string][]string{}
			for _, d := range desc {
				require.Equal(t, "gauge", d.Type)
				names[d.Name] = d.Labels
			}
			require.Equal(t, map[string][]string{
				"storage_used":            {"podname", "nodename"},
				"storage_capacity":        {"podname", "nodename"},
				"storage_volume_used":     {"podname", "nodename", "device"},
				"storage_volume_capacity": {"podname", "nodename", "device"},
				"storage_pool_held_bytes": {"podname", "nodename", "pool"},
				"node_schedulable":        {"podname", "nodename"},
			}, names)
		})
		addNode(t, env, "node.one", obj{"volumes": []string{"/data.0:1T"}, "storage": "1T"})
		env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "node.one", "resource_request": obj{"volumes": []string{"/data.0:1G"}}, "delta": true, "incr": true}, nil)
		type metric struct {
			Name   string   `json:"name"`
			Labels []string `json:"labels"`
			Key    string   `json:"key"`
			Value  string   `json:"value"`
		}
		want := []metric{
			{"storage_used", []string{"pod1", "node.one"}, "core.node.node_one.storage.used", "1073741824"},
			{"storage_capacity", []string{"pod1", "node.one"}, "core.node.node_one.storage.capacity", "2199023255552"},
			{"storage_volume_used", []string{"pod1", "node.one", "/data.0"}, "core.node.node_one.storage.volume._data_0.used", "1073741824"},
			{"storage_volume_capacity", []string{"pod1", "node.one", "/data.0"}, "core.node.node_one.storage.volume._data_0.capacity", "1099511627776"},
			{"node_schedulable", []string{"pod1", "node.one"}, "core.node.node_one.storage.schedulable", "1"},
		}
		t.Run("a node's samples carry its label values, statsd keys and values as strings", func(t *testing.T) {
			var got []metric
			env.Call(t, "storage", "get-metrics", obj{"podname": "pod1", "nodename": "node.one"}, &got)
			require.Equal(t, want, got)
		})
		t.Run("a batch of nodes answers each known node", func(t *testing.T) {
			var got []metric
			env.Call(t, "storage", "get-metrics", obj{"nodes": []obj{{"podname": "pod1", "nodename": "node.one"}, {"podname": "pod1", "nodename": "unknown"}}}, &got)
			require.Equal(t, want, got)
		})
		t.Run("an unknown node has no samples", func(t *testing.T) {
			raw := env.Call(t, "storage", "get-metrics", obj{"podname": "pod1", "nodename": "unknown"}, nil)
			require.Equal(t, "[]", strings.TrimSpace(string(raw)))
		})
	})
}

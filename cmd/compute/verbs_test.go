package main_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

func TestName(t *testing.T) {
	env := testenv.NewEmbedded(t)
	raw := env.Call(t, bin, "name", nil, nil)
	require.Equal(t, `"compute"`, string(raw))
}

func TestAddNode(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("the answer is the host with the figures in effect, and no usage", func(t *testing.T) {
			raw := env.Call(t, bin, "add-node", obj{"nodename": "n1", "resource": obj{"cpu": "1.5", "memory": "64G"}}, nil)
			require.JSONEq(t, `{"capacity": {"cpu_millis": 1500, "memory_bytes": 68719476736, "cpu_ratio": 1000, "memory_ratio": 1000,
				"schedulable_cpu_millis": 1500, "schedulable_memory_bytes": 68719476736, "cpu_ratio_source": "DEFAULT", "memory_ratio_source": "DEFAULT", "overcommit_version": 0},
				"usage": {"cpu_millis": 0, "memory_bytes": 0}}`, string(raw))
		})
		t.Run("the record is stored in its own shape and the node is registered", func(t *testing.T) {
			dump := env.Dump(t)
			require.JSONEq(t, `{"capacity": {"cpu_millis": 1500, "memory_bytes": 68719476736}, "usage": {"cpu_millis": 0, "memory_bytes": 0},
				"override": {}, "version": 0}`, dump["/resource/compute/n1"])
			require.Contains(t, dump, "/nodes/n1")
		})
		t.Run("adding it again is refused and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 2, "memory": "1G"}})
				require.Equal(t, "compute: add-node: node n1: already_exists: node exists", line)
			})
		})
		t.Run("what the request leaves out comes from the engine's compute resource, then NCPU and MemTotal", func(t *testing.T) {
			reported := base64.StdEncoding.EncodeToString([]byte(`{"cpu": 12}`))
			var out nodeResource
			env.Call(t, bin, "add-node", obj{"nodename": "n2", "resource": obj{},
				"info": obj{"Type": "docker", "NCPU": 8, "MemTotal": 16777216000, "Resources": obj{"compute": reported}}}, &out)
			require.Equal(t, int64(12000), out.Capacity.CPUMillis)
			require.Equal(t, int64(16777216000), out.Capacity.MemoryBytes)
			env.Call(t, bin, "add-node", obj{"nodename": "n3", "resource": nil, "info": obj{"NCPU": 8, "MemTotal": 16777216000}}, &out)
			require.Equal(t, int64(8000), out.Capacity.CPUMillis)
			require.Equal(t, int64(16777216000), out.Capacity.MemoryBytes)
		})
		for _, c := range []struct {
			name     string
			resource obj
			want     string
		}{
			{"a node with neither request nor engine figures is refused", obj{}, "the node's cpu and memory are unknown"},
			{"a node whose memory is known nowhere is refused naming the memory", obj{"cpu": 4}, "the node's memory is unknown"},
			{"a node whose cpu is known nowhere is refused naming the cpu", obj{"memory": "4G"}, "the node's cpu is unknown"},
		} {
			t.Run(c.name, func(t *testing.T) {
				unchanged(t, env, func() {
					line := env.Fail(t, bin, "add-node", obj{"nodename": "n4", "resource": c.resource, "info": nil})
					require.Contains(t, line, "compute: add-node: node n4: invalid_argument: "+c.want+":")
				})
			})
		}
	})
}

func TestRemoveNode(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		env.OpOK(t, bin, nil, "overcommit", "set-node", "n1", "--cpu", "4000")
		t.Run("removing a node deletes its record, registration and overrides", func(t *testing.T) {
			raw := env.Call(t, bin, "remove-node", obj{"nodename": "n1"}, nil)
			require.Equal(t, `{}`, string(raw))
			require.Empty(t, testenv.Keys(env.Dump(t)))
			require.Equal(t, "null", string(env.Call(t, bin, "get-node-resource-info", obj{"nodename": "n1"}, nil)))
			addNode(t, env, "n1", 16, "64G")
			require.Equal(t, effective{1000, "DEFAULT"}, getNode(t, env, "n1").CPU, "the override went with the record")
		})
		t.Run("removing a node compute never saw succeeds and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				require.Equal(t, `{}`, string(env.Call(t, bin, "remove-node", obj{"nodename": "ghost"}, nil)))
			})
		})
	})
}

func TestGetNodesDeployCapacity(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		addNode(t, env, "n2", 4, "8G")
		place(t, env, "n1", 4, obj{"cpu": 2, "memory": "8G"})
		t.Run("each node answers capacity, usage, rate and weight, and total sums them", func(t *testing.T) {
			raw := env.Call(t, bin, "get-nodes-deploy-capacity", obj{"nodenames": []string{"n1", "n2"}, "workload_resource": obj{"cpu": 2, "memory": "4G"}}, nil)
			// n1: cpu (16000-8000)/2000 = 4, memory (64-32)/4 = 8; usage = max(0.5, 0.5); rate 2000/16000.
			// n2: cpu 4000/2000 = 2, memory 8/4 = 2; nothing used.
			require.JSONEq(t, `{"nodes_deploy_capacity_map": {
				"n1": {"capacity": 4, "usage": 0.5, "rate": 0.125, "weight": 1},
				"n2": {"capacity": 2, "usage": 0, "rate": 0.5, "weight": 1}}, "total": 6}`, string(raw))
		})
		t.Run("a node without room is left out", func(t *testing.T) {
			caps := capacities(t, env, obj{"memory": "16G"}, "n1", "n2")
			require.Equal(t, deployCapacities{Nodes: map[string]nodeCapacity{"n1": {Capacity: 2, Usage: 0.5, Rate: 0.25, Weight: 1}}, Total: 2}, caps)
		})
		t.Run("a node compute never saw has no room for cpu", func(t *testing.T) {
			caps := capacities(t, env, obj{"cpu": "0.001"}, "ghost")
			require.Equal(t, deployCapacities{Nodes: map[string]nodeCapacity{}, Total: 0}, caps)
		})
		t.Run("a request asking nothing fits max_deploy_count anywhere, even on an unknown node", func(t *testing.T) {
			caps := capacities(t, env, obj{}, "ghost", "n1")
			require.Equal(t, 10000, caps.Nodes["ghost"].Capacity)
			require.Equal(t, 10000, caps.Nodes["n1"].Capacity)
			require.Equal(t, 20000, caps.Total)
		})
		t.Run("no node names answer an empty map", func(t *testing.T) {
			raw := env.Call(t, bin, "get-nodes-deploy-capacity", obj{"nodenames": []string{}, "workload_resource": obj{"cpu": 1}}, nil)
			require.JSONEq(t, `{"nodes_deploy_capacity_map": {}, "total": 0}`, string(raw))
		})
		t.Run("a host shrunk to no memory under what is reserved reads as fully used", func(t *testing.T) {
			addNode(t, env, "n3", 4, "8G")
			place(t, env, "n3", 1, obj{"cpu": 1, "memory": "4G"})
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n3", "resource_request": obj{"memory": "-8G"}, "delta": true, "incr": true}, nil)
			caps := capacities(t, env, obj{"cpu": 1}, "n3")
			require.Equal(t, deployCapacities{Nodes: map[string]nodeCapacity{"n3": {Capacity: 3, Usage: 1, Rate: 0, Weight: 1}}, Total: 3}, caps)
		})
	})
}

func TestSetNodeResourceCapacity(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		env.OpOK(t, bin, nil, "overcommit", "set-defaults", "--cpu", "4000", "--memory", "1500")
		host16 := capacity{CPUMillis: 16000, MemoryBytes: 64 * gib, CPURatio: 4000, MemoryRatio: 1500, SchedulableCPUMillis: 64000, SchedulableMemoryBytes: 96 * gib}
		var change capacityChange
		t.Run("an absolute request replaces what it names, with before and after in the answer", func(t *testing.T) {
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"cpu": 32}, "delta": false, "incr": false}, &change)
			require.Equal(t, host16, change.Before)
			require.Equal(t, capacity{CPUMillis: 32000, MemoryBytes: 64 * gib, CPURatio: 4000, MemoryRatio: 1500, SchedulableCPUMillis: 128000, SchedulableMemoryBytes: 96 * gib}, change.After)
		})
		t.Run("the before snapshot replayed through resource_request restores the record exactly", func(t *testing.T) {
			before := change.Before
			var undo capacityChange
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": before, "delta": false, "incr": true}, &undo)
			require.Equal(t, host16, undo.After)
			require.JSONEq(t, `{"capacity": {"cpu_millis": 16000, "memory_bytes": 68719476736}, "usage": {"cpu_millis": 0, "memory_bytes": 0},
				"override": {}, "version": 0}`, env.Dump(t)["/resource/compute/n1"])
		})
		t.Run("a delta adds with incr and subtracts without", func(t *testing.T) {
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"cpu": 4, "memory": "16G"}, "delta": true, "incr": true}, &change)
			require.Equal(t, int64(20000), change.After.CPUMillis)
			require.Equal(t, 80*gib, change.After.MemoryBytes)
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"cpu": 4, "memory": "16G"}, "delta": true, "incr": false}, &change)
			require.Equal(t, host16, change.After)
		})
		t.Run("a delta taking the host below zero is refused and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"cpu": 17}, "delta": true, "incr": false})
				require.Equal(t, "compute: set-node-resource-capacity: node n1: failed_precondition: cpu: capacity 16000 millicores -17000 would be -1000, below zero", line)
			})
		})
		t.Run("a node compute never saw starts from nothing", func(t *testing.T) {
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n2", "resource_request": obj{"cpu": 8, "memory": "8G"}}, &change)
			require.Equal(t, capacity{CPURatio: 4000, MemoryRatio: 1500}, change.Before)
			require.Equal(t, int64(8000), change.After.CPUMillis)
			require.Equal(t, 8*gib, info(t, env, "n2").Capacity.MemoryBytes)
		})
	})
}

func TestGetNodeResourceInfo(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("a node compute never saw is null", func(t *testing.T) {
			res := env.Verb(t, bin, "get-node-resource-info", obj{"nodename": "ghost"})
			require.Equal(t, 0, res.Code)
			require.Empty(t, res.Stderr)
			require.Equal(t, "null\n", res.Stdout)
		})
		addNode(t, env, "n1", 16, "64G")
		place(t, env, "n1", 2, obj{"cpu-request": 1, "cpu-limit": 2, "memory": "1G"})
		held := []workload{{1000, 2000, gib, gib}, {1000, 2000, gib, gib}}
		t.Run("workloads matching the usage leave no diffs", func(t *testing.T) {
			unchanged(t, env, func() {
				raw := env.Call(t, bin, "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": held}, nil)
				require.JSONEq(t, `{"capacity": {"cpu_millis": 16000, "memory_bytes": 68719476736, "cpu_ratio": 1000, "memory_ratio": 1000,
					"schedulable_cpu_millis": 16000, "schedulable_memory_bytes": 68719476736, "cpu_ratio_source": "DEFAULT", "memory_ratio_source": "DEFAULT", "overcommit_version": 0},
					"usage": {"cpu_millis": 2000, "memory_bytes": 2147483648}, "diffs": []}`, string(raw))
			})
		})
		t.Run("workloads disagreeing with the usage are reported and nothing is written", func(t *testing.T) {
			unchanged(t, env, func() {
				var out nodeResource
				env.Call(t, bin, "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": held[:1]}, &out)
				require.Equal(t, []string{
					"cpu: stored usage 2000 millicores, workloads hold 1000",
					"memory: stored usage 2147483648 bytes, workloads hold 1073741824",
				}, out.Diffs)
				require.Equal(t, amount{2000, 2 * gib}, out.Usage)
			})
		})
	})
}

func TestSetNodeResourceInfo(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		place(t, env, "n1", 3, obj{"cpu": 1.5, "memory": "1G"})
		saved := env.Call(t, bin, "get-node-resource-info", obj{"nodename": "n1"}, nil)
		var snap struct {
			Capacity json.RawMessage `json:"capacity"`
			Usage    json.RawMessage `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(saved, &snap))
		env.Call(t, bin, "remove-node", obj{"nodename": "n1"}, nil)

		t.Run("what get-node-resource-info answered restores a removed node verbatim", func(t *testing.T) {
			raw := env.Call(t, bin, "set-node-resource-info", obj{"nodename": "n1", "capacity": snap.Capacity, "usage": snap.Usage}, nil)
			require.Equal(t, `{}`, string(raw))
			require.JSONEq(t, string(saved), string(env.Call(t, bin, "get-node-resource-info", obj{"nodename": "n1"}, nil)))
			require.JSONEq(t, `{"capacity": {"cpu_millis": 16000, "memory_bytes": 68719476736}, "usage": {"cpu_millis": 4500, "memory_bytes": 3221225472},
				"override": {}, "version": 0}`, env.Dump(t)["/resource/compute/n1"])
		})
		t.Run("a capacity in request form is refused instead of wiping the node", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "set-node-resource-info", obj{"nodename": "n1", "capacity": obj{"cpu": 16, "memory": "64G"}, "usage": snap.Usage})
				require.Equal(t, `compute: set-node-resource-info: node n1: invalid_argument: capacity: not a stored compute resource: "cpu_millis" is missing (want {"cpu_millis": N, "memory_bytes": N})`, line)
			})
		})
	})
}

func TestSetNodeResourceUsage(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		set := func(t *testing.T, req obj) usageChange {
			t.Helper()
			req["nodename"] = "n1"
			var out usageChange
			env.Call(t, bin, "set-node-resource-usage", req, &out)
			return out
		}
		t.Run("a request adds with delta and incr", func(t *testing.T) {
			require.Equal(t, usageChange{amount{}, amount{1500, gib}}, set(t, obj{"resource_request": obj{"cpu": 1.5, "memory": "1G"}, "delta": true, "incr": true}))
		})
		t.Run("a request subtracts with delta and no incr", func(t *testing.T) {
			require.Equal(t, usageChange{amount{1500, gib}, amount{1000, gib}}, set(t, obj{"resource_request": obj{"cpu": "0.5"}, "delta": true, "incr": false}))
		})
		t.Run("an absolute request replaces what it names and ignores incr", func(t *testing.T) {
			require.Equal(t, usageChange{amount{1000, gib}, amount{4000, gib}}, set(t, obj{"resource_request": obj{"cpu": 4}, "delta": false, "incr": false}))
		})
		t.Run("workloads add their requests with incr", func(t *testing.T) {
			ws := []any{workload{2000, 4000, gib, 2 * gib}, nil, workload{500, 500, 0, 0}}
			require.Equal(t, usageChange{amount{4000, gib}, amount{6500, 2 * gib}}, set(t, obj{"workloads_resource": ws, "delta": true, "incr": true}))
		})
		t.Run("workloads subtract their requests without incr", func(t *testing.T) {
			ws := []workload{{2000, 4000, gib, 2 * gib}}
			require.Equal(t, usageChange{amount{6500, 2 * gib}, amount{4500, gib}}, set(t, obj{"workloads_resource": ws, "delta": true, "incr": false}))
		})
		t.Run("workloads replace the usage in absolute mode", func(t *testing.T) {
			ws := []workload{{1000, 1000, gib, gib}, {1000, 1000, gib, gib}}
			require.Equal(t, usageChange{amount{4500, gib}, amount{2000, 2 * gib}}, set(t, obj{"workloads_resource": ws, "delta": false}))
		})
		t.Run("the before snapshot replayed through resource restores the usage", func(t *testing.T) {
			change := set(t, obj{"resource_request": obj{"cpu": 8}, "delta": true, "incr": true})
			require.Equal(t, amount{10000, 2 * gib}, change.After)
			undo := set(t, obj{"resource": change.Before, "delta": false})
			require.Equal(t, amount{2000, 2 * gib}, undo.After)
			require.Equal(t, amount{2000, 2 * gib}, info(t, env, "n1").Usage)
		})
		t.Run("usage past schedulable is accepted: core has already decided", func(t *testing.T) {
			change := set(t, obj{"resource_request": obj{"cpu": 100}, "delta": false})
			require.Equal(t, amount{100000, 2 * gib}, change.After)
			set(t, obj{"resource": change.Before})
		})
		t.Run("a decrease below zero is refused and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"cpu": 3}, "delta": true, "incr": false})
				require.Equal(t, "compute: set-node-resource-usage: node n1: invalid_argument: usage cpu_millis would be -1000, below zero", line)
			})
		})
		t.Run("a node compute never saw starts from nothing", func(t *testing.T) {
			var out usageChange
			env.Call(t, bin, "set-node-resource-usage", obj{"nodename": "n2", "resource_request": obj{"cpu": 1}, "delta": true, "incr": true}, &out)
			require.Equal(t, usageChange{amount{}, amount{1000, 0}}, out)
			require.Contains(t, env.Dump(t), "/resource/compute/n2")
		})
	})
}

func TestGetMostIdleNode(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "busy", 4, "8G")
		addNode(t, env, "idle", 16, "8G")
		addNode(t, env, "quarter", 16, "8G")
		place(t, env, "busy", 1, obj{"cpu": 1})       // 25% of 4
		place(t, env, "idle", 1, obj{"cpu": 1})       // 6.25% of 16
		place(t, env, "quarter", 1, obj{"cpu": 4})    // 25% of 16
		place(t, env, "busy", 1, obj{"memory": "7G"}) // memory does not count
		t.Run("the node with the lowest used cpu fraction is answered with priority 1", func(t *testing.T) {
			raw := env.Call(t, bin, "get-most-idle-node", obj{"nodenames": []string{"busy", "quarter", "idle", "ghost"}}, nil)
			require.JSONEq(t, `{"nodename": "idle", "priority": 1}`, string(raw))
		})
		t.Run("the fraction is of schedulable, so an override counts", func(t *testing.T) {
			env.OpOK(t, bin, nil, "overcommit", "set-node", "busy", "--cpu", "16000") // 1000 of 64000
			raw := env.Call(t, bin, "get-most-idle-node", obj{"nodenames": []string{"quarter", "idle", "busy"}}, nil)
			require.JSONEq(t, `{"nodename": "busy", "priority": 1}`, string(raw))
		})
		t.Run("no node names is refused", func(t *testing.T) {
			line := env.Fail(t, bin, "get-most-idle-node", obj{"nodenames": []string{}})
			require.Equal(t, "compute: get-most-idle-node: invalid_argument: nodenames is empty", line)
		})
	})
}

func TestFixNodeResource(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		place(t, env, "n1", 3, obj{"cpu": 2, "memory": "1G"})
		survivors := []workload{{2000, 2000, gib, gib}}
		t.Run("the diffs are answered and the usage rewritten from the workloads", func(t *testing.T) {
			var out nodeResource
			env.Call(t, bin, "fix-node-resource", obj{"nodename": "n1", "workloads_resource": survivors}, &out)
			require.Equal(t, []string{
				"cpu: stored usage 6000 millicores, workloads hold 2000",
				"memory: stored usage 3221225472 bytes, workloads hold 1073741824",
			}, out.Diffs)
			require.Equal(t, amount{2000, gib}, out.Usage)
			require.Equal(t, amount{2000, gib}, info(t, env, "n1").Usage)
		})
		t.Run("a fixed node has no diffs and nothing is written", func(t *testing.T) {
			unchanged(t, env, func() {
				var out nodeResource
				raw := env.Call(t, bin, "fix-node-resource", obj{"nodename": "n1", "workloads_resource": survivors}, &out)
				require.Contains(t, string(raw), `"diffs":[]`)
			})
		})
		t.Run("a node compute never saw is not found", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "fix-node-resource", obj{"nodename": "ghost", "workloads_resource": survivors})
				require.Equal(t, "compute: fix-node-resource: node ghost: not_found: the compute plugin has no record of this node", line)
			})
		})
	})
}

func TestCalculateDeploy(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 4, "8G")
		t.Run("each workload gets empty engine params and its resource in stored form, and nothing is written", func(t *testing.T) {
			unchanged(t, env, func() {
				raw := env.Call(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 2,
					"workload_resource_request": obj{"cpu": "1.5", "memory-request": "1G", "memory-limit": "2G"}}, nil)
				one := `{"cpu_request_millis": 1500, "cpu_limit_millis": 1500, "memory_request": 1073741824, "memory_limit": 2147483648}`
				require.JSONEq(t, `{"engines_params": [{}, {}], "workloads_resource": [`+one+`, `+one+`]}`, string(raw))
			})
		})
		t.Run("more than schedulable is refused with the figures", func(t *testing.T) {
			line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 3, "workload_resource_request": obj{"memory": "3G"}})
			require.Equal(t, "compute: calculate-deploy: node n1: resource_exhausted: memory: need 9663676416 bytes (3 workloads x 3221225472), have 8589934592 left: 0 used of 8589934592 schedulable (host 8589934592 bytes x ratio 1000)", line)
		})
		t.Run("a node compute never saw takes a request that asks for nothing", func(t *testing.T) {
			raw := env.Call(t, bin, "calculate-deploy", obj{"nodename": "ghost", "deploy_count": 1, "workload_resource_request": obj{}}, nil)
			require.JSONEq(t, `{"engines_params": [{}], "workloads_resource": [{"cpu_request_millis": 0, "cpu_limit_millis": 0, "memory_request": 0, "memory_limit": 0}]}`, string(raw))
		})
		t.Run("a node compute never saw refuses cpu", func(t *testing.T) {
			line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "ghost", "deploy_count": 1, "workload_resource_request": obj{"cpu": 1}})
			require.Contains(t, line, "compute: calculate-deploy: node ghost: resource_exhausted: cpu: need 1000 millicores")
		})
		t.Run("a deploy count of zero is invalid", func(t *testing.T) {
			line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 0, "workload_resource_request": obj{"cpu": 1}})
			require.Equal(t, "compute: calculate-deploy: node n1: invalid_argument: deploy_count 0: want at least 1", line)
		})
	})
}

func TestCalculateRealloc(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 4, "8G")
		place(t, env, "n1", 1, obj{"cpu": 2, "memory": "2G"})
		held := workload{2000, 2000, 2 * gib, 2 * gib}
		realloc := func(t *testing.T, delta obj) reallocPlan {
			t.Helper()
			var out reallocPlan
			raw := env.Call(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": delta}, &out)
			require.JSONEq(t, `{}`, string(out.EngineParams), "%s", raw)
			return out
		}
		t.Run("growing within schedulable answers the grown workload and a positive delta", func(t *testing.T) {
			unchanged(t, env, func() {
				out := realloc(t, obj{"cpu": 2, "memory-request": "1G"})
				require.Equal(t, workload{4000, 4000, 3 * gib, 3 * gib}, out.WorkloadResource)
				require.Equal(t, workload{2000, 2000, gib, gib}, out.DeltaResource)
			})
		})
		t.Run("shrinking answers a negative delta, and core applies it as a workload with incr", func(t *testing.T) {
			out := realloc(t, obj{"cpu": "-1.5", "memory": "-1G"})
			require.Equal(t, workload{500, 500, gib, gib}, out.WorkloadResource)
			require.Equal(t, workload{-1500, -1500, -gib, -gib}, out.DeltaResource)
			var change usageChange
			env.Call(t, bin, "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []workload{out.DeltaResource}, "delta": true, "incr": true}, &change)
			require.Equal(t, usageChange{amount{2000, 2 * gib}, amount{500, gib}}, change)
			held = out.WorkloadResource
		})
		t.Run("growing past schedulable is refused with the figures", func(t *testing.T) {
			line := env.Fail(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": obj{"cpu": 4}})
			require.Equal(t, "compute: calculate-realloc: node n1: resource_exhausted: cpu: need 4000 millicores (growing the workload), have 3500 left: 500 used of 4000 schedulable (host 4000 millicores x ratio 1000)", line)
		})
		t.Run("shrinking below zero is refused", func(t *testing.T) {
			line := env.Fail(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": obj{"memory": "-2G"}})
			require.Equal(t, "compute: calculate-realloc: node n1: invalid_argument: memory request would go below zero (-1073741824)", line)
		})
	})
}

func TestCalculateRemap(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 4, "8G")
		unchanged(t, env, func() {
			raw := env.Call(t, bin, "calculate-remap", obj{"nodename": "n1", "workloads_resource": obj{"w1": workload{1000, 1000, 0, 0}}}, nil)
			require.JSONEq(t, `{"engine_params_map": {}}`, string(raw))
		})
	})
}

func TestMetrics(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("the description declares six gauges and node_schedulable, each labelled by pod and node", func(t *testing.T) {
			var desc []struct {
				Name   string   `json:"name"`
				Help   string   `json:"help"`
				Type   string   `json:"type"`
				Labels []string `json:"labels"`
			}
			env.Call(t, bin, "get-metrics-description", nil, &desc)
			names := make([]string, len(desc))
			for i, d := range desc {
				names[i] = d.Name
				require.Equal(t, "gauge", d.Type)
				require.Equal(t, []string{"podname", "nodename"}, d.Labels)
				require.NotEmpty(t, d.Help)
			}
			require.Equal(t, []string{"compute_cpu_schedulable_millis", "compute_cpu_used_millis", "compute_memory_schedulable_bytes",
				"compute_memory_used_bytes", "compute_cpu_ratio", "compute_memory_ratio", "node_schedulable"}, names)
		})

		addNode(t, env, "n1.dc1", 16, "64G")
		addNode(t, env, "n2", 2, "1G")
		env.OpOK(t, bin, nil, "overcommit", "set-defaults", "--cpu", "4000", "--memory", "1500")
		place(t, env, "n1.dc1", 3, obj{"cpu": "2.5", "memory": "1G"})

		t.Run("a node's samples carry the values, its labels and statsd keys with dots made underscores", func(t *testing.T) {
			raw := env.Call(t, bin, "get-metrics", obj{"podname": "pod1", "nodename": "n1.dc1"}, nil)
			k := "core.node.n1_dc1.compute."
			require.JSONEq(t, `[
				{"name": "compute_cpu_schedulable_millis", "labels": ["pod1", "n1.dc1"], "key": "`+k+`cpu.schedulable_millis", "value": "64000"},
				{"name": "compute_cpu_used_millis", "labels": ["pod1", "n1.dc1"], "key": "`+k+`cpu.used_millis", "value": "7500"},
				{"name": "compute_memory_schedulable_bytes", "labels": ["pod1", "n1.dc1"], "key": "`+k+`memory.schedulable_bytes", "value": "103079215104"},
				{"name": "compute_memory_used_bytes", "labels": ["pod1", "n1.dc1"], "key": "`+k+`memory.used_bytes", "value": "3221225472"},
				{"name": "compute_cpu_ratio", "labels": ["pod1", "n1.dc1"], "key": "`+k+`cpu.ratio", "value": "4000"},
				{"name": "compute_memory_ratio", "labels": ["pod1", "n1.dc1"], "key": "`+k+`memory.ratio", "value": "1500"},
				{"name": "node_schedulable", "labels": ["pod1", "n1.dc1"], "key": "`+k+`schedulable", "value": "1"}]`, string(raw))
		})
		t.Run("a batch of nodes answers each known node's samples in order", func(t *testing.T) {
			var samples []struct {
				Name   string   `json:"name"`
				Labels []string `json:"labels"`
				Key    string   `json:"key"`
				Value  string   `json:"value"`
			}
			env.Call(t, bin, "get-metrics", obj{"nodes": []obj{{"podname": "p2", "nodename": "n2"}, {"podname": "p2", "nodename": "ghost"}, {"podname": "pod1", "nodename": "n1.dc1"}}}, &samples)
			require.Len(t, samples, 14)
			require.Equal(t, []string{"p2", "n2"}, samples[0].Labels)
			require.Equal(t, "core.node.n2.compute.cpu.schedulable_millis", samples[0].Key)
			require.Equal(t, "8000", samples[0].Value)
			require.Equal(t, "core.node.n2.compute.schedulable", samples[6].Key)
			require.Equal(t, "core.node.n1_dc1.compute.memory.ratio", samples[12].Key)
		})
		t.Run("a node compute never saw has no samples", func(t *testing.T) {
			require.Equal(t, `[]`, string(env.Call(t, bin, "get-metrics", obj{"podname": "p", "nodename": "ghost"}, nil)))
		})
		t.Run("a node name that cannot be a node's is refused, at the top as in nodes", func(t *testing.T) {
			for _, req := range []obj{{"podname": "p", "nodename": "a/b"}, {"nodes": []obj{{"podname": "p", "nodename": "a/b"}}}} {
				line := env.Fail(t, bin, "get-metrics", req)
				require.Contains(t, line, "compute: get-metrics")
				require.Contains(t, line, ": invalid_argument: ")
			}
		})
	})
}

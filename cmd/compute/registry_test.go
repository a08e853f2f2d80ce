package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

func TestDrainedNodeTakesNoNewCompute(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		addNode(t, env, "n2", 16, "64G")
		place(t, env, "n1", 2, obj{"cpu": 2, "memory": "1G"})
		held := workload{2000, 2000, gib, gib}

		var reg struct {
			NodeID string `json:"node_id"`
			Drain  bool   `json:"drain"`
			Status string `json:"status"`
		}
		env.OpOK(t, bin, &reg, "nodes", "drain", "n1")
		require.True(t, reg.Drain)
		require.Equal(t, "DRAINING", reg.Status)

		t.Run("it is left out of the deploy capacity map", func(t *testing.T) {
			caps := capacities(t, env, obj{"cpu": 1}, "n1", "n2")
			require.Equal(t, deployCapacities{Nodes: map[string]nodeCapacity{"n2": {Capacity: 16, Usage: 0, Rate: 1.0 / 16, Weight: 1}}, Total: 16}, caps)
			caps = capacities(t, env, obj{}, "n1")
			require.Empty(t, caps.Nodes, "not even for a request that asks nothing of compute")
		})
		t.Run("calculate-deploy fails with the precondition", func(t *testing.T) {
			line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"cpu": 1}})
			require.Equal(t, "compute: calculate-deploy: node n1: failed_precondition: node is draining", line)
		})
		t.Run("a shrinking realloc still passes", func(t *testing.T) {
			var out reallocPlan
			env.Call(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": obj{"cpu": -1}}, &out)
			require.Equal(t, workload{-1000, -1000, 0, 0}, out.DeltaResource)
			require.Equal(t, workload{1000, 1000, gib, gib}, out.WorkloadResource)
		})
		t.Run("a realloc that keeps the workload as it is still passes", func(t *testing.T) {
			var out reallocPlan
			env.Call(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": obj{}}, &out)
			require.Equal(t, workload{}, out.DeltaResource)
			require.Equal(t, held, out.WorkloadResource)
		})
		t.Run("a growing realloc is refused", func(t *testing.T) {
			line := env.Fail(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": obj{"memory": "1G"}})
			require.Equal(t, "compute: calculate-realloc: node n1: failed_precondition: node is draining", line)
		})
		t.Run("a growing realloc beyond the node's room is refused for the drain, not for the room", func(t *testing.T) {
			for _, delta := range []obj{{"cpu": 100}, {"memory": "1T"}} {
				line := env.Fail(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": delta})
				require.Equal(t, "compute: calculate-realloc: node n1: failed_precondition: node is draining", line, "%v", delta)
			}
		})
		t.Run("removing its workloads still lowers its usage", func(t *testing.T) {
			var change usageChange
			env.Call(t, bin, "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []workload{held, held}, "delta": true, "incr": false}, &change)
			require.Equal(t, usageChange{amount{4000, 2 * gib}, amount{}}, change)
			env.OpOK(t, bin, &reg, "nodes", "get", "n1")
			require.Equal(t, "DRAINED", reg.Status)
			line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"cpu": 1}})
			require.Equal(t, "compute: calculate-deploy: node n1: failed_precondition: node is draining", line)
		})
		t.Run("cancelling the drain lets it take work again", func(t *testing.T) {
			env.OpOK(t, bin, nil, "nodes", "cancel-drain", "n1")
			require.Equal(t, 16, capacities(t, env, obj{"cpu": 1}, "n1").Nodes["n1"].Capacity)
			env.Call(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 16, "workload_resource_request": obj{"cpu": 1}}, nil)
		})
	})
}

func TestIsolatedNodeReleasesCompute(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		place(t, env, "n1", 3, obj{"cpu": 1, "memory": "1G"})
		one := workload{1000, 1000, gib, gib}

		var isolated struct {
			Node struct {
				Released map[string]amount `json:"released"`
			} `json:"node"`
			ReleasedCPUMillis   int64 `json:"released_cpu_millis"`
			ReleasedMemoryBytes int64 `json:"released_memory_bytes"`
		}
		env.OpOK(t, bin, &isolated, "nodes", "isolate", "n1")
		require.Equal(t, int64(3000), isolated.ReleasedCPUMillis)
		require.Equal(t, 3*gib, isolated.ReleasedMemoryBytes)
		require.Equal(t, map[string]amount{"compute": {3000, 3 * gib}}, isolated.Node.Released)
		require.Equal(t, amount{}, info(t, env, "n1").Usage, "the usage moved into the ledger")

		t.Run("it takes no new compute", func(t *testing.T) {
			line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"cpu": 1}})
			require.Equal(t, "compute: calculate-deploy: node n1: failed_precondition: node is isolated", line)
			require.Empty(t, capacities(t, env, obj{"cpu": 1}, "n1").Nodes)
		})
		t.Run("a write adding usage is refused and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"cpu": 1}, "delta": true, "incr": true})
				require.Equal(t, "compute: set-node-resource-usage: node n1: failed_precondition: node is isolated: the write would add 1000 to cpu_millis", line)
			})
		})
		t.Run("removing the dead workloads drains the ledger, never the usage below zero", func(t *testing.T) {
			var change usageChange
			env.Call(t, bin, "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []workload{one, one}, "delta": true, "incr": false}, &change)
			require.Equal(t, usageChange{amount{}, amount{}}, change)
			var reg struct {
				Released map[string]amount `json:"released"`
			}
			env.OpOK(t, bin, &reg, "nodes", "get", "n1")
			require.Equal(t, map[string]amount{"compute": {1000, gib}}, reg.Released)
		})
		t.Run("fix-node-resource counts what the ledger still holds and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				var out nodeResource
				env.Call(t, bin, "fix-node-resource", obj{"nodename": "n1", "workloads_resource": []workload{one, one}}, &out)
				require.Equal(t, []string{
					"cpu: stored usage 0 millicores, workloads hold 1000",
					"memory: stored usage 0 bytes, workloads hold 1073741824",
				}, out.Diffs)
			})
		})
	})
}

package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestWorkedExample is the example: 16 cores at 4x are 64 vCPUs; 60
// are placed; the ratio drops to 2x; nothing more lands and nothing is
// evicted; a per-node override raises one node again, and clearing it
// returns it to the default.
func TestWorkedExample(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		oneCPU := obj{"cpu": 1}
		addNode(t, env, "n1", 16, "64G")
		addNode(t, env, "n2", 16, "64G")

		var d defaults
		env.OpOK(t, bin, &d, "overcommit", "set-defaults", "--cpu", "4000", "--memory", "1000")
		require.Equal(t, defaults{CPU: 4000, Memory: 1000, Version: 1}, d)

		t.Run("16 cores at 4x are 64 schedulable vCPUs", func(t *testing.T) {
			c := info(t, env, "n1").Capacity
			require.Equal(t, capacity{CPUMillis: 16000, MemoryBytes: 64 * gib, CPURatio: 4000, MemoryRatio: 1000, SchedulableCPUMillis: 64000, SchedulableMemoryBytes: 64 * gib}, c)
			caps := capacities(t, env, oneCPU, "n1")
			require.Equal(t, deployCapacities{Nodes: map[string]nodeCapacity{"n1": {Capacity: 64, Usage: 0, Rate: 1.0 / 64, Weight: 1}}, Total: 64}, caps)
		})

		t.Run("60 one-CPU workloads are placed as core places them", func(t *testing.T) {
			change := place(t, env, "n1", 60, oneCPU)
			require.Equal(t, usageChange{Before: amount{}, After: amount{CPUMillis: 60000}}, change)
			caps := capacities(t, env, oneCPU, "n1")
			require.Equal(t, 4, caps.Nodes["n1"].Capacity)
			require.InDelta(t, 60.0/64, caps.Nodes["n1"].Usage, 1e-12)
		})

		env.OpOK(t, bin, &d, "overcommit", "set-defaults", "--cpu", "2000", "--memory", "1000")
		require.Equal(t, defaults{CPU: 2000, Memory: 1000, Version: 2}, d)

		t.Run("at 2x the reserved node takes no more and is left out of the map", func(t *testing.T) {
			raw := env.Call(t, bin, "get-nodes-deploy-capacity", obj{"nodenames": []string{"n1"}, "workload_resource": oneCPU}, nil)
			require.JSONEq(t, `{"nodes_deploy_capacity_map": {}, "total": 0}`, string(raw))
			caps := capacities(t, env, oneCPU, "n1", "n2")
			require.Equal(t, deployCapacities{Nodes: map[string]nodeCapacity{"n2": {Capacity: 32, Usage: 0, Rate: 1.0 / 32, Weight: 1}}, Total: 32}, caps)
		})

		t.Run("at 2x calculate-deploy refuses with the figures", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": oneCPU})
				require.Equal(t, "compute: calculate-deploy: node n1: resource_exhausted: cpu: need 1000 millicores (1 workload x 1000), have 0 left: 60000 used of 32000 schedulable (host 16000 millicores x ratio 2000)", line)
			})
		})

		t.Run("lowering the ratio evicts nothing", func(t *testing.T) {
			got := info(t, env, "n1")
			require.Equal(t, amount{CPUMillis: 60000}, got.Usage)
			require.Equal(t, int64(32000), got.Capacity.SchedulableCPUMillis)
			var rec struct {
				Usage amount `json:"usage"`
			}
			require.True(t, env.Record(t, "/resource/compute/n1", &rec))
			require.Equal(t, amount{CPUMillis: 60000}, rec.Usage)
		})

		t.Run("an override on one node applies to that node only", func(t *testing.T) {
			var set nodeRatios
			env.OpOK(t, bin, &set, "overcommit", "set-node", "n1", "--cpu", "4000")
			want := nodeRatios{NodeID: "n1", CPU: effective{4000, "NODE"}, Memory: effective{1000, "DEFAULT"}, Version: 1}
			require.Equal(t, want, set)
			require.Equal(t, want, getNode(t, env, "n1"))
			require.Equal(t, nodeRatios{NodeID: "n2", CPU: effective{2000, "DEFAULT"}, Memory: effective{1000, "DEFAULT"}, Version: 0}, getNode(t, env, "n2"))
			caps := capacities(t, env, oneCPU, "n1", "n2")
			require.Equal(t, 4, caps.Nodes["n1"].Capacity, "n1 is back at 4x: 64000 - 60000")
			require.Equal(t, 32, caps.Nodes["n2"].Capacity, "n2 still follows the 2x default")
			require.Equal(t, 36, caps.Total)
		})

		t.Run("clearing the override returns the node to the default", func(t *testing.T) {
			var set nodeRatios
			env.OpOK(t, bin, &set, "overcommit", "set-node", "n1")
			want := nodeRatios{NodeID: "n1", CPU: effective{2000, "DEFAULT"}, Memory: effective{1000, "DEFAULT"}, Version: 2}
			require.Equal(t, want, set)
			require.Equal(t, want, getNode(t, env, "n1"))
			var rec map[string]json.RawMessage
			require.True(t, env.Record(t, "/resource/compute/n1", &rec))
			require.JSONEq(t, `{}`, string(rec["override"]))
			_, listed := capacities(t, env, oneCPU, "n1").Nodes["n1"]
			require.False(t, listed)
		})
	})
}

package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// A realloc request is a set of deltas: a limit delta alone changes the
// limit, never the request, so it neither frees nor takes any of what the
// node has reserved (core's cpumem applies "a limit without a request sets
// the request" to the resized workload, not to the delta).
func TestReallocOfALimitAloneLeavesTheReservation(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 4, "8G")
		place(t, env, "n1", 1, obj{"cpu-request": "1.5", "cpu-limit": 2, "memory": "1G"})
		place(t, env, "n1", 1, obj{"cpu": "2.5", "memory": "7G"}) // the node is now full
		held := workload{1500, 2000, gib, gib}
		full := amount{4000, 8 * gib}
		for _, c := range []struct {
			name  string
			delta obj
			next  workload
			diff  workload
		}{
			{"lowering only the cpu limit leaves the request", obj{"cpu-limit": "-0.5"},
				workload{1500, 1500, gib, gib}, workload{0, -500, 0, 0}},
			{"lowering only the cpu limit under the request raises it back to the request", obj{"cpu-limit": "-1"},
				workload{1500, 1500, gib, gib}, workload{0, -500, 0, 0}},
			{"lowering only the memory limit under the request raises it back to the request", obj{"memory-limit": "-1G"},
				workload{1500, 2000, gib, gib}, workload{}},
			{"raising only the cpu limit on a full node is admitted: limits are not reserved", obj{"cpu-limit": 2},
				workload{1500, 4000, gib, gib}, workload{0, 2000, 0, 0}},
			{"raising only the memory limit on a full node is admitted", obj{"memory-limit": "1G"},
				workload{1500, 2000, gib, 2 * gib}, workload{0, 0, 0, gib}},
		} {
			t.Run(c.name, func(t *testing.T) {
				var out reallocPlan
				env.Call(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": c.delta}, &out)
				require.Equal(t, c.next, out.WorkloadResource)
				require.Equal(t, c.diff, out.DeltaResource)
				var change usageChange
				env.Call(t, bin, "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []workload{out.DeltaResource}, "delta": true, "incr": true}, &change)
				require.Equal(t, usageChange{full, full}, change, "the node's reservation is what it was")
				// core's rollback of the realloc, so that each case starts from the same workload
				env.Call(t, bin, "set-node-resource-usage", obj{"nodename": "n1", "resource": change.Before, "delta": false}, nil)
			})
		}
	})
}

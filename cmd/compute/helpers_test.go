package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// bin is the plugin under test.
const bin = "compute"

const gib = int64(1) << 30

// The answers' shapes, written down here from docs/overcommit.md and
// docs/protocol.md rather than taken from the package under test.
type (
	amount struct {
		CPUMillis   int64 `json:"cpu_millis"`
		MemoryBytes int64 `json:"memory_bytes"`
	}
	capacity struct {
		CPUMillis              int64 `json:"cpu_millis"`
		MemoryBytes            int64 `json:"memory_bytes"`
		CPURatio               int64 `json:"cpu_ratio"`
		MemoryRatio            int64 `json:"memory_ratio"`
		SchedulableCPUMillis   int64 `json:"schedulable_cpu_millis"`
		SchedulableMemoryBytes int64 `json:"schedulable_memory_bytes"`
	}
	nodeResource struct {
		Capacity capacity `json:"capacity"`
		Usage    amount   `json:"usage"`
		Diffs    []string `json:"diffs"`
	}
	usageChange struct {
		Before amount `json:"before"`
		After  amount `json:"after"`
	}
	capacityChange struct {
		Before capacity `json:"before"`
		After  capacity `json:"after"`
	}
	workload struct {
		CPURequestMillis int64 `json:"cpu_request_millis"`
		CPULimitMillis   int64 `json:"cpu_limit_millis"`
		MemoryRequest    int64 `json:"memory_request"`
		MemoryLimit      int64 `json:"memory_limit"`
	}
	deployPlan struct {
		EnginesParams     []json.RawMessage `json:"engines_params"`
		WorkloadsResource []json.RawMessage `json:"workloads_resource"`
	}
	reallocPlan struct {
		EngineParams     json.RawMessage `json:"engine_params"`
		DeltaResource    workload        `json:"delta_resource"`
		WorkloadResource workload        `json:"workload_resource"`
	}
	nodeCapacity struct {
		Capacity int     `json:"capacity"`
		Usage    float64 `json:"usage"`
		Rate     float64 `json:"rate"`
		Weight   float64 `json:"weight"`
	}
	deployCapacities struct {
		Nodes map[string]nodeCapacity `json:"nodes_deploy_capacity_map"`
		Total int                     `json:"total"`
	}
	defaults struct {
		CPU     int64 `json:"cpu"`
		Memory  int64 `json:"memory"`
		Version int64 `json:"version"`
	}
	effective struct {
		Ratio  int64  `json:"ratio"`
		Source string `json:"source"`
	}
	nodeRatios struct {
		NodeID  string    `json:"node_id"`
		CPU     effective `json:"cpu"`
		Memory  effective `json:"memory"`
		Version int64     `json:"version"`
	}
)

// obj is a request or a resource as JSON.
type obj = map[string]any

// addNode adds a node with a host of cpu CPUs and memory, and checks the
// answer: the host, the figures in effect at the built-in 1x, no usage.
func addNode(t *testing.T, env *testenv.Env, node string, cpu any, memory string) nodeResource {
	t.Helper()
	var out nodeResource
	env.Call(t, bin, "add-node", obj{"nodename": node, "resource": obj{"cpu": cpu, "memory": memory}}, &out)
	require.Equal(t, amount{}, out.Usage)
	return out
}

// info reads a node's capacity and usage.
func info(t *testing.T, env *testenv.Env, node string) nodeResource {
	t.Helper()
	var out nodeResource
	env.Call(t, bin, "get-node-resource-info", obj{"nodename": node}, &out)
	return out
}

// capacities asks how many workloads of request fit on the nodes.
func capacities(t *testing.T, env *testenv.Env, request any, nodes ...string) deployCapacities {
	t.Helper()
	var out deployCapacities
	raw := env.Call(t, bin, "get-nodes-deploy-capacity", obj{"nodenames": nodes, "workload_resource": request}, &out)
	require.NotContains(t, string(raw), `"nodes_deploy_capacity_map":null`, "core reads a null map as no constraint")
	return out
}

// place plans count workloads of request on node and records their usage
// as core does: calculate-deploy, then set-node-resource-usage with the
// workloads it answered, delta and incr.
func place(t *testing.T, env *testenv.Env, node string, count int, request any) usageChange {
	t.Helper()
	var plan deployPlan
	env.Call(t, bin, "calculate-deploy", obj{"nodename": node, "deploy_count": count, "workload_resource_request": request}, &plan)
	require.Len(t, plan.WorkloadsResource, count)
	require.Len(t, plan.EnginesParams, count)
	var out usageChange
	env.Call(t, bin, "set-node-resource-usage", obj{"nodename": node, "workloads_resource": plan.WorkloadsResource, "delta": true, "incr": true}, &out)
	return out
}

// opFail runs an operator command that must fail with code, print nothing
// on stdout and one line on stderr; it returns the line.
func opFail(t *testing.T, env *testenv.Env, code int, args ...string) string {
	t.Helper()
	res := env.Op(t, bin, args...)
	require.Equal(t, code, res.Code, "compute %v: stdout %q stderr %q", args, res.Stdout, res.Stderr)
	require.Empty(t, res.Stdout, "compute %v", args)
	line := strings.TrimSuffix(res.Stderr, "\n")
	require.NotEmpty(t, line)
	require.NotContains(t, line, "\n", "the error must be one line")
	require.True(t, strings.HasPrefix(line, bin+": "), "error line %q", line)
	return line
}

// unchanged runs f and checks that the store holds exactly what it held
// before.
func unchanged(t *testing.T, env *testenv.Env, f func()) {
	t.Helper()
	before := env.Dump(t)
	f()
	require.Equal(t, before, env.Dump(t), "the store changed")
}

// getNode reads a node's ratios.
func getNode(t *testing.T, env *testenv.Env, node string) nodeRatios {
	t.Helper()
	var out nodeRatios
	env.OpOK(t, bin, &out, "overcommit", "get-node", node)
	return out
}

package conformance

import (
	"encoding/json"
	"testing"

	enginetypes "github.com/projecteru2/core/engine/types"
	"github.com/projecteru2/core/resource/plugins"
	plugintypes "github.com/projecteru2/core/resource/plugins/types"
	"github.com/stretchr/testify/require"
)

// defaultRatio is 1x in thousandths, the cluster default until an
// operator sets one.
const defaultRatio = 1000

func computeCapacity(cpuMillis, memory int64) computeNode {
	return computeNode{
		CPUMillis: cpuMillis, MemoryBytes: memory,
		CPURatio: defaultRatio, MemoryRatio: defaultRatio,
		SchedulableCPUMillis: cpuMillis, SchedulableMemoryByte: memory,
		CPURatioSource: "DEFAULT", MemoryRatioSource: "DEFAULT",
	}
}

func TestComputeAddNode(t *testing.T) {
	engineReport, err := json.Marshal(map[string]any{"cpu": 6, "memory": "4G"})
	require.NoError(t, err)

	cases := []struct {
		name     string
		request  params
		info     *enginetypes.Info
		capacity computeNode
	}{
		{
			name:     "records the host's CPUs and memory from the request",
			request:  params{"cpu": 4, "memory": "8G"},
			capacity: computeCapacity(4000, 8*GiB),
		},
		{
			name:     "accepts a decimal CPU count",
			request:  params{"cpu": "2.5", "memory": "1G"},
			capacity: computeCapacity(2500, GiB),
		},
		{
			name:     "takes what the request leaves out from the engine's NCPU and MemTotal",
			request:  params{},
			info:     &enginetypes.Info{Type: "docker", ID: "engine-1", NCPU: 8, MemTotal: 16 * GiB},
			capacity: computeCapacity(8000, 16*GiB),
		},
		{
			name:    "prefers the engine's own compute report to NCPU and MemTotal, and the request to both",
			request: params{"cpu": 2},
			info: &enginetypes.Info{Type: "docker", ID: "engine-2", NCPU: 8, MemTotal: 16 * GiB,
				Resources: map[string][]byte{"compute": engineReport}},
			capacity: computeCapacity(2000, 4*GiB),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p := e.plugin(t, "compute")
			resp := addNode(t, p, "c1", tc.request, tc.info)
			require.Equal(t, tc.capacity, asComputeCapacity(t, resp.Capacity))
			require.Equal(t, computeNode{}, asComputeUsage(t, resp.Usage))

			info := nodeInfo(t, p, "c1", nil)
			require.JSONEq(t, mustJSON(t, resp.Capacity), mustJSON(t, info.Capacity))
			require.JSONEq(t, mustJSON(t, resp.Usage), mustJSON(t, info.Usage))
			require.NotNil(t, info.Diffs, "diffs are [] rather than null")
			require.Empty(t, info.Diffs)
			stored, _ := e.record(t, "compute", "c1")
			require.NotNil(t, stored, "the record is in etcd under <prefix>/resource/compute/c1")
		})
	}

	t.Run("refuses a node with neither a request nor an engine report", func(t *testing.T) {
		e := newEnv(t)
		p := e.plugin(t, "compute")
		resp, err := p.AddNode(t.Context(), "c1", params{}, nil)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		require.Nil(t, resp.Capacity)
		stored, _ := e.record(t, "compute", "c1")
		require.Nil(t, stored)
	})

	t.Run("refuses to add the same node again", func(t *testing.T) {
		e := newEnv(t)
		p := e.plugin(t, "compute")
		addNode(t, p, "c1", params{"cpu": 4, "memory": "8G"}, nil)
		_, version := e.record(t, "compute", "c1")
		_, err := p.AddNode(t.Context(), "c1", params{"cpu": 8, "memory": "8G"}, nil)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		_, after := e.record(t, "compute", "c1")
		require.Equal(t, version, after)
	})
}

func TestComputeDeployCapacity(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "compute")
	addNode(t, p, "c1", params{"cpu": 4, "memory": "8G"}, nil)
	addNode(t, p, "c2", params{"cpu": 8, "memory": "16G"}, nil)

	cases := []struct {
		name      string
		nodes     []string
		request   params
		want      map[string]capacityEntry
		checkRate bool
	}{
		{
			name:    "admits on the smaller of CPU and memory left over the request",
			nodes:   []string{"c1", "c2", "ghost"},
			request: params{"cpu": 1.5, "memory": "1G"},
			want:    map[string]capacityEntry{"c1": {capacity: 2}, "c2": {capacity: 5}},
		},
		{
			name:    "admits on memory alone when the request asks only memory",
			nodes:   []string{"c1", "c2"},
			request: params{"memory": "3G"},
			want: map[string]capacityEntry{
				"c1": {capacity: 2, rate: 3.0 / 8},
				"c2": {capacity: 5, rate: 3.0 / 16},
			},
			checkRate: true,
		},
		{
			name:      "answers max_deploy_count for a request that asks neither, unknown nodes included",
			nodes:     []string{"c1", "c2", "ghost"},
			request:   nil,
			want:      map[string]capacityEntry{"c1": {capacity: maxDeploy}, "c2": {capacity: maxDeploy}, "ghost": {capacity: maxDeploy}},
			checkRate: true,
		},
		{
			name:      "leaves out every node that cannot take one workload, as an empty map",
			nodes:     []string{"c1", "c2", "ghost"},
			request:   params{"cpu": 16},
			want:      map[string]capacityEntry{},
			checkRate: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := p.GetNodesDeployCapacity(t.Context(), tc.nodes, tc.request)
			require.NoError(t, err)
			checkDeployCapacity(t, resp, tc.want, tc.checkRate)
		})
	}
}

func TestComputeWorkloadLifecycle(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "compute")
	addNode(t, p, "c1", params{"cpu": 4, "memory": "8G"}, nil)
	addNode(t, p, "c2", params{"cpu": 8, "memory": "16G"}, nil)
	request := params{"cpu": 1.5, "memory": "1G"}
	oneWorkload := computeWorkload{CPURequestMillis: 1500, CPULimitMillis: 1500, MemoryRequest: GiB, MemoryLimit: GiB}
	var workloads []plugintypes.WorkloadResource

	step(t, "calculate-deploy answers one stored workload per workload and no engine params", func(t *testing.T) {
		_, version := e.record(t, "compute", "c1")
		resp, err := p.CalculateDeploy(t.Context(), "c1", 2, request)
		require.NoError(t, err)
		require.Len(t, resp.EnginesParams, 2)
		require.Len(t, resp.WorkloadsResource, 2)
		for i := range 2 {
			require.NotNil(t, resp.EnginesParams[i], "engine params are {} for each workload")
			require.Empty(t, resp.EnginesParams[i], "compute emits no engine params: cpumem owns cpu and memory")
			require.Equal(t, oneWorkload, asComputeWorkload(t, resp.WorkloadsResource[i]))
		}
		_, after := e.record(t, "compute", "c1")
		require.Equal(t, version, after, "calculate-deploy is a pure calculation")
		workloads = resp.WorkloadsResource
	})

	step(t, "calculate-deploy separates request and limit and raises a limit below its request", func(t *testing.T) {
		resp, err := p.CalculateDeploy(t.Context(), "c1", 1, params{"cpu-request": "0.57", "cpu-limit": "0.5", "memory-request": "1G", "memory-limit": "2G"})
		require.NoError(t, err)
		require.Len(t, resp.WorkloadsResource, 1)
		require.Equal(t, computeWorkload{CPURequestMillis: 570, CPULimitMillis: 570, MemoryRequest: GiB, MemoryLimit: 2 * GiB},
			asComputeWorkload(t, resp.WorkloadsResource[0]))
	})

	step(t, "calculate-deploy refuses more than host times ratio admits, and core gets an error, not an answer", func(t *testing.T) {
		resp, err := p.CalculateDeploy(t.Context(), "c1", 3, request)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		require.Nil(t, resp.EnginesParams)
		require.Nil(t, resp.WorkloadsResource)
	})

	step(t, "set-node-resource-usage charges the workloads core commits", func(t *testing.T) {
		resp, err := p.SetNodeResourceUsage(t.Context(), "c1", nil, nil, workloads, true, plugins.Incr)
		require.NoError(t, err)
		require.Equal(t, computeNode{}, asComputeUsage(t, resp.Before))
		require.Equal(t, computeNode{CPUMillis: 3000, MemoryBytes: 2 * GiB}, asComputeUsage(t, resp.After))
	})

	step(t, "get-nodes-deploy-capacity reports the larger used fraction and the request's share", func(t *testing.T) {
		resp, err := p.GetNodesDeployCapacity(t.Context(), []string{"c1"}, params{"cpu": 0.5})
		require.NoError(t, err)
		checkDeployCapacity(t, resp, map[string]capacityEntry{"c1": {capacity: 2, usage: 0.75, rate: 0.125}}, true)
	})

	step(t, "get-most-idle-node answers the node with the lowest used CPU fraction", func(t *testing.T) {
		resp, err := p.GetMostIdleNode(t.Context(), []string{"c1", "c2"})
		require.NoError(t, err)
		require.Equal(t, "c2", resp.Nodename)
		require.Equal(t, 1, resp.Priority)
	})

	step(t, "get-node-resource-info finds no diff when the workloads match, and names each that does not", func(t *testing.T) {
		require.Empty(t, nodeInfo(t, p, "c1", workloads).Diffs)
		info := nodeInfo(t, p, "c1", workloads[:1])
		require.Len(t, info.Diffs, 2, "cpu and memory disagree: %q", info.Diffs)
		require.Equal(t, computeNode{CPUMillis: 3000, MemoryBytes: 2 * GiB}, asComputeUsage(t, info.Usage), "get-node-resource-info does not fix")
	})

	step(t, "fix-node-resource rewrites the usage from the workloads", func(t *testing.T) {
		fixed, err := p.FixNodeResource(t.Context(), "c1", workloads[:1])
		require.NoError(t, err)
		require.Equal(t, computeNode{CPUMillis: 1500, MemoryBytes: GiB}, asComputeUsage(t, fixed.Usage))
		require.Empty(t, nodeInfo(t, p, "c1", workloads[:1]).Diffs)

		_, err = p.SetNodeResourceUsage(t.Context(), "c1", nil, nil, workloads[1:], true, plugins.Incr)
		require.NoError(t, err)
		require.Empty(t, nodeInfo(t, p, "c1", workloads).Diffs)
	})

	step(t, "calculate-realloc adds the request to the workload and answers the delta core commits", func(t *testing.T) {
		resp, err := p.CalculateRealloc(t.Context(), "c1", workloads[0], params{"cpu": 0.5})
		require.NoError(t, err)
		require.Empty(t, resp.EngineParams)
		require.Equal(t, computeWorkload{CPURequestMillis: 2000, CPULimitMillis: 2000, MemoryRequest: GiB, MemoryLimit: GiB}, asComputeWorkload(t, resp.WorkloadResource))
		require.Equal(t, computeWorkload{CPURequestMillis: 500, CPULimitMillis: 500}, asComputeWorkload(t, resp.DeltaResource))

		after, err := p.SetNodeResourceUsage(t.Context(), "c1", nil, nil, []plugintypes.WorkloadResource{resp.DeltaResource}, true, plugins.Incr)
		require.NoError(t, err)
		require.Equal(t, computeNode{CPUMillis: 3500, MemoryBytes: 2 * GiB}, asComputeUsage(t, after.After))
		require.Empty(t, nodeInfo(t, p, "c1", []plugintypes.WorkloadResource{resp.WorkloadResource, workloads[1]}).Diffs)

		// and back, with a negative delta
		shrink, err := p.CalculateRealloc(t.Context(), "c1", resp.WorkloadResource, params{"cpu": -0.5})
		require.NoError(t, err)
		require.Equal(t, oneWorkload, asComputeWorkload(t, shrink.WorkloadResource))
		require.Equal(t, computeWorkload{CPURequestMillis: -500, CPULimitMillis: -500}, asComputeWorkload(t, shrink.DeltaResource))
		_, err = p.SetNodeResourceUsage(t.Context(), "c1", nil, nil, []plugintypes.WorkloadResource{shrink.DeltaResource}, true, plugins.Incr)
		require.NoError(t, err)
		require.Empty(t, nodeInfo(t, p, "c1", workloads).Diffs)
	})

	step(t, "calculate-realloc refuses growth past host times ratio and a result below zero", func(t *testing.T) {
		for _, req := range []params{{"cpu": 2}, {"memory-request": "-2G"}} {
			resp, err := p.CalculateRealloc(t.Context(), "c1", workloads[0], req)
			require.Error(t, err, "realloc %v", req)
			require.Equal(t, 128, exitCode(t, err))
			require.Nil(t, resp.WorkloadResource)
			require.Nil(t, resp.DeltaResource)
		}
	})

	step(t, "calculate-remap answers no engine params", func(t *testing.T) {
		resp, err := p.CalculateRemap(t.Context(), "c1", map[string]plugintypes.WorkloadResource{"w1": workloads[0], "w2": workloads[1]})
		require.NoError(t, err)
		require.NotNil(t, resp.EngineParamsMap, "an object, not null")
		require.Empty(t, resp.EngineParamsMap, "no entry: core would update the engine of every workload named")
	})

	step(t, "set-node-resource-usage releases the workloads core removes", func(t *testing.T) {
		resp, err := p.SetNodeResourceUsage(t.Context(), "c1", nil, nil, workloads, true, plugins.Decr)
		require.NoError(t, err)
		require.Equal(t, computeNode{}, asComputeUsage(t, resp.After))
	})
}

func TestComputeCapacityAndUsageChangesAndCoreRollback(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "compute")
	addNode(t, p, "c1", params{"cpu": 4, "memory": "8G"}, nil)
	deploy, err := p.CalculateDeploy(t.Context(), "c1", 1, params{"cpu": 1, "memory": "1G"})
	require.NoError(t, err)
	_, err = p.SetNodeResourceUsage(t.Context(), "c1", nil, nil, deploy.WorkloadsResource, true, plugins.Incr)
	require.NoError(t, err)

	capacityCases := []struct {
		name    string
		request params
		delta   bool
		incr    bool
		want    computeNode
	}{
		{name: "an absolute CPU count replaces the CPUs and keeps the memory", request: params{"cpu": 8}, want: computeCapacity(8000, 8*GiB)},
		{name: "an absolute memory replaces the memory and keeps the CPUs", request: params{"memory": "32G"}, want: computeCapacity(4000, 32*GiB)},
		{name: "a delta adds CPUs", request: params{"cpu": 2}, delta: true, incr: plugins.Incr, want: computeCapacity(6000, 8*GiB)},
		{name: "a delta takes memory away", request: params{"memory": "2G"}, delta: true, incr: plugins.Decr, want: computeCapacity(4000, 6*GiB)},
	}
	for _, tc := range capacityCases {
		t.Run(tc.name+", and core's rollback with the before snapshot restores the record exactly", func(t *testing.T) {
			origin := nodeInfo(t, p, "c1", nil)
			resp, err := p.SetNodeResourceCapacity(t.Context(), "c1", nil, tc.request, tc.delta, tc.incr)
			require.NoError(t, err)
			require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, resp.Before))
			require.Equal(t, tc.want, asComputeCapacity(t, resp.After))
			require.JSONEq(t, mustJSON(t, resp.After), mustJSON(t, nodeInfo(t, p, "c1", nil).Capacity))

			_, err = p.SetNodeResourceCapacity(t.Context(), "c1", nil, resp.Before, false, false)
			require.NoError(t, err)
			restored := nodeInfo(t, p, "c1", nil)
			require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity))
			require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage))
		})
	}

	usageCases := []struct {
		name      string
		resource  params
		request   params
		workloads []plugintypes.WorkloadResource
		delta     bool
		incr      bool
		want      computeNode
	}{
		{name: "workloads added with delta", workloads: deploy.WorkloadsResource, delta: true, incr: plugins.Incr, want: computeNode{CPUMillis: 2000, MemoryBytes: 2 * GiB}},
		{name: "workloads released with delta", workloads: deploy.WorkloadsResource, delta: true, incr: plugins.Decr, want: computeNode{}},
		{name: "a stored usage written absolutely", resource: params{"cpu_millis": 2500, "memory_bytes": 3 * GiB}, want: computeNode{CPUMillis: 2500, MemoryBytes: 3 * GiB}},
		{name: "a usage request in request form, added with delta", request: params{"cpu": 1, "memory": "1G"}, delta: true, incr: plugins.Incr, want: computeNode{CPUMillis: 2000, MemoryBytes: 2 * GiB}},
		{
			name:      "workloads beyond what the node admits, since core has already decided",
			workloads: []plugintypes.WorkloadResource{{"cpu_request_millis": 8000, "cpu_limit_millis": 8000, "memory_request": 16 * GiB, "memory_limit": 16 * GiB}},
			delta:     true, incr: plugins.Incr,
			want: computeNode{CPUMillis: 9000, MemoryBytes: 17 * GiB},
		},
	}
	for _, tc := range usageCases {
		t.Run(tc.name+", and core's rollback with the before snapshot restores the usage exactly", func(t *testing.T) {
			origin := nodeInfo(t, p, "c1", nil)
			resp, err := p.SetNodeResourceUsage(t.Context(), "c1", tc.resource, tc.request, tc.workloads, tc.delta, tc.incr)
			require.NoError(t, err)
			require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, resp.Before))
			require.Equal(t, tc.want, asComputeUsage(t, resp.After))

			_, err = p.SetNodeResourceUsage(t.Context(), "c1", resp.Before, nil, nil, false, false)
			require.NoError(t, err)
			restored := nodeInfo(t, p, "c1", nil)
			require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage))
			require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity))
		})
	}
}

func TestComputeRemoveNodeAndUnknownNodes(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "compute")
	addNode(t, p, "c1", params{"cpu": 4, "memory": "8G"}, nil)
	deploy, err := p.CalculateDeploy(t.Context(), "c1", 1, params{"cpu": 1, "memory": "1G"})
	require.NoError(t, err)
	_, err = p.SetNodeResourceUsage(t.Context(), "c1", nil, nil, deploy.WorkloadsResource, true, plugins.Incr)
	require.NoError(t, err)
	origin := nodeInfo(t, p, "c1", nil)

	step(t, "remove-node forgets the node, and get-node-resource-info then gives core an empty resource", func(t *testing.T) {
		_, err := p.RemoveNode(t.Context(), "c1")
		require.NoError(t, err)
		stored, _ := e.record(t, "compute", "c1")
		require.Nil(t, stored)
		info := nodeInfo(t, p, "c1", nil)
		require.Empty(t, info.Capacity)
		require.Empty(t, info.Usage)
		_, err = p.RemoveNode(t.Context(), "c1")
		require.NoError(t, err, "remove-node is idempotent")
	})

	step(t, "set-node-resource-info with what get-node-resource-info answered restores the node exactly", func(t *testing.T) {
		_, err := p.SetNodeResourceInfo(t.Context(), "c1", origin.Capacity, origin.Usage)
		require.NoError(t, err)
		restored := nodeInfo(t, p, "c1", deploy.WorkloadsResource)
		require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity))
		require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage))
		require.Empty(t, restored.Diffs)
	})

	step(t, "an unknown node takes workloads that ask no compute and no others", func(t *testing.T) {
		resp, err := p.CalculateDeploy(t.Context(), "ghost", 2, nil)
		require.NoError(t, err)
		require.Len(t, resp.WorkloadsResource, 2)
		require.Len(t, resp.EnginesParams, 2)
		for _, w := range resp.WorkloadsResource {
			require.Equal(t, computeWorkload{}, asComputeWorkload(t, w))
		}
		_, err = p.CalculateDeploy(t.Context(), "ghost", 1, params{"cpu": 1})
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
	})

	step(t, "fix-node-resource of an unknown node fails with an error core surfaces", func(t *testing.T) {
		resp, err := p.FixNodeResource(t.Context(), "ghost", nil)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		require.Nil(t, resp.Capacity)
	})

	step(t, "the name verb prints the resource name core knows the binary by", func(t *testing.T) {
		stdout, stderr, code := e.run(t, "compute", "name", nil)
		require.Zero(t, code, stderr)
		var name string
		require.NoError(t, json.Unmarshal([]byte(stdout), &name))
		require.Equal(t, p.Name(), name)
	})
}

func TestComputeRemoveNodeUndoKeepsWhatTheNodeWasAdmittingAgainst(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "compute")
	addNode(t, p, "c1", params{"cpu": 4, "memory": "8G"}, nil)
	_, stderr, code := e.command(t, "compute", []string{"overcommit", "set-node", "c1", "--cpu", "4000"}, nil)
	require.Zero(t, code, stderr)
	deploy, err := p.CalculateDeploy(t.Context(), "c1", 6, params{"cpu": 2})
	require.NoError(t, err, "4 CPUs at 4x admit 16 vCPUs")
	_, err = p.SetNodeResourceUsage(t.Context(), "c1", nil, nil, deploy.WorkloadsResource, true, plugins.Incr)
	require.NoError(t, err)
	origin := nodeInfo(t, p, "c1", nil)
	require.Equal(t, int64(16000), asComputeCapacity(t, origin.Capacity).SchedulableCPUMillis)

	// cobalt's RemoveNode: remove-node in every plugin; when another plugin
	// fails, set-node-resource-info with what get-node-resource-info
	// answered before the removal
	_, err = p.RemoveNode(t.Context(), "c1")
	require.NoError(t, err)
	_, err = p.SetNodeResourceInfo(t.Context(), "c1", origin.Capacity, origin.Usage)
	require.NoError(t, err)

	restored := nodeInfo(t, p, "c1", deploy.WorkloadsResource)
	require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity),
		"core's undo of a failed remove-node must leave the node admitting against the same schedulable CPU")
	require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage))
}

package conformance

import (
	"testing"

	enginetypes "github.com/projecteru2/core/engine/types"
	"github.com/projecteru2/core/metrics"
	"github.com/projecteru2/core/resource/plugins"
	resourcetypes "github.com/projecteru2/core/resource/types"
	coretypes "github.com/projecteru2/core/types"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// nodeResources is what eru-cli sends for `node add`: cpumem's flags, and
// our plugins' resources under their names.
func nodeResources(volume string) resourcetypes.Resources {
	return resourcetypes.Resources{
		"cpumem":  {"cpu": 4, "memory": "8G"},
		"compute": {"cpu": 4, "memory": "8G"},
		"storage": {"volumes": []string{"/data0:" + volume}, "disks": []string{"/dev/vda:/,/data0:1000:1000:1G:1G"}, "storage": "100G"},
	}
}

func engineInfo(id string) *enginetypes.Info {
	return &enginetypes.Info{Type: "docker", ID: id, NCPU: 4, MemTotal: 8 * GiB, StorageTotal: TiB}
}

// deployResources is what eru-cli sends for `workload deploy`.
func deployResources(volume string) resourcetypes.Resources {
	return resourcetypes.Resources{
		"cpumem":  {"cpu-request": 0.5, "memory-request": 512 << 20},
		"compute": {"cpu": 0.5, "memory": "512M"},
		"storage": {"volumes": []string{"AUTO:/data:rw:" + volume}},
	}
}

func workloadsOf(resources []resourcetypes.Resources) []*coretypes.Workload {
	out := make([]*coretypes.Workload, len(resources))
	for i, r := range resources {
		out[i] = &coretypes.Workload{ID: "w" + string(rune('1'+i)), Nodename: "n1", Podname: "pod1", Resources: r}
	}
	return out
}

func TestCoreResourceManagerFlows(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	storage := e.plugin(t, "storage")

	names := []string{}
	for _, p := range m.GetPlugins() {
		names = append(names, p.Name())
	}
	require.ElementsMatch(t, []string{"cpumem", "compute", "storage"}, names,
		"core loads its cpumem and every executable of the plugin folder, by file name")

	step(t, "AddNode records the node in every plugin and answers each capacity", func(t *testing.T) {
		for node, volume := range map[string]string{"n1": "300G", "n2": "150G", "n3": "50G"} {
			res, err := m.AddNode(t.Context(), node, nodeResources(volume), engineInfo("engine-"+node))
			require.NoError(t, err, node)
			require.ElementsMatch(t, []string{"cpumem", "compute", "storage"}, keys(res))
			require.Equal(t, int64(100*GiB)+map[string]int64{"300G": 300 * GiB, "150G": 150 * GiB, "50G": 50 * GiB}[volume],
				asStorageNode(t, res["storage"]).Storage, node)
			require.Equal(t, int64(4000), asComputeCapacity(t, res["compute"]).CPUMillis, node)
		}
	})

	step(t, "AddNode of a node that exists fails in core and leaves the node as it was", func(t *testing.T) {
		_, version := e.record(t, "storage", "n1")
		_, err := m.AddNode(t.Context(), "n1", nodeResources("1T"), engineInfo("engine-n1"))
		require.Error(t, err)
		stored, after := e.record(t, "storage", "n1")
		require.Equal(t, version, after)
		require.NotNil(t, stored)
	})

	step(t, "AddNode that one plugin refuses is undone in the others, and can then be run again", func(t *testing.T) {
		bad := nodeResources("300G")
		bad["compute"] = params{"cpu": "lots", "memory": "8G"}
		_, err := m.AddNode(t.Context(), "n4", bad, engineInfo("engine-n4"))
		require.Error(t, err)
		for _, resource := range resourceNames {
			stored, _ := e.record(t, resource, "n4")
			require.Nil(t, stored, "core's rollback removed n4 from %s", resource)
		}
		require.Empty(t, nodeInfo(t, storage, "n4", nil).Capacity)

		// cpumem's record went too, so the corrected command succeeds
		_, err = m.AddNode(t.Context(), "n4", nodeResources("300G"), engineInfo("engine-n4"))
		require.NoError(t, err)
		require.NoError(t, m.RemoveNode(t.Context(), "n4"))
	})

	step(t, "GetNodesDeployCapacity keeps the nodes every plugin admits, at the smallest capacity", func(t *testing.T) {
		capacities, total, err := m.GetNodesDeployCapacity(t.Context(), []string{"n1", "n2", "n3"}, deployResources("100G"))
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"n1", "n2"}, keys(capacities), "n3's 50G volume takes no 100G binding")
		require.Equal(t, 3, capacities["n1"].Capacity, "storage bounds n1: three 100G bindings on a 300G device")
		require.Equal(t, 1, capacities["n2"].Capacity)
		require.Equal(t, 4, total)
	})

	step(t, "GetNodesDeployCapacity deploys nowhere when storage admits no node", func(t *testing.T) {
		// core merges the plugins' maps in random order: a null map from
		// storage would let every node through some of the time
		for range 8 {
			capacities, total, err := m.GetNodesDeployCapacity(t.Context(), []string{"n1", "n2", "n3"}, deployResources("1T"))
			require.NoError(t, err)
			require.Empty(t, capacities)
			require.Zero(t, total)
		}
	})

	var allocated []resourcetypes.Resources
	step(t, "Alloc plans the workloads in every plugin and commits their usage", func(t *testing.T) {
		workloads, engines, err := m.Alloc(t.Context(), "n1", 2, deployResources("100G"))
		require.NoError(t, err)
		require.Len(t, workloads, 2)
		require.Len(t, engines, 2)
		for i := range 2 {
			engine := asStorageEngine(t, engines[i]["storage"])
			require.Equal(t, []string{"/data0:/data:rw:107374182400"}, engine.Volumes)
			require.Equal(t, 100*GiB, engine.Storage)
			require.Empty(t, engines[i]["compute"], "compute hands the engine nothing")
			w := asStorageWorkload(t, workloads[i]["storage"])
			require.Equal(t, map[string]int64{"/data0": 100 * GiB}, planBytes(w.VolumePlanRequest))
			require.Equal(t, int64(500), asComputeWorkload(t, workloads[i]["compute"]).CPURequestMillis)
		}
		capacity, usage, diffs, err := m.GetNodeResourceInfo(t.Context(), "n1", workloadsOf(workloads), false)
		require.NoError(t, err)
		require.Empty(t, diffs, "every plugin's usage matches the workloads")
		require.Equal(t, map[string]int64{"/data0": 200 * GiB}, asStorageNode(t, usage["storage"]).Volumes)
		require.Equal(t, 200*GiB, asStorageNode(t, usage["storage"]).Storage)
		require.Equal(t, computeNode{CPUMillis: 1000, MemoryBytes: 1 << 30}, asComputeUsage(t, usage["compute"]))
		require.Equal(t, 400*GiB, asStorageNode(t, capacity["storage"]).Storage)
		allocated = workloads
	})

	var delta resourcetypes.Resources
	step(t, "Realloc grows a workload's volume and commits the delta", func(t *testing.T) {
		engine, d, resource, err := m.Realloc(t.Context(), "n1", allocated[0], resourcetypes.Resources{"storage": {"volumes": []string{"AUTO:/data:rw:50G"}}})
		require.NoError(t, err)
		se := asStorageEngine(t, engine["storage"])
		require.False(t, se.VolumeChanged, "a resize on the same device brings no new volume")
		require.Equal(t, []string{"/data0:/data:rw:161061273600"}, se.Volumes)
		require.Equal(t, map[string]int64{"/data0": 150 * GiB}, planBytes(asStorageWorkload(t, resource["storage"]).VolumePlanRequest))

		_, usage, diffs, err := m.GetNodeResourceInfo(t.Context(), "n1", workloadsOf([]resourcetypes.Resources{resource, allocated[1]}), false)
		require.NoError(t, err)
		require.Empty(t, diffs)
		require.Equal(t, map[string]int64{"/data0": 250 * GiB}, asStorageNode(t, usage["storage"]).Volumes)
		delta = d
	})

	step(t, "RollbackRealloc takes the delta back", func(t *testing.T) {
		require.NoError(t, m.RollbackRealloc(t.Context(), "n1", delta))
		_, usage, diffs, err := m.GetNodeResourceInfo(t.Context(), "n1", workloadsOf(allocated), false)
		require.NoError(t, err)
		require.Empty(t, diffs)
		require.Equal(t, map[string]int64{"/data0": 200 * GiB}, asStorageNode(t, usage["storage"]).Volumes)
	})

	step(t, "a usage write that fails in compute makes core roll storage back to its before snapshot", func(t *testing.T) {
		origin := nodeInfo(t, storage, "n1", nil)
		_, version := e.record(t, "storage", "n1")
		_, _, err := m.SetNodeResourceUsage(t.Context(), "n1", nil, nil, []resourcetypes.Resources{{
			"storage": allocated[0]["storage"],
			"compute": {"cpu_request_millis": "lots"},
		}}, true, plugins.Incr)
		require.Error(t, err)
		require.Contains(t, err.Error(), "compute")
		_, after := e.record(t, "storage", "n1")
		require.GreaterOrEqual(t, after, version+2, "storage applied the write and then core's rollback")
		restored := nodeInfo(t, storage, "n1", nil)
		require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage))
		require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity))
	})

	step(t, "a capacity write that fails in compute makes core roll storage back to its before snapshot", func(t *testing.T) {
		origin := nodeInfo(t, storage, "n1", nil)
		_, version := e.record(t, "storage", "n1")
		_, _, err := m.SetNodeResourceCapacity(t.Context(), "n1", nil, resourcetypes.Resources{
			"storage": {"volumes": []string{"/data1:1T"}},
			"compute": {"cpu": "lots"},
		}, true, plugins.Incr)
		require.Error(t, err)
		require.Contains(t, err.Error(), "compute")
		_, after := e.record(t, "storage", "n1")
		require.GreaterOrEqual(t, after, version+2, "storage applied the write and then core's rollback")
		restored := nodeInfo(t, storage, "n1", nil)
		require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity))
		require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage))
	})

	step(t, "SetNodeResourceCapacity changes only the plugins named", func(t *testing.T) {
		_, computeVersion := e.record(t, "compute", "n1")
		_, _, err := m.SetNodeResourceCapacity(t.Context(), "n1", nil, resourcetypes.Resources{"storage": {"volumes": []string{"/data1:1T"}}}, true, plugins.Incr)
		require.NoError(t, err)
		capacity := asStorageNode(t, nodeInfo(t, storage, "n1", nil).Capacity)
		require.Equal(t, map[string]int64{"/data0": 300 * GiB, "/data1": TiB}, capacity.Volumes)
		require.Equal(t, 400*GiB+TiB, capacity.Storage)
		_, after := e.record(t, "compute", "n1")
		require.Equal(t, computeVersion, after)
	})

	step(t, "GetNodeResourceInfo with fix rewrites usage from the workloads core passes", func(t *testing.T) {
		_, usage, diffs, err := m.GetNodeResourceInfo(t.Context(), "n1", workloadsOf(allocated[:1]), true)
		require.NoError(t, err)
		require.NotEmpty(t, diffs)
		require.Equal(t, 100*GiB, asStorageNode(t, usage["storage"]).Storage)
		_, _, err = m.SetNodeResourceUsage(t.Context(), "n1", nil, nil, allocated[1:], true, plugins.Incr)
		require.NoError(t, err)
		_, _, diffs, err = m.GetNodeResourceInfo(t.Context(), "n1", workloadsOf(allocated), false)
		require.NoError(t, err)
		require.Empty(t, diffs)
	})

	step(t, "GetMostIdleNode follows cpumem, as storage and compute defer with priority 1", func(t *testing.T) {
		node, err := m.GetMostIdleNode(t.Context(), []string{"n1", "n2"})
		require.NoError(t, err)
		require.Equal(t, "n2", node, "n1 holds the workloads")
	})

	step(t, "Remap asks the engine nothing for storage or compute, not even an empty entry", func(t *testing.T) {
		// core calls the engine's VirtualizationUpdateResource for every
		// workload any plugin names in its answer, with only the params
		// the plugins gave: an empty entry of ours for a workload cpumem
		// leaves alone (a CPU-bound one) would have docker lift its CPU
		// binding and memory limit.
		engines, err := m.Remap(t.Context(), "n1", workloadsOf(allocated))
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"w1", "w2"}, keys(engines), "cpumem remaps its shared-CPU workloads")
		for id, engine := range engines {
			require.Equal(t, []string{"cpumem"}, keys(engine), "plugins that name %s", id)
		}

		bound := []resourcetypes.Resources{{
			"cpumem":  {"cpu_request": 1, "cpu_limit": 1, "cpu_map": map[string]int{"0": 100}, "memory_request": 512 << 20, "memory_limit": 512 << 20},
			"compute": allocated[0]["compute"],
			"storage": allocated[0]["storage"],
		}}
		engines, err = m.Remap(t.Context(), "n1", workloadsOf(bound))
		require.NoError(t, err)
		require.Empty(t, engines, "no plugin asks the engine to touch a CPU-bound workload")
	})

	step(t, "metrics of every plugin register and feed core's Prometheus collectors", func(t *testing.T) {
		descriptions, err := m.GetMetricsDescription(t.Context())
		require.NoError(t, err)
		declared := map[string]int{}
		for _, d := range descriptions {
			declared[d.Name] = len(d.Labels)
		}
		for _, name := range []string{"storage_used", "storage_capacity", "storage_volume_used", "storage_volume_capacity",
			"compute_cpu_schedulable_millis", "compute_cpu_used_millis", "compute_memory_schedulable_bytes",
			"compute_memory_used_bytes", "compute_cpu_ratio", "compute_memory_ratio"} {
			require.Contains(t, declared, name)
		}
		require.NotPanics(t, func() { require.NoError(t, metrics.InitMetrics(e.config, descriptions)) },
			"core registers every declared metric with Prometheus")

		samples, err := m.GetNodeMetrics(t.Context(), &coretypes.Node{NodeMeta: coretypes.NodeMeta{Name: "n1", Podname: "pod1"}})
		require.NoError(t, err)
		for _, s := range samples {
			require.Contains(t, declared, s.Name)
			require.Len(t, s.Labels, declared[s.Name], "label values of %s", s.Name)
		}
		require.NotPanics(t, func() { metrics.Client.SendMetrics(t.Context(), samples...) },
			"core hands each sample to its collector with WithLabelValues")

		gauge := func(name string, labels ...string) float64 {
			vec, ok := metrics.Client.Collectors[name].(*prometheus.GaugeVec)
			require.True(t, ok, "%s is a gauge", name)
			g, err := vec.GetMetricWithLabelValues(labels...)
			require.NoError(t, err)
			var out dto.Metric
			require.NoError(t, g.Write(&out))
			return out.GetGauge().GetValue()
		}
		require.Equal(t, float64(200*GiB), gauge("storage_used", "pod1", "n1"))
		require.Equal(t, float64(400*GiB+TiB), gauge("storage_capacity", "pod1", "n1"))
		require.Equal(t, float64(200*GiB), gauge("storage_volume_used", "pod1", "n1", "/data0"))
		require.Equal(t, float64(TiB), gauge("storage_volume_capacity", "pod1", "n1", "/data1"))
		require.Equal(t, float64(1000), gauge("compute_cpu_used_millis", "pod1", "n1"))
		require.Equal(t, float64(4000), gauge("compute_cpu_schedulable_millis", "pod1", "n1"))
	})

	step(t, "RollbackAlloc releases the workloads' usage", func(t *testing.T) {
		require.NoError(t, m.RollbackAlloc(t.Context(), "n1", allocated))
		usage := asStorageNode(t, nodeInfo(t, storage, "n1", nil).Usage)
		require.Zero(t, usage.Storage)
		require.Equal(t, map[string]int64{"/data0": 0, "/data1": 0}, usage.Volumes)
	})

	step(t, "RemoveNode forgets the node in every plugin", func(t *testing.T) {
		require.NoError(t, m.RemoveNode(t.Context(), "n3"))
		for _, resource := range resourceNames {
			stored, _ := e.record(t, resource, "n3")
			require.Nil(t, stored, "%s record of n3", resource)
		}
		info := nodeInfo(t, storage, "n3", nil)
		require.Empty(t, info.Capacity)
		require.Empty(t, info.Usage)
	})
}

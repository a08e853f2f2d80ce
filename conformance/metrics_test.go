package conformance

import (
	"testing"

	"github.com/projecteru2/core/metrics"
	"github.com/projecteru2/core/resource/plugins"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestMetricsAsCoreExportsThem(t *testing.T) {
	e := newEnv(t)
	storage := e.plugin(t, "storage")
	compute := e.plugin(t, "compute")
	const node = "n1.rack-2"
	addNode(t, storage, node, n1Request, nil)
	addNode(t, compute, node, params{"cpu": 4, "memory": "8G"}, nil)
	sd, err := storage.CalculateDeploy(t.Context(), node, 1, params{"volumes": []string{"AUTO:/data:rw:100G"}})
	require.NoError(t, err)
	_, err = storage.SetNodeResourceUsage(t.Context(), node, nil, nil, sd.WorkloadsResource, true, plugins.Incr)
	require.NoError(t, err)
	cd, err := compute.CalculateDeploy(t.Context(), node, 1, params{"cpu": 1.5, "memory": "1G"})
	require.NoError(t, err)
	_, err = compute.SetNodeResourceUsage(t.Context(), node, nil, nil, cd.WorkloadsResource, true, plugins.Incr)
	require.NoError(t, err)

	type sample struct{ key, value string }
	cases := []struct {
		resource string
		plugin   plugins.Plugin
		declared map[string][]string // metric name: label names
		samples  map[string][]sample // metric name: key and value, per label set
	}{
		{
			resource: "storage", plugin: storage,
			declared: map[string][]string{
				"storage_used":            {"podname", "nodename"},
				"storage_capacity":        {"podname", "nodename"},
				"storage_volume_used":     {"podname", "nodename", "device"},
				"storage_volume_capacity": {"podname", "nodename", "device"},
				"storage_pool_held_bytes": {"podname", "nodename", "pool"},
				"node_schedulable":        {"podname", "nodename"},
			},
			samples: map[string][]sample{
				"storage_used":     {{"core.node.n1_rack-2.storage.used", "107374182400"}},
				"storage_capacity": {{"core.node.n1_rack-2.storage.capacity", "4398046511104"}},
				"storage_volume_used": {
					{"core.node.n1_rack-2.storage.volume._data0.used", "107374182400"},
					{"core.node.n1_rack-2.storage.volume._data1.used", "0"},
				},
				"storage_volume_capacity": {
					{"core.node.n1_rack-2.storage.volume._data0.capacity", "1099511627776"},
					{"core.node.n1_rack-2.storage.volume._data1.capacity", "1099511627776"},
				},
				"node_schedulable": {{"core.node.n1_rack-2.storage.schedulable", "1"}},
			},
		},
		{
			resource: "compute", plugin: compute,
			declared: map[string][]string{
				"compute_cpu_schedulable_millis":   {"podname", "nodename"},
				"compute_cpu_used_millis":          {"podname", "nodename"},
				"compute_memory_schedulable_bytes": {"podname", "nodename"},
				"compute_memory_used_bytes":        {"podname", "nodename"},
				"compute_cpu_ratio":                {"podname", "nodename"},
				"compute_memory_ratio":             {"podname", "nodename"},
				"node_schedulable":                 {"podname", "nodename"},
			},
			samples: map[string][]sample{
				"compute_cpu_schedulable_millis":   {{"core.node.n1_rack-2.compute.cpu.schedulable_millis", "4000"}},
				"compute_cpu_used_millis":          {{"core.node.n1_rack-2.compute.cpu.used_millis", "1500"}},
				"compute_memory_schedulable_bytes": {{"core.node.n1_rack-2.compute.memory.schedulable_bytes", "8589934592"}},
				"compute_memory_used_bytes":        {{"core.node.n1_rack-2.compute.memory.used_bytes", "1073741824"}},
				"compute_cpu_ratio":                {{"core.node.n1_rack-2.compute.cpu.ratio", "1000"}},
				"compute_memory_ratio":             {{"core.node.n1_rack-2.compute.memory.ratio", "1000"}},
				"node_schedulable":                 {{"core.node.n1_rack-2.compute.schedulable", "1"}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.resource+" declares its gauges and answers one sample per label set with matching label counts", func(t *testing.T) {
			descriptions, err := tc.plugin.GetMetricsDescription(t.Context())
			require.NoError(t, err)
			declared := map[string][]string{}
			for _, d := range *descriptions {
				require.Equal(t, "gauge", d.Type, d.Name)
				require.NotEmpty(t, d.Help, d.Name)
				declared[d.Name] = d.Labels
			}
			require.Equal(t, tc.declared, declared)

			metrics, err := tc.plugin.GetMetrics(t.Context(), "pod1", node)
			require.NoError(t, err)
			got := map[string][]sample{}
			for _, m := range *metrics {
				require.Contains(t, declared, m.Name)
				require.Len(t, m.Labels, len(declared[m.Name]), "label values of %s: Prometheus' WithLabelValues panics on a count mismatch", m.Name)
				require.Equal(t, []string{"pod1", node}, m.Labels[:2], m.Name)
				got[m.Name] = append(got[m.Name], sample{m.Key, m.Value})
			}
			for name := range tc.samples {
				require.ElementsMatch(t, tc.samples[name], got[name], name)
			}
			require.Len(t, got, len(tc.samples))
		})
	}
}

// TestCoresExporterKeepsOneSchedulableSeriesPerNode feeds the samples to
// core's own metrics code (metrics.Metrics.SendMetrics, collectors made
// from the descriptions as metrics.InitMetrics makes them) before and after
// the node is drained. core never deletes a label set it was given, so a
// label whose value changed would leave the node's old series exported at
// its old value: node_schedulable must stay one series per node, now 0.
func TestCoresExporterKeepsOneSchedulableSeriesPerNode(t *testing.T) {
	e := newEnv(t)
	for _, resource := range []string{"storage", "compute"} {
		t.Run(resource+"'s node_schedulable of a drained node is one series, at 0", func(t *testing.T) {
			p := e.plugin(t, resource)
			node := "sched-" + resource
			req := n1Request
			if resource == "compute" {
				req = params{"cpu": 4, "memory": "8G"}
			}
			addNode(t, p, node, req, nil)
			descriptions, err := p.GetMetricsDescription(t.Context())
			require.NoError(t, err)
			exporter := metrics.Metrics{Collectors: map[string]prometheus.Collector{}}
			for _, d := range *descriptions {
				exporter.Collectors[d.Name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.Name, Help: d.Help}, d.Labels)
			}
			send := func() {
				samples, err := p.GetMetrics(t.Context(), "pod1", node)
				require.NoError(t, err)
				exporter.SendMetrics(t.Context(), *samples...)
			}
			send()
			_, stderr, code := e.command(t, resource, []string{"nodes", "drain", node}, nil)
			require.Zero(t, code, stderr)
			send()
			schedulable := exporter.Collectors["node_schedulable"]
			require.Equal(t, 1, testutil.CollectAndCount(schedulable), "one series for the node, not one per status it had")
			require.Equal(t, 0.0, testutil.ToFloat64(schedulable))
		})
	}
}

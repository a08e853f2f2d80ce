package serve

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// TestNodeMetricsAreValidPrometheusText writes samples with awkward label
// values and parses the text back with Prometheus' own parser.
func TestNodeMetricsAreValidPrometheusText(t *testing.T) {
	snap := &nodeSnapshot{
		descs: map[string]types.MetricDescription{
			"storage_used":        {Name: "storage_used", Help: "bytes used\nby volumes \\ disks", Type: "gauge", Labels: []string{"podname", "nodename"}},
			"storage_volume_used": {Name: "storage_volume_used", Help: "per volume", Type: "gauge", Labels: []string{"podname", "nodename", "device"}},
		},
		samples: []types.Metric{
			{Name: "storage_used", Labels: []string{"", "n1"}, Value: "1073741824"},
			{Name: "storage_volume_used", Labels: []string{"p", "n1", `/data "0"\new` + "\n"}, Value: "5"},
			{Name: "storage_used", Labels: []string{"p", "n2"}, Value: "0.5"},
			{Name: "storage_used", Labels: []string{"p"}, Value: "1"},          // label count wrong: left out
			{Name: "storage_used", Labels: []string{"p", "n3"}, Value: "lots"}, // not a number: left out
			{Name: "undeclared", Labels: nil, Value: "1"},                      // no description: left out
		},
		statuses: []nodeStatus{{NodeID: "n1", Status: "READY"}},
	}
	var buf bytes.Buffer
	require.NoError(t, writeNodeMetrics(&buf, snap))
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(&buf)
	require.NoError(t, err, buf.String())
	require.Len(t, families, 3)
	require.Len(t, families["storage_used"].Metric, 2)
	require.Equal(t, "bytes used\nby volumes \\ disks", families["storage_used"].GetHelp())
	vol := families["storage_volume_used"].Metric[0]
	device := ""
	for _, l := range vol.Label {
		if l.GetName() == "device" {
			device = l.GetValue()
		}
	}
	require.Equal(t, `/data "0"\new`+"\n", device, "escaped and read back whole")
	require.Equal(t, 5.0, vol.GetGauge().GetValue())
	require.Len(t, families["eru_node_status"].Metric, 7)
	ones := 0
	for _, m := range families["eru_node_status"].Metric {
		ones += int(m.GetGauge().GetValue())
	}
	require.Equal(t, 1, ones)
}

func TestASeriesBothPluginsAnswerIsWrittenOnce(t *testing.T) {
	desc := types.MetricDescription{Name: "node_schedulable", Help: "1 when placement may use the node", Type: "gauge", Labels: []string{"podname", "nodename"}}
	snap := &nodeSnapshot{
		descs:  map[string]types.MetricDescription{"node_schedulable": desc},
		shared: map[string]bool{"node_schedulable": true},
		samples: []types.Metric{
			{Name: "node_schedulable", Labels: []string{"", "n1"}, Value: "1"}, // storage's
			{Name: "node_schedulable", Labels: []string{"", "n2"}, Value: "1"},
			{Name: "node_schedulable", Labels: []string{"", "n1"}, Value: "1"}, // compute's
		},
	}
	var buf bytes.Buffer
	require.NoError(t, writeNodeMetrics(&buf, snap))
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte(`node_schedulable{podname="",nodename="n1"} 1`)), buf.String())
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte(`node_schedulable{podname="",nodename="n2"} 1`)), buf.String())
}

// TestTheDaemonsOwnHelpSaysWhatEachSeriesCounts: a family's HELP is the one
// text of all its series, so it must hold for each of them: the reads of
// eru_serve_cache_reads_total{source="etcd"} are those the cache did not
// answer.
func TestTheDaemonsOwnHelpSaysWhatEachSeriesCounts(t *testing.T) {
	c := newCluster(t, 1)
	families, err := c.d.metrics.reg.Gather()
	require.NoError(t, err)
	help := map[string]string{}
	for _, f := range families {
		help[f.GetName()] = f.GetHelp()
	}
	t.Run("the reads family names both sources", func(t *testing.T) {
		require.Contains(t, help, "eru_serve_cache_reads_total")
		require.NotContains(t, help["eru_serve_cache_reads_total"], "answered from the cache.", "the etcd series counts reads the cache did not answer")
		require.Contains(t, help["eru_serve_cache_reads_total"], `source="etcd"`)
	})
	t.Run("the lag is what the cache has still to apply, not what it lacked when a read asked", func(t *testing.T) {
		require.Contains(t, help, "eru_serve_cache_revision_lag")
		require.NotContains(t, help["eru_serve_cache_revision_lag"], "at the last read")
	})
}

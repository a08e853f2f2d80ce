package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// metrics are the daemon's Prometheus registry: every node's gauges of both
// plugins and its status, built from the cache, and the daemon's own.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(d *Daemon) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eru_serve_requests_total", Help: "Calls the daemon answered, by verb (or HTTP route) and result.",
		}, []string{"verb", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eru_serve_request_duration_seconds", Help: "Time to answer a call, by verb (or HTTP route).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"verb"}),
	}
	m.reg.MustRegister(m.requests, m.latency)
	if c := d.cache; c != nil {
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eru_serve_cache_revision_lag", Help: "Revisions the cache was behind etcd at the last read."},
				func() float64 { return float64(c.Lag()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eru_serve_cache_revision", Help: "The etcd revision the cache has applied."},
				func() float64 { return float64(c.Stats().Applied) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eru_serve_cache_synced", Help: "1 while the cache holds a gap-free copy of etcd."},
				func() float64 { return b2f(c.Ready()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eru_serve_watch_restarts_total", Help: "Times the watch was re-listed (compaction, cancellation, etcd unreachable)."},
				func() float64 { return float64(c.Stats().Restarts) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eru_serve_cache_reads_total", Help: "Linearizable reads answered from the cache.", ConstLabels: prometheus.Labels{"source": "cache"}},
				func() float64 { return float64(c.Stats().Cached) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eru_serve_cache_reads_total", Help: "Linearizable reads answered from the cache.", ConstLabels: prometheus.Labels{"source": "etcd"}},
				func() float64 { return float64(c.Stats().Direct) }),
		)
	}
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// writeNodeMetrics writes every node's plugin gauges and its status in
// Prometheus' text format. They are written directly rather than through
// the registry: a scrape of 10,000 nodes is well over 100,000 series, and
// building, sorting and checking a metric object for each costs far more
// than the text.
func writeNodeMetrics(w io.Writer, snap *nodeSnapshot) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	byName := map[string][]int{}
	for i, s := range snap.samples {
		byName[s.Name] = append(byName[s.Name], i)
	}
	names := make([]string, 0, len(snap.descs))
	for name := range snap.descs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		desc := snap.descs[name]
		if len(byName[name]) == 0 || !model.IsValidLegacyMetricName(name) {
			continue
		}
		kind := "gauge"
		if desc.Type == "counter" {
			kind = "counter"
		}
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(desc.Help), name, kind)
		for _, i := range byName[name] {
			s := snap.samples[i]
			if len(s.Labels) != len(desc.Labels) {
				continue
			}
			if _, err := strconv.ParseFloat(s.Value, 64); err != nil {
				continue
			}
			writeSeries(bw, name, desc.Labels, s.Labels, s.Value)
		}
	}
	if len(snap.statuses) > 0 {
		bw.WriteString("# HELP eru_node_status 1 for the node's current status in the registry, 0 for the others.\n# TYPE eru_node_status gauge\n")
		labels := []string{"nodename", "status"}
		for _, n := range snap.statuses {
			for _, st := range nodes.Statuses() {
				v := "0"
				if string(st) == n.Status {
					v = "1"
				}
				writeSeries(bw, "eru_node_status", labels, []string{n.NodeID, string(st)}, v)
			}
		}
	}
	return bw.Flush()
}

func writeSeries(w *bufio.Writer, name string, labels, values []string, value string) {
	w.WriteString(name)
	if len(labels) > 0 {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l)
			w.WriteString(`="`)
			w.WriteString(labelEscaper.Replace(values[i]))
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(value)
	w.WriteByte('\n')
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeHelp(s string) string { return helpEscaper.Replace(s) }

// metricsHandler serves /metrics: the nodes' series, then the daemon's own
// from its registry, in the text format.
func (d *Daemon) metricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		if snap, err := d.nodeSamples(r.Context()); err != nil {
			d.log.Warn("metrics: nodes not collected", "error", err.Error())
		} else if err := writeNodeMetrics(w, snap); err != nil {
			return
		}
		families, err := d.metrics.reg.Gather()
		if err != nil {
			d.log.Warn("metrics: gathering the daemon's own", "error", err.Error())
		}
		for _, mf := range families {
			if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
				return
			}
		}
	})
}

// nodeSnapshot is every node's samples and status at one moment.
type nodeSnapshot struct {
	descs    map[string]types.MetricDescription
	samples  []types.Metric
	statuses []nodeStatus
}

type nodeStatus struct {
	NodeID string `json:"node_id"`
	Status string `json:"status"`
}

// nodeSamples runs get-metrics for every node each plugin knows, and
// `nodes list`, through the command tree on the cache as it is (the
// embedded store is read as an exec'd binary would).
func (d *Daemon) nodeSamples(ctx context.Context) (*nodeSnapshot, error) {
	var st store.Store
	var rev int64
	if d.cache != nil {
		// An unchanged cache renders the same samples: reuse them.
		rev = d.cache.Stats().Applied
		d.samplesMu.Lock()
		defer d.samplesMu.Unlock()
		if d.samples != nil && d.samplesRev == rev && d.cache.Ready() {
			return d.samples, nil
		}
		st = d.cache.Stale()
	}
	opts := d.options(d.cfg, st)
	out := &nodeSnapshot{descs: map[string]types.MetricDescription{}}
	for _, b := range Binaries {
		code, stdout, _ := d.run(opts, b, []string{"get-metrics-description"}, nil)
		var descs []types.MetricDescription
		if code != 0 || json.Unmarshal(stdout, &descs) != nil {
			continue
		}
		for _, ds := range descs {
			out.descs[ds.Name] = ds
		}
		names, err := d.recordNames(ctx, st, b)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			continue
		}
		refs := make([]types.NodeRef, len(names))
		for i, n := range names {
			refs[i] = types.NodeRef{Nodename: n}
		}
		in, _ := json.Marshal(map[string]any{"nodes": refs})
		code, stdout, stderr := d.run(opts, b, []string{"get-metrics"}, in)
		var samples []types.Metric
		if code != 0 || json.Unmarshal(stdout, &samples) != nil {
			d.log.Warn("metrics: get-metrics failed", "plugin", b, "error", string(stderr))
			continue
		}
		out.samples = append(out.samples, samples...)
	}
	code, stdout, _ := d.run(opts, d.name, []string{"nodes", "list", "-o", "json"}, nil)
	var list struct {
		Nodes []nodeStatus `json:"nodes"`
	}
	if code == 0 && json.Unmarshal(stdout, &list) == nil {
		out.statuses = list.Nodes
	}
	if d.cache != nil {
		d.samples, d.samplesRev = out, rev
	}
	return out, nil
}

// recordNames lists the nodes a plugin holds a record of.
func (d *Daemon) recordNames(ctx context.Context, st store.Store, plugin string) ([]string, error) {
	if st == nil {
		s, err := d.cfg.Open(ctx, config.Read)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		st = s
	}
	prefix := nodes.RecordPrefix(plugin)
	items, err := store.Range(ctx, st, prefix)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(items))
	for _, it := range items {
		names = append(names, it.Key[len(prefix):])
	}
	slices.Sort(names)
	return names, nil
}

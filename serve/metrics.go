package serve

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

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
	m.reg.MustRegister(m.requests, m.latency, nodeCollector{d})
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

// nodeCollector renders every node's plugin gauges and status on each
// scrape, from the cache as it is (no store read).
type nodeCollector struct{ d *Daemon }

func (nodeCollector) Describe(chan<- *prometheus.Desc) {} // unchecked: the plugins declare their metrics

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	snap, err := c.d.nodeSamples(context.Background())
	if err != nil {
		c.d.log.Warn("metrics: nodes not collected", "error", err.Error())
		return
	}
	descs := make(map[string]*prometheus.Desc, len(snap.descs))
	for name, d := range snap.descs {
		descs[name] = prometheus.NewDesc(d.Name, d.Help, d.Labels, nil)
	}
	for _, s := range snap.samples {
		desc, ok := snap.descs[s.Name]
		if !ok || len(desc.Labels) != len(s.Labels) {
			continue
		}
		v, err := strconv.ParseFloat(s.Value, 64)
		if err != nil {
			continue
		}
		kind := prometheus.GaugeValue
		if desc.Type == "counter" {
			kind = prometheus.CounterValue
		}
		m, err := prometheus.NewConstMetric(descs[s.Name], kind, v, s.Labels...)
		if err == nil {
			ch <- m
		}
	}
	status := prometheus.NewDesc("eru_node_status", "1 for the node's current status in the registry, 0 for the others.", []string{"nodename", "status"}, nil)
	for _, n := range snap.statuses {
		for _, st := range nodes.Statuses {
			ch <- prometheus.MustNewConstMetric(status, prometheus.GaugeValue, b2f(string(st) == n.Status), n.NodeID, string(st))
		}
	}
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

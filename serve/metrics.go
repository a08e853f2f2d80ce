package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/storage/pool"
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
	// The process' and Go runtime's own series (open files, resident
	// memory, goroutines, GC): what an operator watches a long-running
	// daemon for leaks with.
	m.reg.MustRegister(m.requests, m.latency, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	if c := d.cache; c != nil {
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eru_serve_cache_revision_lag", Help: "Revisions etcd had reached when a read last asked it that the cache has not applied yet."},
				func() float64 { return float64(c.Lag()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eru_serve_cache_revision", Help: "The etcd revision the cache has applied."},
				func() float64 { return float64(c.Stats().Applied) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eru_serve_cache_synced", Help: "1 while the cache holds a gap-free copy of etcd."},
				func() float64 { return b2f(c.Ready()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eru_serve_watch_restarts_total", Help: "Times the watch was re-listed (compaction, cancellation, etcd unreachable)."},
				func() float64 { return float64(c.Stats().Restarts) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eru_serve_cache_reads_total", Help: readsHelp, ConstLabels: prometheus.Labels{"source": "cache"}},
				func() float64 { return float64(c.Stats().Cached) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eru_serve_cache_reads_total", Help: readsHelp, ConstLabels: prometheus.Labels{"source": "etcd"}},
				func() float64 { return float64(c.Stats().Direct) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eru_serve_store_reads_total", Help: "Read requests the daemon sent etcd: revision checks, direct reads and lists (a scrape sends none)."},
				func() float64 { return float64(c.Stats().EtcdReads) }),
		)
	}
	return m
}

// readsHelp is the one HELP of both eru_serve_cache_reads_total series.
const readsHelp = `Linearizable reads, by where they were answered: source="cache" from the watch cache, source="etcd" from etcd directly (the cache could not catch up in time).`

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
		// A series must appear once in a scrape: of a shared name, the
		// first plugin's sample of a node is written (both answer it from
		// the one node registration).
		var written map[string]bool
		if snap.shared[name] {
			written = map[string]bool{}
		}
		for _, i := range byName[name] {
			s := snap.samples[i]
			if len(s.Labels) != len(desc.Labels) {
				continue
			}
			if _, err := strconv.ParseFloat(s.Value, 64); err != nil {
				continue
			}
			if written != nil {
				key := strings.Join(s.Labels, "\xff")
				if written[key] {
					continue
				}
				written[key] = true
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
	writePoolMetrics(bw, snap.pools)
	return bw.Flush()
}

// poolGauge is one gauge of every storage pool, by pool.
type poolGauge struct {
	name, help string
	value      func(*pool.Record) (int64, bool)
}

// poolGauges are the gauges of every storage pool: what its record holds
// (a pool without a capacity has no capacity series).
func poolGauges() []poolGauge {
	return []poolGauge{
		{"storage_pool_capacity_bytes", "the bytes the pool holds, as its operator set them", func(r *pool.Record) (int64, bool) {
			if r.Capacity == nil {
				return 0, false
			}
			return *r.Capacity, true
		}},
		{"storage_pool_reserved_bytes", "the bytes reserved by the objects living in the pool or moving into it", func(r *pool.Record) (int64, bool) { return r.Reserved, true }},
		{"storage_pool_objects", "the objects living in the pool", func(r *pool.Record) (int64, bool) { return r.Objects, true }},
	}
}

// writePoolMetrics writes the pool gauges of records, in the records' order.
func writePoolMetrics(w *bufio.Writer, records []*pool.Record) {
	if len(records) == 0 {
		return
	}
	labels := []string{"pool"}
	for _, g := range poolGauges() {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", g.name, escapeHelp(g.help), g.name)
		for _, r := range records {
			if v, ok := g.value(r); ok {
				writeSeries(w, g.name, labels, []string{r.ID}, strconv.FormatInt(v, 10))
			}
		}
	}
}

// pools decodes every pool record of view, in key order; a record that
// does not decode is left out and logged (pools check names it).
func pools(view scrapeSource, log *slog.Logger) []*pool.Record {
	var out []*pool.Record
	for _, key := range view.Under(storage.PoolPrefix) {
		data, _ := view.Get(key)
		r, err := pool.DecodeRecord(data)
		if err != nil {
			log.Warn("metrics: a pool record does not decode", "key", key, "error", err.Error())
			continue
		}
		out = append(out, r)
	}
	return out
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
	descs map[string]types.MetricDescription
	// shared are the names more than one plugin declares (node_schedulable):
	// each node's series of them is written once.
	shared   map[string]bool
	samples  []types.Metric
	statuses []nodeStatus
	pools    []*pool.Record
}

type nodeStatus struct {
	NodeID string `json:"node_id"`
	Status string `json:"status"`
}

// nodeSamples samples every node each plugin holds a record of, and every
// node's status, from one view of the store: on etcd the cache as it stands
// (a scrape needs no linearizability, and costs no store read), its records
// decoded already; on the embedded store one read, as an exec'd binary's.
// The plugins' engines sample the nodes directly, as get-metrics does.
func (d *Daemon) nodeSamples(ctx context.Context) (*nodeSnapshot, error) {
	var rev int64
	if d.cache != nil {
		// An unchanged cache renders the same samples: reuse them.
		rev = d.cache.Stats().Applied
		d.samplesMu.Lock()
		defer d.samplesMu.Unlock()
		if d.samples != nil && d.samplesRev == rev && d.cache.Ready() {
			return d.samples, nil
		}
	}
	view, open, done, err := d.scrapeView(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	out := &nodeSnapshot{descs: map[string]types.MetricDescription{}, shared: map[string]bool{}}
	policy := cmd.Policy(d.cfg)
	recorded := map[string][]string{} // plugin -> the keys of its records
	for _, b := range Binaries {
		eng, err := cmd.Engine(b, d.cfg, open, fixedSnapshot{view})
		if err != nil {
			return nil, err
		}
		descs, err := eng.MetricsDescription(ctx, &types.Request{})
		if err != nil {
			return nil, err
		}
		for _, ds := range descs.([]types.MetricDescription) {
			if _, again := out.descs[ds.Name]; again {
				out.shared[ds.Name] = true
			}
			out.descs[ds.Name] = ds
		}
		prefix := nodes.RecordPrefix(b)
		names := view.Under(prefix)
		recorded[b] = names
		if len(names) == 0 {
			continue
		}
		refs := make([]types.NodeRef, len(names))
		for i, key := range names {
			refs[i] = types.NodeRef{Nodename: key[len(prefix):]}
		}
		samples, err := eng.Metrics(ctx, &types.Request{Nodes: refs})
		if err != nil {
			// One record that cannot be read fails the whole call: sample
			// node by node, leaving out only the nodes that fail, as core's
			// per-node sweep would.
			samples = d.sampleEach(ctx, eng, b, refs)
		}
		if out.samples == nil {
			out.samples = samples.([]types.Metric) // most often the larger: no copy
		} else {
			out.samples = append(out.samples, samples.([]types.Metric)...)
		}
	}
	out.statuses = statuses(view, recorded, policy, d.decoders)
	out.pools = pools(view, d.log)
	if d.cache != nil {
		d.samples, d.samplesRev = out, rev
	}
	return out, nil
}

// scrapeView is what a scrape reads: the cache as it stands, or one read
// of the embedded store; open is the store the engines may open, and done
// releases what the view holds.
func (d *Daemon) scrapeView(ctx context.Context) (scrapeSource, func(context.Context, bool) (store.Store, error), func(), error) {
	if d.cache != nil {
		v, err := d.cache.StaleView(nil, []string{""})
		if err != nil {
			return nil, nil, nil, err
		}
		stale := d.cache.Stale()
		return v, func(context.Context, bool) (store.Store, error) { return stale, nil }, func() {}, nil
	}
	s, err := d.cfg.OpenWaiting(ctx, config.Read, d.lockWaits)
	if err != nil {
		return nil, nil, nil, err
	}
	snap, err := s.Read(ctx, nil, []string{""})
	if err != nil {
		_ = s.Close()
		return nil, nil, nil, err
	}
	return storeView{snap}, func(context.Context, bool) (store.Store, error) { return noClose{s}, nil }, func() { _ = s.Close() }, nil
}

// scrapeSource is one view of the whole store.
type scrapeSource = engine.Snapshot

// fixedSnapshot answers every read of a scrape from its one view.
type fixedSnapshot struct{ v engine.Snapshot }

func (f fixedSnapshot) ReadSnapshot(context.Context, []string, []string) (engine.Snapshot, error) {
	return f.v, nil
}

// storeView is a store read as a scrapeSource, nothing decoded ahead.
type storeView struct{ *store.Snapshot }

func (storeView) Decoded(string) (any, bool) { return nil, false }

func (s storeView) Under(prefix string) []string {
	items := s.Snapshot.Under(prefix)
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Key
	}
	return out
}

// statuses is every node's status, as `nodes list` answers it: every node
// registered or recorded by a plugin, in name order. A node one of whose
// records cannot be decoded is left out (its get-metrics fails too).
func statuses(view scrapeSource, recorded map[string][]string, p nodes.Policy, decs engine.Decoders) []nodeStatus {
	names := map[string]bool{}
	for _, k := range view.Under(nodes.RegistrationPrefix) {
		names[k[len(nodes.RegistrationPrefix):]] = true
	}
	for _, b := range Binaries {
		prefix := nodes.RecordPrefix(b)
		for _, k := range recorded[b] {
			names[k[len(prefix):]] = true
		}
	}
	out := make([]nodeStatus, 0, len(names))
	for _, n := range types.SortedKeys(names) {
		entry := &nodes.Entry{}
		if data, ok := view.Get(nodes.RegistrationKey(n)); ok {
			d, _ := view.Decoded(nodes.RegistrationKey(n))
			reg, ok := d.(*nodes.Registration)
			if !ok {
				var err error
				if reg, err = nodes.DecodeRegistration(n, data); err != nil {
					continue
				}
			}
			entry.Reg = reg
		}
		_, entry.Live = view.Get(nodes.SessionKey(n))
		holds, ok := holdsUsage(view, n, decs)
		if !ok {
			continue
		}
		out = append(out, nodeStatus{NodeID: n, Status: string(entry.Status(holds, p))})
	}
	return out
}

// holdsUsage reports whether any plugin's record of node holds usage; false
// ok when a record cannot be decoded.
func holdsUsage(view scrapeSource, node string, decs engine.Decoders) (holds, ok bool) {
	for _, b := range Binaries {
		key := nodes.RecordPrefix(b) + node
		data, found := view.Get(key)
		if !found {
			continue
		}
		d, _ := view.Decoded(key)
		rec, decoded := d.(*engine.DecodedRecord)
		if !decoded {
			if rec, decoded = decs.Decode(key, data).(*engine.DecodedRecord); !decoded {
				return false, false
			}
		}
		holds = holds || !rec.Held.IsZero()
	}
	return holds, true
}

// sampleEach is get-metrics of each node alone, without the nodes whose
// call fails (each logged).
func (d *Daemon) sampleEach(ctx context.Context, eng metricsEngine, plugin string, refs []types.NodeRef) any {
	out := []types.Metric{}
	for _, ref := range refs {
		samples, err := eng.Metrics(ctx, &types.Request{Nodes: []types.NodeRef{ref}})
		if err != nil {
			d.log.Warn("metrics: node left out of the scrape", "plugin", plugin, "node", ref.Nodename, "error", err.Error())
			continue
		}
		out = append(out, samples.([]types.Metric)...)
	}
	return out
}

// metricsEngine is what sampleEach calls of a plugin's engine.
type metricsEngine interface {
	Metrics(ctx context.Context, req *types.Request) (any, error)
}

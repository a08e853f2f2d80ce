package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

var clusters atomic.Int64

// cluster is a daemon on the shared test etcd, over a prefix of its own
// filled with n nodes of both plugins.
type cluster struct {
	d      *Daemon
	cfg    *config.Config
	client *clientv3.Client
	prefix string
	names  []string
}

// newCluster seeds n nodes (node i uses i%7 GiB of its volume, every
// fifth is drained) and starts a daemon whose cache is synced.
func newCluster(tb testing.TB, n int) *cluster {
	tb.Helper()
	e := storetest.SharedEtcd(tb)
	dir := tb.TempDir()
	prefix := fmt.Sprintf("/serve-snapshot-%d-%d", os.Getpid(), clusters.Add(1))
	file := filepath.Join(dir, "storage.yaml")
	require.NoError(tb, os.WriteFile(file, []byte(fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %s\n", e.Endpoint, prefix)), 0o644))
	cfg, err := config.Load(file, "storage")
	require.NoError(tb, err)
	c := &cluster{cfg: cfg, client: e.Client(tb), prefix: prefix}
	for i := range n {
		name := fmt.Sprintf("n%05d", i)
		c.names = append(c.names, name)
	}
	c.seed(tb)
	sc, err := LoadConfig(file, dir)
	require.NoError(tb, err)
	c.d, err = New(context.Background(), "storage", dir, cfg, sc, slog.New(slog.DiscardHandler), nil)
	require.NoError(tb, err)
	tb.Cleanup(c.d.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(tb, c.d.Cache().WaitReady(ctx))
	return c
}

// seed adds the first node through the binaries' command tree and copies
// its records, with usages and drains of its own, to the others.
func (c *cluster) seed(tb testing.TB) {
	ctx := context.Background()
	for _, call := range []struct{ binary, in string }{
		{"storage", `{"nodename":"n00000","resource":{"volumes":["/data0:1T"],"storage":"2T"}}`},
		{"compute", `{"nodename":"n00000","resource":{"cpu":16,"memory":"64G"}}`},
	} {
		code, _, stderr := c.cold(call.binary, "add-node", call.in)
		require.Equal(tb, 0, code, stderr)
	}
	get := func(key string) string {
		resp, err := c.client.Get(ctx, c.prefix+key)
		require.NoError(tb, err)
		require.Len(tb, resp.Kvs, 1, key)
		return string(resp.Kvs[0].Value)
	}
	stor, comp, reg := get("/resource/storage/n00000"), get("/resource/compute/n00000"), get("/nodes/n00000")
	require.Contains(tb, stor, `"/data0":0`)
	for start := 1; start < len(c.names); start += 40 {
		var ops []clientv3.Op
		for i := start; i < min(start+40, len(c.names)); i++ {
			n := c.names[i]
			r := strings.Replace(reg, `"node_id":"n00000"`, `"node_id":"`+n+`"`, 1)
			if i%5 == 0 {
				r = strings.Replace(r, `"drain":false`, `"drain":true`, 1)
			}
			ops = append(ops,
				clientv3.OpPut(c.prefix+"/resource/storage/"+n, strings.Replace(stor, `"/data0":0`, fmt.Sprintf(`"/data0":%d`, int64(i%7)<<30), 1)),
				clientv3.OpPut(c.prefix+"/resource/compute/"+n, comp),
				clientv3.OpPut(c.prefix+"/nodes/"+n, r))
		}
		_, err := c.client.Txn(ctx).Then(ops...).Commit()
		require.NoError(tb, err)
	}
}

// cold runs a verb as an exec'd binary would: its own store connection,
// nothing cached.
func (c *cluster) cold(binary, verb, stdin string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cmd.MainWith(cmd.Options{Config: c.cfg}, binary, []string{verb}, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// served runs a verb as the daemon runs a forwarded call.
func (c *cluster) served(binary, verb, stdin string) (int, string, string) {
	code, out, errb := c.d.run(c.d.options(c.cfg, c.d.linearizable()), binary, []string{verb}, []byte(stdin))
	return code, string(out), string(errb)
}

func (c *cluster) capacityRequest(tb testing.TB, names []string) string {
	data, err := json.Marshal(map[string]any{"nodenames": names, "workload_resource": map[string]any{"volumes": []string{"AUTO:/data:rw:100G"}}})
	require.NoError(tb, err)
	return string(data)
}

func (c *cluster) metricsRequest(tb testing.TB, names []string) string {
	refs := make([]map[string]string, len(names))
	for i, n := range names {
		refs[i] = map[string]string{"podname": "p", "nodename": n}
	}
	data, err := json.Marshal(map[string]any{"nodes": refs})
	require.NoError(tb, err)
	return string(data)
}

// TestVerbsFromDecodedRecordsAnswerAsTheBinary: the verbs that read many
// nodes from the cache's decoded records answer the bytes and status the
// binary answers reading etcd itself, before and after writes, for a
// corrupt record too; and no verb changed a decoded record.
func TestVerbsFromDecodedRecordsAnswerAsTheBinary(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 60
	}
	c := newCluster(t, n)
	some := append([]string{"absent"}, c.names[:40]...)
	calls := []struct{ name, binary, verb, in string }{
		{"capacity over every node", "storage", "get-nodes-deploy-capacity", c.capacityRequest(t, c.names)},
		{"capacity over a few, one unknown", "storage", "get-nodes-deploy-capacity", c.capacityRequest(t, some)},
		{"compute capacity", "compute", "get-nodes-deploy-capacity", `{"nodenames":["n00001","n00002","n00005"],"workload_resource":{"cpu":2,"memory":"1G"}}`},
		{"most idle node", "storage", "get-most-idle-node", `{"nodenames":["n00001","n00002","n00003","n00005"]}`},
		{"most idle compute node", "compute", "get-most-idle-node", `{"nodenames":["n00001","n00002","n00003"]}`},
		{"metrics of many nodes", "storage", "get-metrics", c.metricsRequest(t, c.names)},
		{"compute metrics of a few", "compute", "get-metrics", c.metricsRequest(t, some)},
		{"one node's metrics, as core's sweep asks", "storage", "get-metrics", `{"podname":"p","nodename":"n00007"}`},
		{"a malformed request", "storage", "get-nodes-deploy-capacity", `{"nodenames":"n1"}`},
	}
	compare := func(t *testing.T) {
		for _, call := range calls {
			t.Run(call.name, func(t *testing.T) {
				code, out, errb := c.cold(call.binary, call.verb, call.in)
				scode, sout, serrb := c.served(call.binary, call.verb, call.in)
				require.Equal(t, code, scode)
				require.Equal(t, out, sout)
				require.Equal(t, errb, serrb)
			})
		}
	}
	t.Run("on the records as seeded", compare)
	before := c.d.Cache().Stats().Cached

	t.Run("after writes through the daemon", func(t *testing.T) {
		for _, n := range []string{"n00003", "n00004"} {
			in := `{"nodename":"` + n + `","resource_request":{"volumes":["/data0:100G"]},"delta":true,"incr":true}`
			code, _, errb := c.served("storage", "set-node-resource-usage", in)
			require.Equal(t, 0, code, errb)
		}
		code, _, errb := c.served("storage", "set-node-resource-capacity", `{"nodename":"n00006","resource_request":{"volumes":["/data1:1T"]},"delta":true,"incr":true}`)
		require.Equal(t, 0, code, errb)
		compare(t)
	})

	t.Run("after the cluster's overcommit defaults change (a shared key every capacity reads)", func(t *testing.T) {
		const computeCapacity = `{"nodenames":["n00001","n00002"],"workload_resource":{"cpu":2,"memory":"1G"}}`
		_, before, _ := c.served("compute", "get-nodes-deploy-capacity", computeCapacity)
		var out, errb bytes.Buffer
		code := cmd.MainWith(cmd.Options{Config: c.cfg}, "compute", []string{"overcommit", "set-defaults", "--cpu", "3", "--memory", "1"}, strings.NewReader(""), &out, &errb)
		require.Equal(t, 0, code, errb.String())
		_, after, _ := c.served("compute", "get-nodes-deploy-capacity", computeCapacity)
		require.NotEqual(t, before, after, "the remembered capacities are not those of the old defaults")
		compare(t)
	})
	require.Greater(t, c.d.Cache().Stats().Cached, before, "the served reads came from the cache")

	t.Run("calls at once share the decoded records and answer as one at a time", func(t *testing.T) {
		want := make([]string, len(calls))
		for i, call := range calls {
			_, want[i], _ = c.cold(call.binary, call.verb, call.in)
		}
		var wg sync.WaitGroup
		got := make([]string, 4*len(calls))
		for k := range got {
			wg.Go(func() {
				call := calls[k%len(calls)]
				_, got[k], _ = c.served(call.binary, call.verb, call.in)
			})
		}
		wg.Wait()
		for k := range got {
			require.Equal(t, want[k%len(calls)], got[k], calls[k%len(calls)].name)
		}
	})

	t.Run("with a corrupt record", func(t *testing.T) {
		_, err := c.client.Put(context.Background(), c.prefix+"/resource/storage/n00009", `{"capacity":`)
		require.NoError(t, err)
		code, _, errb := c.served("storage", "get-nodes-deploy-capacity", c.capacityRequest(t, c.names))
		require.Equal(t, cmd.PluginExitCode, code)
		require.Contains(t, errb, "n00009")
		compare(t)
	})

	t.Run("no verb changed a decoded record", func(t *testing.T) {
		view, err := c.d.Cache().StaleView(nil, []string{""})
		require.NoError(t, err)
		checked := 0
		for _, key := range view.Under("/") {
			d, ok := view.Decoded(key)
			if !ok {
				continue
			}
			data, _ := view.Get(key)
			fresh := c.d.decoders.Decode(key, data)
			if rec, ok := d.(*engine.DecodedRecord); ok {
				require.Equal(t, fresh.(*engine.DecodedRecord).Record, rec.Record, key)
				require.Equal(t, fresh.(*engine.DecodedRecord).Held, rec.Held, key)
			} else {
				require.Equal(t, fresh, d, key)
			}
			checked++
		}
		require.Equal(t, 3*len(c.names)-1, checked, "every record and registration but the corrupt one was decoded")
	})
}

// TestAScrapeRendersTheDecodedRecordsWithoutAStoreRead: /metrics answers
// every node's gauges as get-metrics does and its status as nodes list
// does, rendered again after a write, and no scrape sends etcd a read.
func TestAScrapeRendersTheDecodedRecordsWithoutAStoreRead(t *testing.T) {
	c := newCluster(t, 40)
	scrape := func() string {
		reads := c.d.Cache().Stats().EtcdReads
		rec := httptest.NewRecorder()
		c.d.metricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, reads, c.d.Cache().Stats().EtcdReads, "the scrape read nothing from etcd")
		return rec.Body.String()
	}
	// The series get-metrics answers for n, as /metrics writes them.
	series := func(binary, n string) []string {
		code, out, errb := c.cold(binary, "get-metrics", `{"nodename":"`+n+`"}`)
		require.Equal(t, 0, code, errb)
		var samples []types.Metric
		require.NoError(t, json.Unmarshal([]byte(out), &samples))
		desc := map[string][]string{}
		_, descs, _ := c.cold(binary, "get-metrics-description", "")
		var ds []types.MetricDescription
		require.NoError(t, json.Unmarshal([]byte(descs), &ds))
		for _, d := range ds {
			desc[d.Name] = d.Labels
		}
		var lines []string
		for _, s := range samples {
			var w bytes.Buffer
			bw := bufio.NewWriter(&w)
			writeSeries(bw, s.Name, desc[s.Name], s.Labels, s.Value)
			require.NoError(t, bw.Flush())
			lines = append(lines, strings.TrimSuffix(w.String(), "\n"))
		}
		return lines
	}
	body := scrape()
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		s := line[:strings.LastIndexByte(line, ' ')]
		require.False(t, seen[s], "the series %s is written twice", s)
		seen[s] = true
	}
	require.True(t, seen[`node_schedulable{podname="",nodename="n00000"}`], "a node both plugins hold has its node_schedulable")
	for _, n := range []string{"n00000", "n00005", "n00013"} {
		for _, b := range Binaries {
			for _, line := range series(b, n) {
				require.True(t, strings.Contains(body, line+"\n"), line)
			}
		}
	}
	for _, want := range []string{
		`eru_node_status{nodename="n00035",status="DRAINED"} 1`,  // drained, holding nothing
		`eru_node_status{nodename="n00005",status="DRAINING"} 1`, // drained, holding 5 GiB
		`eru_node_status{nodename="n00006",status="READY"} 1`,
	} {
		require.True(t, strings.Contains(body, want+"\n"), want)
	}

	code, _, errb := c.served("storage", "set-node-resource-usage", `{"nodename":"n00013","resource_request":{"volumes":["/data0:100G"]},"delta":true,"incr":true}`)
	require.Equal(t, 0, code, errb)
	code, _, errb = c.served("storage", "get-metrics", `{"nodename":"n00013"}`) // a linearizable read: the cache has the write
	require.Equal(t, 0, code, errb)
	body = scrape()
	for _, line := range series("storage", "n00013") {
		require.True(t, strings.Contains(body, line+"\n"), "rendered again after the write: %s", line)
	}
}

// TestAPoolCapacityQueryThroughTheDaemonAnswersAsTheBinary: a capacity
// query with a pool binding reads the pool records with the nodes, in one
// snapshot of the cache, and answers what the binary answers reading etcd
// itself, before and after the pool fills.
func TestAPoolCapacityQueryThroughTheDaemonAnswersAsTheBinary(t *testing.T) {
	c := newCluster(t, 4)
	pooled := []string{"p1", "p2", "p3"}
	for _, n := range pooled {
		in := `{"nodename":"` + n + `","resource":{"storage":"1T","pools":["ceph-a:/mnt/ceph-a"]}}`
		code, _, errb := c.served("storage", "add-node", in)
		require.Equal(t, 0, code, errb)
	}
	var out, errb bytes.Buffer
	code := cmd.MainWith(cmd.Options{Config: c.cfg}, "storage", []string{"pools", "set-capacity", "ceph-a", "250G", "--if-version", "0"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, 0, code, errb.String())
	query := c.capacityRequest(t, append(pooled, c.names[0]))
	query = strings.Replace(query, "AUTO:/data:rw:100G", "POOL@ceph-a:/data:rw:100G", 1)
	compare := func(t *testing.T, want int) {
		code, out, errb := c.cold("storage", "get-nodes-deploy-capacity", query)
		scode, sout, serrb := c.served("storage", "get-nodes-deploy-capacity", query)
		require.Equal(t, code, scode)
		require.Equal(t, out, sout)
		require.Equal(t, errb, serrb)
		var answer struct {
			Total int `json:"total"`
		}
		require.NoError(t, json.Unmarshal([]byte(sout), &answer), sout)
		require.Equal(t, want, answer.Total, sout)
	}
	t.Run("an empty pool of 250 GiB holds two 100 GiB objects in all", func(t *testing.T) { compare(t, 2) })
	t.Run("after one lands through the daemon, one more", func(t *testing.T) {
		code, plan, errb := c.served("storage", "calculate-deploy", `{"nodename":"p1","deploy_count":1,"workload_resource_request":{"volumes":["POOL@ceph-a:/data:rw:100G"]}}`)
		require.Equal(t, 0, code, errb)
		var deploy struct {
			Workloads []json.RawMessage `json:"workloads_resource"`
		}
		require.NoError(t, json.Unmarshal([]byte(plan), &deploy), plan)
		require.Len(t, deploy.Workloads, 1)
		in, err := json.Marshal(map[string]any{"nodename": "p1", "workloads_resource": deploy.Workloads, "delta": true, "incr": true})
		require.NoError(t, err)
		code, _, errb = c.served("storage", "set-node-resource-usage", string(in))
		require.Equal(t, 0, code, errb)
		compare(t, 1)
	})
	t.Run("a scrape of /metrics shows the pool's capacity, reservation and objects", func(t *testing.T) {
		require.Eventually(t, func() bool {
			snap, err := c.d.nodeSamples(context.Background())
			if err != nil {
				return false
			}
			var text bytes.Buffer
			require.NoError(t, writeNodeMetrics(&text, snap))
			return strings.Contains(text.String(), "\nstorage_pool_capacity_bytes{pool=\"ceph-a\"} 268435456000\n") &&
				strings.Contains(text.String(), "\nstorage_pool_reserved_bytes{pool=\"ceph-a\"} 107374182400\n") &&
				strings.Contains(text.String(), "\nstorage_pool_objects{pool=\"ceph-a\"} 1\n")
		}, 10*time.Second, 20*time.Millisecond, "the scrape renders the pool record as the cache holds it")
	})
}

// TestARecordThatCannotBeReadLeavesOnlyItsNodeOutOfTheScrape: one node's
// damaged storage record fails storage's get-metrics of every node named
// with it; the scrape still renders every other node's series, and
// compute's of that node too (compute does not read storage's records).
func TestARecordThatCannotBeReadLeavesOnlyItsNodeOutOfTheScrape(t *testing.T) {
	c := newCluster(t, 10)
	scrape := func() string {
		rec := httptest.NewRecorder()
		c.d.metricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		return rec.Body.String()
	}
	count := func(body, metric string) (n int, broken bool) {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, metric+"{") {
				n++
				broken = broken || strings.Contains(line, `nodename="n00009"`)
			}
		}
		return n, broken
	}
	body := scrape()
	for _, m := range []string{"storage_used", "compute_cpu_used_millis"} {
		n, _ := count(body, m)
		require.Equal(t, 10, n, m)
	}
	_, err := c.client.Put(context.Background(), c.prefix+"/resource/storage/n00009", `{"capacity":`)
	require.NoError(t, err)
	code, _, errb := c.served("storage", "get-metrics", `{"nodename":"n00000"}`) // a linearizable read: the cache has the write
	require.Equal(t, 0, code, errb)
	body = scrape()
	n, broken := count(body, "storage_used")
	require.Equal(t, 9, n, "storage_used: every node but the broken one")
	require.False(t, broken)
	n, broken = count(body, "compute_cpu_used_millis")
	require.Equal(t, 10, n, "compute_cpu_used_millis: every node, the one with a broken storage record too")
	require.True(t, broken)
}

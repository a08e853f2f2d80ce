package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/tests/testenv"
)

var pairs = flag.Int("pairs", 2000, "write-then-read pairs of the linearizability tests (the acceptance run uses 10000)")

// sibling is a second plugin folder on the same store as env (another core
// host), with a daemon of its own when serve is true.
func sibling(t *testing.T, env *testenv.Env, lines ...string) *testenv.Env {
	t.Helper()
	other := &testenv.Env{Kind: env.Kind, Dir: t.TempDir(), Prefix: env.Prefix, Etcd: env.Etcd, DB: env.DB}
	writeConfig(t, other, env.ConfigYAML(), lines...)
	return other
}

func writeConfig(t testing.TB, env *testenv.Env, base string, serveLines ...string) {
	t.Helper()
	cfg := base
	if len(serveLines) > 0 {
		cfg += "serve:\n"
		for _, l := range serveLines {
			cfg += "  " + l + "\n"
		}
	}
	for _, name := range []string{"storage.yaml", "compute.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(env.Dir, name), []byte(cfg), 0o644))
	}
}

// via runs a verb in this test process through the daemon of env's folder,
// as the exec'd binary would, and fails the test if no daemon took it.
func via(t testing.TB, env *testenv.Env, verb string, stdin []byte) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	code, handled, _ := forward.Try(forward.Call{
		Binary: "storage", Args: []string{"--config", filepath.Join(env.Dir, "storage.yaml"), verb},
		Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errb,
	})
	require.True(t, handled, "no daemon took %s in %s", verb, env.Dir)
	require.Equal(t, 0, code, "%s: %s", verb, errb.String())
	return out.Bytes()
}

// direct runs a verb in this test process against the store, no daemon.
func direct(t testing.TB, env *testenv.Env, verb string, stdin []byte) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	code := cmd.Main("storage", []string{"--config", filepath.Join(env.Dir, "storage.yaml"), verb}, bytes.NewReader(stdin), &out, &errb)
	require.Equal(t, 0, code, "%s: %s", verb, errb.String())
	return out.Bytes()
}

func setCapacity(gib int) []byte {
	return []byte(fmt.Sprintf(`{"nodename":"n1","resource_request":{"storage":"%dG"},"delta":false}`, gib))
}

func storedCapacity(t testing.TB, raw []byte) int64 {
	t.Helper()
	var info struct {
		Capacity struct {
			Storage int64 `json:"storage"`
		} `json:"capacity"`
	}
	require.NoError(t, json.Unmarshal(raw, &info), "%s", raw)
	return info.Capacity.Storage
}

// TestEveryReadAfterAnAcknowledgedWriteSeesIt writes through daemon A and
// reads through daemon B, two daemons on one etcd as two core hosts would
// run them: each read, begun after the write was acknowledged, sees it.
// Then the same with writes that bypass both daemons.
func TestEveryReadAfterAnAcknowledgedWriteSeesIt(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	n := *pairs
	if testing.Short() {
		n = min(n, 200)
	}
	a := testenv.NewEtcd(t)
	if d := a.Daemon(); d != nil {
		d.Stop(t)
	}
	addrB := testenv.FreeAddr(t)
	b := sibling(t, a, "http: "+addrB)
	a.Serve(t, "")
	db := b.Serve(t, addrB)
	db.WaitHTTP(t)
	a.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1G"}}, nil)

	for _, c := range []struct {
		name  string
		write func(t testing.TB, env *testenv.Env, verb string, stdin []byte) []byte
		count int
	}{
		{"writes through daemon A", via, n},
		{"writes bypassing the daemons", direct, max(n/4, 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			for i := 1; i <= c.count; i++ {
				c.write(t, a, "set-node-resource-capacity", setCapacity(i))
				got := storedCapacity(t, via(t, b, "get-node-resource-info", []byte(`{"nodename":"n1"}`)))
				if got != int64(i)<<30 {
					require.Failf(t, "stale read", "pair %d: read through daemon B saw %d GiB after the write of %d GiB was acknowledged", i, got>>30, i)
				}
			}
			t.Logf("%d pairs in %s", c.count, time.Since(start).Round(time.Millisecond))
		})
	}
	cached := metric(t, db, `eru_serve_cache_reads_total{source="cache"}`)
	fellBack := metric(t, db, `eru_serve_cache_reads_total{source="etcd"}`)
	t.Logf("daemon B: %s reads from the cache, %s from etcd", cached, fellBack)
	// A daemon without a watch cache exports no such sample at all: the
	// value must be there and positive, not merely differ from "0".
	var fromCache, fromEtcd float64
	_, err := fmt.Sscan(cached, &fromCache)
	require.NoError(t, err, "daemon B exports eru_serve_cache_reads_total{source=\"cache\"}: %q", cached)
	_, err = fmt.Sscan(fellBack, &fromEtcd)
	require.NoError(t, err, "daemon B exports eru_serve_cache_reads_total{source=\"etcd\"}: %q", fellBack)
	require.Positive(t, fromCache, "daemon B answered from its cache")
	reads := n + max(n/4, 1)
	require.Equal(t, float64(reads), fromCache+fromEtcd, "every read through daemon B went through its cache (answered from it or after falling back to etcd)")
}

// proxy is a TCP proxy that can be cut (listener and connections closed)
// and restored on the same address: a network partition between a daemon
// and etcd while etcd itself keeps serving others.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func newProxy(t *testing.T, endpoint string) *proxy {
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	p := &proxy{addr: testenv.FreeAddr(t), target: u.Host}
	p.restore(t)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) endpoint() string { return "http://" + p.addr }

func (p *proxy) restore(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func waitStatus(t *testing.T, d *testenv.Daemon, path string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := d.Get(t, path)
		if code == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s stayed %d (%s), want %d", path, code, body, want)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTheWatchSurvivesCompactionBehindAPartition cuts the daemon off etcd,
// writes and compacts past the watch's revision meanwhile, and restores
// the link: the watch finds its revision compacted, re-lists, and reads
// through the daemon see the writes made while it was away. /readyz is
// false while etcd is out of reach.
func TestTheWatchSurvivesCompactionBehindAPartition(t *testing.T) {
	t.Parallel() // it waits for the daemon to see etcd gone and back: the wait overlaps the other tests
	env := testenv.NewEtcd(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	p := newProxy(t, env.Etcd.Endpoint)
	addr := testenv.FreeAddr(t)
	cfg := fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %q\n  dial_timeout: 500ms\n  call_timeout: 2s\n", p.endpoint(), env.Prefix)
	writeConfig(t, env, cfg, "http: "+addr, "cache_wait: 300ms")
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	waitStatus(t, d, "/readyz", 200)
	via(t, env, "add-node", []byte(`{"nodename":"n1","resource":{"storage":"1G"}}`))

	p.cut()
	waitStatus(t, d, "/readyz", 503)
	other := sibling(t, env)
	writeConfig(t, other, fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %q\n", env.Etcd.Endpoint, env.Prefix))
	for i := 2; i <= 5; i++ {
		direct(t, other, "set-node-resource-capacity", setCapacity(i))
	}
	client := env.Etcd.Client(t)
	resp, err := client.Get(context.Background(), "/")
	require.NoError(t, err)
	_, err = client.Compact(context.Background(), resp.Header.Revision)
	require.NoError(t, err)

	p.restore(t)
	waitStatus(t, d, "/readyz", 200)
	require.Equal(t, int64(5)<<30, storedCapacity(t, via(t, env, "get-node-resource-info", []byte(`{"nodename":"n1"}`))))
	// The cache itself caught up: a read answered from it sees the writes.
	waitMetricAtLeast(t, d, "eru_serve_watch_restarts_total", 1)
	direct(t, other, "set-node-resource-capacity", setCapacity(6))
	require.Equal(t, int64(6)<<30, storedCapacity(t, via(t, env, "get-node-resource-info", []byte(`{"nodename":"n1"}`))))
}

func waitMetricAtLeast(t *testing.T, d *testenv.Daemon, name string, least float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var v float64
		_, _ = fmt.Sscan(metric(t, d, name+" "), &v)
		if v >= least {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s stayed %v", name, v)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTheWatchSurvivesAnEtcdRestart stops etcd under a running daemon and
// starts it again at the same address: /readyz is false in between, and
// afterwards reads through the daemon see writes made after the restart.
// The stop is a hard one, as of a killed etcd: the daemon reaches etcd
// through a proxy, whose connections drop at once before etcd stops (a
// graceful stop of etcd would hold the daemon's open watch for etcd's
// request timeout, 5 s), and whose address answers again once etcd is back.
func TestTheWatchSurvivesAnEtcdRestart(t *testing.T) {
	t.Parallel() // it waits for the daemon to see etcd gone and back: the wait overlaps the other tests
	dir := t.TempDir()
	client, peer := testenv.FreeAddr(t), testenv.FreeAddr(t)
	tune := func(cfg *embed.Config) {
		c, _ := url.Parse("http://" + client)
		p, _ := url.Parse("http://" + peer)
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*c}, []url.URL{*c}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*p}, []url.URL{*p}
		cfg.InitialCluster = cfg.Name + "=" + p.String()
		// A lone member elects itself, so short raft ticks cost nothing.
		cfg.TickMs, cfg.ElectionMs = 10, 100
	}
	server, err := storetest.StartEtcd(dir, tune)
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			server.Stop()
		}
	})
	p := newProxy(t, server.Endpoint)
	env := &testenv.Env{Kind: "etcd", Dir: t.TempDir(), Prefix: "/restart", Etcd: server}
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: /restart\n  dial_timeout: 500ms\n", p.endpoint()), "http: "+addr, "cache_wait: 300ms")
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	waitStatus(t, d, "/readyz", 200)
	via(t, env, "add-node", []byte(`{"nodename":"n1","resource":{"storage":"1G"}}`))

	p.cut()
	server.Stop()
	stopped = true
	waitStatus(t, d, "/readyz", 503)
	server, err = storetest.StartEtcd(dir, tune)
	require.NoError(t, err)
	stopped = false
	p.restore(t)
	env.Etcd = server
	waitStatus(t, d, "/readyz", 200)
	other := sibling(t, env)
	direct(t, other, "set-node-resource-capacity", setCapacity(7))
	require.Equal(t, int64(7)<<30, storedCapacity(t, via(t, env, "get-node-resource-info", []byte(`{"nodename":"n1"}`))))
	via(t, env, "set-node-resource-capacity", setCapacity(8))
	require.Equal(t, int64(8)<<30, storedCapacity(t, direct(t, other, "get-node-resource-info", []byte(`{"nodename":"n1"}`))))
}

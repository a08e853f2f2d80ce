package serve

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/flowcontrol"
	"github.com/eru-extend/resources/flowcontrol/clock"
	"github.com/eru-extend/resources/internal/forward"
)

// flowDaemon runs a daemon on an embedded store in a fresh folder whose
// config holds extra (e.g. a flowcontrol section), with the daemon's own
// flow control (admit nil) or the given admission. It returns the daemon
// and its config file. Each setup runs before the daemon takes calls.
func flowDaemon(t *testing.T, extra string, admit Admission, setup ...func(*Daemon)) (*Daemon, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "storage.yaml")
	require.NoError(t, os.WriteFile(file, []byte("embedded:\n  path: eru-resources.db\n"+extra), 0o644))
	cfg, err := config.Load(file, "storage")
	require.NoError(t, err)
	sc, err := LoadConfig(file, dir)
	require.NoError(t, err)
	d, err := New(context.Background(), "storage", dir, cfg, sc, slog.New(slog.DiscardHandler), admit)
	require.NoError(t, err)
	for _, f := range setup {
		f(d)
	}
	require.NoError(t, d.Listen())
	go d.ServeSocket()
	t.Cleanup(func() {
		require.NoError(t, d.Shutdown(5*time.Second))
		d.Close()
	})
	return d, file
}

// gauge reads one eru_flowcontrol_* series of the daemon's registry (0 when
// absent).
func gauge(t *testing.T, d *Daemon, name string, labels map[string]string) float64 {
	t.Helper()
	return gather(t, d.metrics.reg, name, labels)
}

func gather(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			return value(m)
		}
	}
	return 0
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestTheFlowcontrolSectionIsCheckedAtStart(t *testing.T) {
	for _, c := range []struct{ name, section, want string }{
		{"hand_size above queues", "flowcontrol:\n  levels:\n    - {name: a, type: Limited, limit_response: {type: Queue, queues: 8, hand_size: 9}}\n  schemas:\n    - {name: all, precedence: 1, level: a, match: {any: true}}\n",
			"flowcontrol.levels[0].limit_response.hand_size: 9 exceeds queues 8 (line 5)"},
		{"a schema naming an unknown level", "flowcontrol:\n  schemas:\n    - {name: all, precedence: 1, level: nowhere, match: {any: true}}\n",
			`flowcontrol.schemas[0].level: unknown level "nowhere" (line 5)`},
		{"an unknown key", "flowcontrol:\n  server_concurency: 8\n", "flowcontrol.server_concurency: unknown key"},
		{"a zero server concurrency", "flowcontrol:\n  server_concurrency: 0\n", "flowcontrol.server_concurrency: 0: must be at least 1 (line 4)"},
		{"an unknown key inside a level", "flowcontrol:\n  levels:\n    - {name: a, type: Limited, lendable_precent: 50, limit_response: {type: Reject}}\n  schemas:\n    - {name: all, precedence: 1, level: a, match: {any: true}}\n",
			"flowcontrol.levels[0].lendable_precent: unknown key; did you mean flowcontrol.levels[0].lendable_percent? (line 5)"},
		{"a negative percentage", "flowcontrol:\n  levels:\n    - {name: a, type: Limited, lendable_percent: -1, limit_response: {type: Reject}}\n  schemas:\n    - {name: all, precedence: 1, level: a, match: {any: true}}\n",
			"flowcontrol.levels[0].lendable_percent: -1: must be within [0, 100] (line 5)"},
	} {
		t.Run(c.name+" stops the daemon, naming the key", func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "storage.yaml")
			require.NoError(t, os.WriteFile(file, []byte("embedded:\n  path: x.db\n"+c.section), 0o644))
			cfg, err := config.Load(file, "storage")
			require.NoError(t, err)
			sc, err := LoadConfig(file, dir)
			require.NoError(t, err)
			_, err = New(context.Background(), "storage", dir, cfg, sc, slog.New(slog.DiscardHandler), nil)
			require.ErrorContains(t, err, c.want)
			require.NotContains(t, err.Error(), "\n", "one line")
			require.Contains(t, err.Error(), file)
		})
	}
	t.Run("an absent section gives the defaults", func(t *testing.T) {
		d, _ := flowDaemon(t, "", nil)
		l, ok := d.FlowControl().Limits("placement")
		require.True(t, ok)
		require.Equal(t, 40, l.Nominal, "ceil(64 × 40 / 65)")
		require.Equal(t, 40.0, gauge(t, d, "eru_flowcontrol_nominal_limit_seats", map[string]string{"priority_level": "placement"}),
			"the controller's metrics are on the daemon's registry")
	})
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

func TestEveryHTTPAnswerNamesItsLevelAndSchema(t *testing.T) {
	d, _ := flowDaemon(t, "", nil)
	srv := httptest.NewServer(d.Handler(""))
	defer srv.Close()
	for _, c := range []struct {
		method, path  string
		status        int
		level, schema string
	}{
		{"GET", "/healthz", 200, "exempt", "health"},
		{"GET", "/readyz", 200, "exempt", "health"},
		{"GET", "/metrics", 200, "metrics", "metrics"},
		{"GET", "/v1/nodes", 400, "operator", "operator"}, // the command's own answer: no store file yet
		{"POST", "/v1/nodes/n1:drain", 403, "operator", "operator"},
		{"PUT", "/v1/pools/ceph-a/capacity", 403, "operator", "operator"},
		{"GET", "/nowhere", 404, "catch-all", "catch-all"},
		{"DELETE", "/healthz", 405, "exempt", "health"},
	} {
		t.Run(c.method+" "+c.path+" answers "+http.StatusText(c.status)+" with both headers", func(t *testing.T) {
			req, err := http.NewRequest(c.method, srv.URL+c.path, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			require.Equal(t, c.status, resp.StatusCode)
			require.Equal(t, c.level, resp.Header.Get(HeaderLevel))
			require.Equal(t, c.schema, resp.Header.Get(HeaderSchema))
			require.Empty(t, resp.Header.Get("Retry-After"), "only a rejection says when to retry")
		})
	}
	t.Run("the eru_flowcontrol metrics are on /metrics", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/metrics")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		for _, name := range []string{"eru_flowcontrol_dispatched_requests_total", "eru_flowcontrol_current_limit_seats",
			"eru_flowcontrol_current_executing_seats", "eru_flowcontrol_request_wait_duration_seconds"} {
			require.Contains(t, string(body), name)
		}
		require.Contains(t, string(body), `eru_flowcontrol_dispatched_requests_total{flow_schema="health",priority_level="exempt"}`)
	})
}

// oneQueue is a flowcontrol section whose operator and placement levels
// have one seat each and one queue of one request.
const oneQueue = `flowcontrol:
  server_concurrency: 3
  levels:
    - {name: exempt, type: Exempt}
    - {name: placement, type: Limited, nominal_concurrency_shares: 1, borrowing_limit_percent: 0, limit_response: {type: Queue, queues: 1, hand_size: 1, queue_length_limit: 1}}
    - {name: operator, type: Limited, nominal_concurrency_shares: 1, borrowing_limit_percent: 0, limit_response: {type: Queue, queues: 1, hand_size: 1, queue_length_limit: 1}}
    - {name: catch-all, type: Limited, nominal_concurrency_shares: 1, limit_response: {type: Reject}}
  schemas:
    - {name: health, precedence: 1, level: exempt, match: {paths: ["/healthz", "/readyz"]}}
    - {name: placement, precedence: 100, level: placement, distinguisher: pod, match: {verbs: [calculate-deploy]}}
    - {name: operator, precedence: 300, level: operator, distinguisher: caller, match: {paths: ["/v1/*"]}}
    - {name: catch-all, precedence: 10000, level: catch-all, match: {any: true}}
`

func TestARejectionComesOnlyWithTheSeatsAndTheQueueFull(t *testing.T) {
	// A queued read's client runs it itself after stall of silence: the
	// daemon tells it, every stall/2, that it holds the call.
	const stall = 100 * time.Millisecond
	d, file := flowDaemon(t, oneQueue, nil, func(d *Daemon) { d.keepaliveEvery = stall / 2 })
	ctl := d.FlowControl()
	srv := httptest.NewServer(d.Handler(""))
	defer srv.Close()
	inqueue := func(level string) float64 {
		return gauge(t, d, "eru_flowcontrol_current_inqueue_requests", map[string]string{"priority_level": level})
	}

	t.Run("over HTTP: the seat taken, the next waits, the one after is 429 with Retry-After and both headers", func(t *testing.T) {
		held, err := ctl.Admit(context.Background(), flowcontrol.Request{Path: "/v1/nodes", Caller: "someone"})
		require.NoError(t, err)
		queued := make(chan *http.Response, 1)
		go func() {
			resp, err := http.Get(srv.URL + "/v1/nodes")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			queued <- resp
		}()
		waitFor(t, "the second request to queue", func() bool { return inqueue("operator") == 1 })
		resp, err := http.Get(srv.URL + "/v1/nodes")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		require.Equal(t, "operator", resp.Header.Get(HeaderLevel))
		require.Equal(t, "operator", resp.Header.Get(HeaderSchema))
		require.JSONEq(t, `{"code":"resource_exhausted","message":"too many requests (priority level operator, retry after 1s)"}`, string(body))
		require.Equal(t, 1.0, gauge(t, d, "eru_flowcontrol_rejected_requests_total", map[string]string{"priority_level": "operator", "reason": "queue-full"}))
		held.Done()
		got := <-queued
		require.NotNil(t, got)
		require.Equal(t, http.StatusBadRequest, got.StatusCode, "the queued request ran once the seat was free (and found no store file yet)")
		require.Equal(t, "operator", got.Header.Get(HeaderLevel))
	})

	t.Run("on the socket: the queued call runs, however long it waits, and the one beyond the queue exits 128 naming the level", func(t *testing.T) {
		held, err := ctl.Admit(context.Background(), flowcontrol.Request{Verb: "calculate-deploy", Pod: "pod:other"})
		require.NoError(t, err)
		type result struct {
			code          int
			handled       bool
			stdout, stder string
		}
		queued := make(chan result, 1)
		go func() {
			var out, errb bytes.Buffer
			code, handled, _ := forward.Try(forward.Call{Binary: "storage", Args: []string{"--config", file, "calculate-deploy"},
				Stdin: strings.NewReader(`{"nodename":"n1","deploy_count":1}`), Stdout: &out, Stderr: &errb, Stall: stall})
			queued <- result{code, handled, out.String(), errb.String()}
		}()
		waitFor(t, "the forwarded call to queue", func() bool { return inqueue("placement") == 1 })
		code, handled, out, errOut := forwardCall(t, file, "calculate-deploy", `{"nodename":"n2","deploy_count":1}`)
		require.True(t, handled, "a rejection is the daemon's answer, never a reason to run locally")
		require.Equal(t, 128, code)
		require.Empty(t, out)
		require.Equal(t, "storage: calculate-deploy: unavailable: too many requests (priority level placement, retry after 1s)\n", errOut)
		time.Sleep(3 * stall)
		held.Done()
		r := <-queued
		require.True(t, r.handled, "the queued call was answered by the daemon after waiting %s", 3*stall)
		require.NotContains(t, r.stder, "too many requests", "the queued call ran once the seat was free")
	})
}

// TestRetryAfterOverHTTPFollowsTheDropPattern drives the daemon's HTTP
// handler with flow control on a simulated clock: the Retry-After of the
// last rejection of each step is Kubernetes' back-off sequence.
func TestRetryAfterOverHTTPFollowsTheDropPattern(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	fc, err := flowcontrol.Decode(strings.NewReader(strings.TrimPrefix(oneQueue, "flowcontrol:\n")))
	require.NoError(t, err)
	ctl, err := flowcontrol.New(fc, clk, nil)
	require.NoError(t, err)
	defer ctl.Close()
	d, _ := flowDaemon(t, "", FlowControl(ctl))
	srv := httptest.NewServer(d.Handler(""))
	defer srv.Close()
	held, err := ctl.Admit(context.Background(), flowcontrol.Request{Path: "/nowhere"})
	require.NoError(t, err, "the catch-all level's one seat")
	defer held.Done()
	steps := []struct{ second, drops int }{{0, 5}, {1, 11}, {2, 1}, {3, 11}, {4, 1}, {7, 1}, {11, 1}, {15, 1}, {17, 1}, {21, 14}, {22, 1}}
	start := clk.Now()
	var got []string
	for _, s := range steps {
		clk.RunUntil(start.Add(time.Duration(s.second) * time.Second))
		var last *http.Response
		for range s.drops {
			last = get(t, srv.URL+"/nowhere")
			require.Equal(t, http.StatusTooManyRequests, last.StatusCode)
			require.Equal(t, "catch-all", last.Header.Get(HeaderLevel))
		}
		got = append(got, last.Header.Get("Retry-After"))
	}
	require.Equal(t, []string{"1", "2", "2", "4", "4", "8", "8", "7", "6", "5", "10"}, got)
}

// TestAnExemptFloodIsNeverQueuedOrRejected: with every Limited seat taken,
// 5 × ServerCL concurrent health probes are all answered at once, none
// queued or rejected, and the next re-division (flow control on a
// simulated clock, advanced past it) grants the exempt level its use and
// leaves every Limited level at least its MinCL.
func TestAnExemptFloodIsNeverQueuedOrRejected(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	fc, err := flowcontrol.Decode(strings.NewReader(strings.TrimPrefix(oneQueue, "flowcontrol:\n")))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	ctl, err := flowcontrol.New(fc, clk, reg)
	require.NoError(t, err)
	defer ctl.Close()
	d, _ := flowDaemon(t, "", FlowControl(ctl))
	srv := httptest.NewServer(d.Handler(""))
	defer srv.Close()
	for _, r := range []flowcontrol.Request{{Verb: "calculate-deploy"}, {Path: "/v1/nodes"}, {Path: "/nowhere"}} {
		tk, err := ctl.Admit(context.Background(), r)
		require.NoError(t, err)
		defer tk.Done()
	}
	const clients, rounds = 5 * 3, 20
	var wg sync.WaitGroup
	failures := make(chan string, clients*rounds)
	for range clients {
		wg.Go(func() {
			for range rounds {
				resp, err := http.Get(srv.URL + "/healthz")
				if err != nil {
					failures <- err.Error()
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != 200 || resp.Header.Get(HeaderLevel) != "exempt" {
					failures <- resp.Status + " " + resp.Header.Get(HeaderLevel)
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	exempt := map[string]string{"priority_level": "exempt"}
	read := func(name string) float64 { return gather(t, reg, name, exempt) }
	require.Equal(t, float64(clients*rounds), read("eru_flowcontrol_dispatched_requests_total"))
	require.Zero(t, read("eru_flowcontrol_rejected_requests_total"))
	require.Zero(t, read("eru_flowcontrol_current_inqueue_requests"))
	clk.Advance(flowcontrol.AdjustPeriod)
	l, _ := ctl.Limits("exempt")
	require.Positive(t, l.Current, "the re-division saw the flood")
	for _, level := range []string{"placement", "operator", "catch-all"} {
		l, ok := ctl.Limits(level)
		require.True(t, ok)
		require.GreaterOrEqual(t, l.Current, l.Min, level)
	}
}

func TestAReloadKeepsInFlightCallsAndARefusedOneChangesNothing(t *testing.T) {
	d, file := flowDaemon(t, oneQueue, nil)
	ctl := d.FlowControl()
	inFlight, err := ctl.Admit(context.Background(), flowcontrol.Request{Verb: "calculate-deploy", Pod: "pod:a"})
	require.NoError(t, err)
	before, _ := ctl.Limits("placement")
	require.Equal(t, 1, before.Nominal)

	bigger := strings.Replace(oneQueue, "server_concurrency: 3", "server_concurrency: 30", 1)
	require.NoError(t, os.WriteFile(file, []byte("embedded:\n  path: eru-resources.db\n"+bigger), 0o644))
	require.NoError(t, d.Reload())
	after, _ := ctl.Limits("placement")
	require.Equal(t, 10, after.Nominal, "the new configuration applies")
	code, handled, _, errOut := forwardCall(t, file, "calculate-deploy", `{"nodename":"n1","deploy_count":1}`)
	require.True(t, handled, "only the flowcontrol section changed: the daemon still serves the file")
	require.NotContains(t, errOut, "too many requests")
	_ = code
	executing := func() float64 {
		return gauge(t, d, "eru_flowcontrol_current_executing_requests", map[string]string{"priority_level": "placement"})
	}
	require.Equal(t, 1.0, executing(), "the call admitted before the reload still holds its seat")
	inFlight.Done()
	require.Equal(t, 0.0, executing(), "and gives it back when it ends")

	bad := strings.Replace(bigger, "hand_size: 1, queue_length_limit: 1}}\n    - {name: operator", "hand_size: 2, queue_length_limit: 1}}\n    - {name: operator", 1)
	require.NotEqual(t, bigger, bad)
	require.NoError(t, os.WriteFile(file, []byte("embedded:\n  path: eru-resources.db\n"+bad), 0o644))
	err = d.Reload()
	require.ErrorContains(t, err, "flowcontrol.levels[1].limit_response.hand_size")
	kept, _ := ctl.Limits("placement")
	require.Equal(t, after, kept, "a refused reload keeps the configuration in force")

	t.Run("a change outside the flowcontrol section makes the daemon decline the file's calls", func(t *testing.T) {
		require.NoError(t, os.WriteFile(file, []byte("embedded:\n  path: other.db\n"+bigger), 0o644))
		require.NoError(t, d.Reload())
		_, handled, _, _ := forwardCall(t, file, "name", "")
		require.False(t, handled, "declined: the binary runs it with the new settings")
	})
}

func TestAReloadOfAFileWithABrokenServeSectionIsRefusedAndSaysWhy(t *testing.T) {
	d, file := flowDaemon(t, oneQueue, nil)
	ctl := d.FlowControl()
	before, _ := ctl.Limits("placement")

	t.Run("a misspelt serve key is refused naming the key, and the flow control keeps its configuration", func(t *testing.T) {
		bigger := strings.Replace(oneQueue, "server_concurrency: 3", "server_concurrency: 30", 1)
		body := "embedded:\n  path: eru-resources.db\nserve:\n  token_fil: /nowhere\n" + bigger
		require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
		err := d.Reload()
		require.ErrorContains(t, err, "serve.token_fil: unknown key; did you mean serve.token_file?",
			"a restart would refuse this file: the reload must say so, not call it reloaded")
		kept, _ := ctl.Limits("placement")
		require.Equal(t, before, kept, "nothing of a file the daemon could not start with applies")
	})

	t.Run("a serve value the daemon cannot use is refused naming the key", func(t *testing.T) {
		body := "embedded:\n  path: eru-resources.db\nserve:\n  http: 127.0.0.1\n" + oneQueue
		require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
		require.ErrorContains(t, d.Reload(), "serve.http")
	})
}

func TestAReloadRefusesAServeSectionWhoseFilesTheDaemonCouldNotStartWith(t *testing.T) {
	d, file := flowDaemon(t, oneQueue, nil)
	ctl := d.FlowControl()
	before, _ := ctl.Limits("placement")
	bigger := strings.Replace(oneQueue, "server_concurrency: 3", "server_concurrency: 30", 1)

	t.Run("a token_file that is not there is refused naming the key, as a start refuses it", func(t *testing.T) {
		serve := "serve:\n  http: 127.0.0.1:0\n  token_file: missing.token\n"
		body := "embedded:\n  path: eru-resources.db\n" + serve + bigger
		require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
		require.ErrorContains(t, d.Reload(), "serve.token_file",
			"a restart would refuse this file: the reload must say so, not call it reloaded")
		kept, _ := ctl.Limits("placement")
		require.Equal(t, before, kept, "nothing of a file the daemon could not start with applies")
	})

	t.Run("a TLS certificate that is not there is refused naming the key", func(t *testing.T) {
		serve := "serve:\n  http: 127.0.0.1:0\n  tls:\n    cert: missing.crt\n    key: missing.key\n"
		body := "embedded:\n  path: eru-resources.db\n" + serve + bigger
		require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
		require.ErrorContains(t, d.Reload(), "serve.tls.cert")
		kept, _ := ctl.Limits("placement")
		require.Equal(t, before, kept)
	})
}

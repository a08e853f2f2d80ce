package serve_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// flowSection is a flowcontrol section with two placement seats (so that
// concurrent calls queue) and a metrics schema named name.
func flowSection(name string, handSize int) string {
	return `flowcontrol:
  server_concurrency: 4
  levels:
    - {name: exempt, type: Exempt}
    - {name: placement, type: Limited, nominal_concurrency_shares: 1, borrowing_limit_percent: 0, limit_response: {type: Queue, queues: 4, hand_size: ` + strconv.Itoa(handSize) + `, queue_length_limit: 50}}
    - {name: catch-all, type: Limited, nominal_concurrency_shares: 1, limit_response: {type: Reject}}
  schemas:
    - {name: health, precedence: 1, level: exempt, match: {paths: ["/healthz", "/readyz"]}}
    - {name: placement, precedence: 100, level: placement, distinguisher: pod, match: {verbs: [calculate-deploy]}}
    - {name: ` + name + `, precedence: 200, level: catch-all, distinguisher: caller, match: {paths: ["/metrics"]}}
    - {name: catch-all, precedence: 10000, level: catch-all, match: {any: true}}
`
}

// TestSIGHUPReloadsFlowControlWithoutDroppingCalls runs `storage serve`,
// keeps forwarded calls queued and running while SIGHUP applies a changed
// flowcontrol section, then sends one with a refused section: every call
// is answered as a local call would be, calls are forwarded again after the
// reload, the change shows in the schema header, and the refused section
// is logged, naming the key, and changes nothing.
func TestSIGHUPReloadsFlowControlWithoutDroppingCalls(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": []string{"/data0:1T"}, "storage": "2T"}}, nil)
	addr := testenv.FreeAddr(t)
	file := filepath.Join(env.Dir, "storage.yaml")
	write := func(section string) {
		require.NoError(t, os.WriteFile(file, []byte(env.ConfigYAML()+"serve:\n  http: "+addr+"\n"+section), 0o644))
	}
	write(flowSection("scrapes", 1))
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	schemaOf := func(path string) string {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.Header.Get("X-Eru-PF-Flow-Schema")
	}
	require.Equal(t, "scrapes", schemaOf("/metrics"))

	want := local(t, env, "storage", []byte(`{"nodename":"n1","deploy_count":1,"workload_resource_request":{"storage":"1G"}}`), "calculate-deploy")
	require.Equal(t, 0, want.Code, want.Stderr)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered, bad := 0, []string{}
	// moreAnswered waits until the callers have had n more calls answered
	// (ten times as many in the full run): calls queued and running across
	// what the test does meanwhile.
	moreAnswered := func(n int) {
		if !testing.Short() {
			n *= 10
		}
		mu.Lock()
		mark := answered
		mu.Unlock()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return answered >= mark+n
		}, 20*time.Second, 10*time.Millisecond, "the callers stopped getting answers")
	}
	for range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := env.Exec(t, "storage", []byte(`{"nodename":"n1","deploy_count":1,"workload_resource_request":{"storage":"1G"}}`), "calculate-deploy")
				mu.Lock()
				answered++
				if got.Code != want.Code || got.Stdout != want.Stdout || got.Stderr != "" {
					bad = append(bad, describe(got))
				}
				mu.Unlock()
			}
		})
	}
	moreAnswered(12)
	before := d.Forwarded(t)
	require.Positive(t, before, "calls are forwarded before the reload")
	write(flowSection("metrics-scrapes", 2))
	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return schemaOf("/metrics") == "metrics-scrapes" }, 10*time.Second, 20*time.Millisecond)
	// Between the write and the reload the daemon declines the changed
	// file's calls (the binaries run them); once reloaded it serves them.
	before = d.Forwarded(t)
	require.Eventually(t, func() bool { return d.Forwarded(t) > before }, 10*time.Second, 20*time.Millisecond, "calls are forwarded again after the reload")
	write(flowSection("refused", 5)) // hand_size 5 > queues 4
	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(d.Log(), "reload refused") }, 10*time.Second, 20*time.Millisecond)
	// The refused section is the only change: the daemon keeps its flow
	// control and goes on serving the file's calls (the binaries do not
	// read that section, so their answers are the same).
	before = d.Forwarded(t)
	moreAnswered(6)
	require.Greater(t, d.Forwarded(t), before, "calls are forwarded after a refused reload")
	close(stop)
	wg.Wait()
	require.Contains(t, d.Log(), "flowcontrol.levels[1].limit_response.hand_size")
	require.Equal(t, "metrics-scrapes", schemaOf("/metrics"), "the refused section changed nothing")
	require.Empty(t, bad, "every call answered as a local call would be")
	t.Logf("%d calls through two reloads, %d forwarded", answered, d.Forwarded(t))
	require.Greater(t, sumMetric(t, d, `eru_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="placement"`), 0.0)
}

// TestServeRefusesAFlowcontrolSectionNamingTheKey: a malformed section
// stops the daemon at start with one line naming the file and the key.
func TestServeRefusesAFlowcontrolSectionNamingTheKey(t *testing.T) {
	env := testenv.NewEmbedded(t, testenv.WithConfig(flowSection("x", 9)))
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	res := env.Exec(t, "storage", nil, "serve")
	require.NotEqual(t, 0, res.Code)
	require.Empty(t, res.Stdout)
	lines := strings.Split(strings.TrimSuffix(res.Stderr, "\n"), "\n")
	require.Len(t, lines, 1, res.Stderr)
	require.Contains(t, lines[0], "flowcontrol.levels[1].limit_response.hand_size")
	require.Contains(t, lines[0], filepath.Join(env.Dir, "storage.yaml"))
}

// TestServeRefusesABadSectionNamingTheLineOfTheFile: a serve or flowcontrol
// section the daemon cannot use stops it at start with one line naming the
// file, the key as written, what is wanted and its line in that file (key:
// the line's start).
func TestServeRefusesABadSectionNamingTheLineOfTheFile(t *testing.T) {
	for _, c := range []struct{ name, section, key, want string }{
		{"a misspelt serve key", "serve:\n  http: 127.0.0.1:0\n  sokcet: s.sock\n", "  sokcet:",
			"serve.sokcet: unknown key; did you mean serve.socket?"},
		{"a serve duration that is not one", "serve:\n  statsd:\n    interval: abc\n", "    interval:",
			`serve.statsd.interval: "abc" is not a duration like 2s or 500ms`},
		{"a zero server concurrency", "flowcontrol:\n  server_concurrency: 0\n", "  server_concurrency:",
			"flowcontrol.server_concurrency: 0: must be at least 1"},
	} {
		t.Run(c.name+" stops the daemon with one line", func(t *testing.T) {
			env := testenv.NewEmbedded(t, testenv.WithConfig(c.section))
			if d := env.Daemon(); d != nil {
				d.Stop(t)
			}
			file := filepath.Join(env.Dir, "storage.yaml")
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			want := c.want
			if c.key != "" {
				line := 0
				for i, l := range strings.Split(string(data), "\n") {
					if strings.HasPrefix(l, c.key) {
						line = i + 1
					}
				}
				require.NotZero(t, line, "the key is in the file")
				want += " (line " + strconv.Itoa(line) + ")"
			}
			res := env.Exec(t, "storage", nil, "serve")
			require.Equal(t, 2, res.Code, "invalid_argument")
			require.Empty(t, res.Stdout)
			require.Equal(t, "storage: serve: invalid_argument: config "+file+": "+want+"\n", res.Stderr)
		})
	}
}

// TestSIGHUPServesAgainAFileWhoseTimesAloneChanged: a chmod changes a
// config file's change time, so the daemon declines its calls (it may be
// another file now); SIGHUP reads it again and, its settings unchanged,
// serves it once more (docs/serve.md, *Forwarding*). That holds for the
// other plugin's file, which the daemon serves too, as for its own.
func TestSIGHUPServesAgainAFileWhoseTimesAloneChanged(t *testing.T) {
	t.Parallel() // waits on a daemon of its own
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	env.Call(t, "compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 8, "memory": "16G"}}, nil)
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML(), "http: "+addr)
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	reloads := 0
	for _, c := range []struct{ name, bin string }{
		{"the daemon's own file", "storage"},
		{"the other plugin's file", "compute"},
	} {
		t.Run(c.name+" is served again after SIGHUP", func(t *testing.T) {
			call := func() {
				res := env.Exec(t, c.bin, []byte(`{"podname":"p","nodename":"n1"}`), "get-metrics")
				require.Equal(t, 0, res.Code, describe(res))
			}
			before := d.Forwarded(t)
			call()
			require.Equal(t, before+1, d.Forwarded(t), "forwarded before the chmod")
			require.NoError(t, os.Chmod(filepath.Join(env.Dir, c.bin+".yaml"), 0o640))
			call()
			require.Equal(t, before+1, d.Forwarded(t), "declined once the file's times changed")
			require.NoError(t, d.Cmd.Process.Signal(syscall.SIGHUP))
			reloads++
			require.Eventually(t, func() bool {
				return strings.Count(d.Log(), "reloaded the flowcontrol section") == reloads
			}, 10*time.Second, 10*time.Millisecond)
			call()
			require.Equal(t, before+2, d.Forwarded(t), "forwarded again after SIGHUP; the daemon's log:\n%s", d.Log())
		})
	}
}

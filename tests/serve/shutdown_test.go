package serve_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/tests/testenv"
)

// TestSIGTERMStopsTheHTTPListenerAtOnce: on SIGTERM the daemon stops taking
// calls (docs/serve.md, *Running it*), over HTTP as on the socket, while
// those in flight finish within serve.shutdown_grace. A forwarded call
// still arriving keeps the daemon waiting; meanwhile an operator write
// over HTTP must not be taken and run.
func TestSIGTERMStopsTheHTTPListenerAtOnce(t *testing.T) {
	t.Parallel() // waits on a daemon of its own
	const token = "stop-Token-31"
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	require.NoError(t, os.WriteFile(filepath.Join(env.Dir, "token"), []byte(token+"\n"), 0o600))
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML(), "http: "+addr, "token_file: token", "shutdown_grace: 3s")
	d := env.Serve(t, addr)
	d.WaitHTTP(t)

	// A forwarded call whose request has not arrived whole: in flight
	// until the grace ends.
	conn, err := net.Dial("unix", d.Socket)
	require.NoError(t, err)
	defer conn.Close()
	time.Sleep(100 * time.Millisecond) // accepted

	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return strings.Contains(d.Log(), `"msg":"shutting down"`) }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)

	req, err := http.NewRequest("POST", "http://"+addr+"/v1/nodes/n1:drain", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: 5 * time.Second}
	if resp, err := client.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Errorf("a write sent after SIGTERM was taken: %d", resp.StatusCode)
	}
	d.Stop(t)
	var node struct {
		Drain bool `json:"drain"`
	}
	env.OpOK(t, "storage", &node, "nodes", "get", "n1", "-o", "json")
	require.False(t, node.Drain, "nothing sent after SIGTERM ran")
}

// TestCallsQueuedWhenTheDaemonStopsRunInTheBinary: a call waiting in a
// flow-control queue when the daemon stops was never refused for load
// and never ran, so it is not answered "too many requests" (exit 128,
// which the binaries never run themselves): the daemon declines it and
// the binary runs it, as it would with no daemon (docs/serve.md,
// *Running it*; spec: 429/exit 128 only on a full queue or a time-out).
func TestCallsQueuedWhenTheDaemonStopsRunInTheBinary(t *testing.T) {
	t.Parallel() // waits on a daemon of its own
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	for _, n := range []string{"n1", "n2"} {
		env.Call(t, "storage", "add-node", obj{"nodename": n, "resource": obj{"storage": "1T"}}, nil)
	}
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, "embedded:\n  path: "+strconv.Quote(env.DB)+"\n  lock_timeout: 20s\n"+`flowcontrol:
  server_concurrency: 1
  levels:
    - {name: exempt, type: Exempt}
    - {name: one, type: Limited, nominal_concurrency_shares: 1, limit_response: {type: Queue, queues: 1, hand_size: 1, queue_length_limit: 4}}
  schemas:
    - {name: health, precedence: 1, level: exempt, match: {paths: ["/healthz", "/readyz", "/metrics"]}}
    - {name: all, precedence: 10000, level: one, match: {any: true}}
`, "http: "+addr, "shutdown_grace: 1s")
	d := env.Serve(t, addr)
	d.WaitHTTP(t)

	// The level's one seat is taken by a read waiting for the store's
	// lock, which the test holds; two more calls queue behind it.
	held, err := boltstore.Open(env.DB, boltstore.Options{Prefix: env.Prefix, LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	calls := []struct {
		name, verb, stdin string
	}{
		{"the read holding the seat", "get-node-resource-info", `{"nodename":"n1"}`},
		{"a queued read", "get-node-resource-info", `{"nodename":"n1"}`},
		{"a queued write", "set-node-resource-usage", `{"nodename":"n2","resource_request":{"storage":"1G"},"delta":true,"incr":true}`},
	}
	results := make([]chan testenv.Result, len(calls))
	for i, c := range calls {
		results[i] = make(chan testenv.Result, 1)
		go func() { results[i] <- env.Exec(t, "storage", []byte(c.stdin), c.verb) }()
		if i == 0 {
			require.Eventually(t, func() bool { return hasOpen(d.Cmd.Process.Pid, env.DB+".lock") }, 20*time.Second, 5*time.Millisecond)
		}
	}
	// (A scrape would wait for the store's lock too: on the embedded
	// store /metrics reads the store.) The queued calls reach the daemon
	// within this on any machine; one that did not would find no daemon
	// and run in the binary, which the test takes as well.
	time.Sleep(time.Second)

	d.Stop(t) // SIGTERM: the seat's call outlives the grace, the queued ones never start
	require.NoError(t, held.Close())
	for i, c := range calls {
		t.Run(c.name+" is answered as a call run without a daemon", func(t *testing.T) {
			res := <-results[i]
			require.Equal(t, 0, res.Code, describe(res))
			require.NotContains(t, res.Stderr, "too many requests")
		})
	}
	var usage struct {
		Usage struct {
			Storage int64 `json:"storage"`
		} `json:"usage"`
	}
	require.Equal(t, 2, strings.Count(d.Log(), `"why":"the daemon is stopping`), "the daemon declined both queued calls: %s", d.Log())
	env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n2"}, &usage)
	require.Equal(t, int64(1<<30), usage.Usage.Storage, "the queued write landed once")
}

package serve_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

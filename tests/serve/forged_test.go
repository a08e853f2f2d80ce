package serve_test

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/tests/testenv"
)

// TestTheDaemonRunsOnlyTheVerbARequestNames: a request on the socket names
// its verb (by which the daemon classifies it: write or read, flow, node
// lock) and carries the command line it runs. One whose command line is
// not that verb alone — an operator write under a read's name — is
// declined and runs nothing; a well-formed one is run.
func TestTheDaemonRunsOnlyTheVerbARequestNames(t *testing.T) {
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML(), "http: "+addr)
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)

	send := func(t *testing.T, args ...string) byte {
		t.Helper()
		conn, err := net.Dial("unix", filepath.Join(env.Dir, forward.DefaultSocket))
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		req := forward.Request{Binary: "storage", Args: args, Config: filepath.Join(env.Dir, "storage.yaml"), Dir: env.Dir, Verb: "get-node-resource-info"}
		require.NoError(t, forward.WriteRequest(conn, req, []byte(`{"nodename": "n1"}`)))
		status := make([]byte, 1)
		_, err = conn.Read(status)
		require.NoError(t, err)
		return status[0]
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"an operator write under a read's name is declined", []string{"nodes", "drain", "n1"}},
		{"another plugin verb under a read's name is declined", []string{"remove-node"}},
		{"the verb with extra arguments is declined", []string{"get-node-resource-info", "n1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := env.Dump(t)
			require.Equal(t, forward.Declined, send(t, c.args...))
			require.Equal(t, before, env.Dump(t), "nothing ran")
		})
	}
	t.Run("the verb it names is run", func(t *testing.T) {
		answered := d.Forwarded(t)
		require.Equal(t, forward.Accepted, send(t, "--config", filepath.Join(env.Dir, "storage.yaml"), "get-node-resource-info"))
		require.Eventually(t, func() bool { return d.Forwarded(t) == answered+1 }, 10*time.Second, 10*time.Millisecond)
	})
}

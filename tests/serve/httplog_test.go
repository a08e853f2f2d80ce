package serve_test

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestHTTPServerErrorsAreLoggedInTheDaemonsFormat: what net/http itself
// reports (here a TLS handshake error: a plain TCP client sending garbage
// to the HTTPS port) goes to the daemon's structured log at warn level,
// like everything else the daemon logs, not as a bare text line on stderr.
func TestHTTPServerErrorsAreLoggedInTheDaemonsFormat(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	ca := newCA(t)
	ca.issue(t, env.Dir, "server", true)
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML(), "http: "+addr, "tls:", "  cert: server.pem", "  key: server-key.pem")
	d := env.Serve(t, addr)

	deadline := time.Now().Add(20 * time.Second)
	var conn net.Conn
	for {
		var err error
		if conn, err = net.Dial("tcp", addr); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "HTTPS did not listen: %v %s", err, d.Log())
		time.Sleep(20 * time.Millisecond)
	}
	_, err := conn.Write([]byte("\x00\x01garbage, not a TLS record\r\n\r\n"))
	require.NoError(t, err)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Read(make([]byte, 512)) // the server gives up on the handshake and closes
	require.NoError(t, conn.Close())

	var found map[string]any
	for found == nil {
		for _, line := range strings.Split(strings.TrimSuffix(d.Log(), "\n"), "\n") {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "every line of the daemon's log is a JSON record: %q", line)
			if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, "http: TLS handshake error from 127.0.0.1:") {
				found = rec
			}
		}
		if found == nil {
			require.True(t, time.Now().Before(deadline), "no handshake error logged as a record: %s", d.Log())
			time.Sleep(20 * time.Millisecond)
		}
	}
	require.Equal(t, "WARN", found["level"], found)
	require.Equal(t, "storage serve", found["daemon"], found)
	require.NotContains(t, found["msg"], "\n")
}

package serve_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestGaugesArePushedToStatsd: every interval the daemon sends each node's
// gauges under the keys get-metrics answers, with the configured prefix.
func TestGaugesArePushedToStatsd(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		if d := env.Daemon(); d != nil {
			d.Stop(t)
		}
		env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": []string{"/data0:1T"}, "storage": "2T"}}, nil)
		env.Call(t, "compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 4, "memory": "8G"}}, nil)
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		defer pc.Close()
		writeConfig(t, env, env.ConfigYAML(), "statsd:", "  address: "+pc.LocalAddr().String(), "  interval: 100ms", "  prefix: eru")
		env.Serve(t, "")

		want := []string{"eru.core.node.n1.storage.used:0|g", "eru.core.node.n1.storage.capacity:3298534883328|g"}
		var got strings.Builder
		buf := make([]byte, 65536)
		deadline := time.Now().Add(20 * time.Second)
		for {
			require.NoError(t, pc.SetReadDeadline(deadline))
			n, _, err := pc.ReadFrom(buf)
			require.NoError(t, err, "statsd received %q", got.String()[:min(got.Len(), 600)])
			got.Write(buf[:n])
			got.WriteByte('\n')
			complete := true
			for _, w := range want {
				complete = complete && strings.Contains(got.String(), w)
			}
			if complete && strings.Contains(got.String(), "eru.core.node.n1.compute.") {
				return
			}
		}
	})
}

// TestPushesStartOnceADeadStatsdComesUp: a statsd that is down when the
// daemon starts gets the gauges once it listens, without a restart.
func TestPushesStartOnceADeadStatsdComesUp(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := pc.LocalAddr().String()
	require.NoError(t, pc.Close()) // statsd is down while the daemon starts
	writeConfig(t, env, env.ConfigYAML(), "statsd:", "  address: "+addr, "  interval: 50ms")
	d := env.Serve(t, "")
	require.Eventually(t, func() bool { return strings.Contains(d.Log(), "statsd: pushing nothing") }, 10*time.Second, 10*time.Millisecond)

	pc, err = net.ListenPacket("udp", addr)
	require.NoError(t, err)
	defer pc.Close()
	buf := make([]byte, 65536)
	var got strings.Builder
	require.NoError(t, pc.SetReadDeadline(time.Now().Add(20*time.Second)))
	for !strings.Contains(got.String(), "core.node.n1.storage.capacity:1099511627776|g") {
		n, _, err := pc.ReadFrom(buf)
		require.NoError(t, err, "statsd received %q after it came up", got.String()[:min(got.Len(), 600)])
		got.Write(buf[:n])
	}
}

// TestADeadStatsdBlocksNothing points the push at a port nobody reads and
// checks that calls and scrapes go on.
func TestADeadStatsdBlocksNothing(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML(), "http: "+addr, "statsd:", "  address: 127.0.0.1:9", "  interval: 10ms")
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	for range 20 {
		env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n1"}, nil)
		time.Sleep(10 * time.Millisecond)
	}
	code, _ := d.Get(t, "/metrics")
	require.Equal(t, 200, code)
	require.Equal(t, 20, d.Forwarded(t))
}

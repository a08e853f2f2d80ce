package reliability_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestTheHeartbeatAgentRidesOutAnEtcdOutage: an agent heartbeating every
// 200ms while its etcd stops and starts again reports each failed
// heartbeat on stderr in one line, keeps going, renews the session once
// etcd is back, and still ends it on SIGTERM.
func TestTheHeartbeatAgentRidesOutAnEtcdOutage(t *testing.T) {
	skipUnderShort(t)
	clientPort, peerPort := freePort(t), freePort(t)
	dir := t.TempDir()
	server, stop := startEtcd(t, dir, fixedPorts(clientPort, peerPort))
	prefix := newPrefix()
	env := etcdEnv(t, server, prefix, etcdConfig(server.Endpoint, prefix, obj{"dial_timeout": "300ms", "call_timeout": "1s"}))
	seed(t, env, "storage")

	cmd := exec.Command(testenv.Bin(t, "storage"), "nodes", "heartbeat", seeded, "--interval", "200ms", "--ttl", "5s", "--proc-root", t.TempDir(), "--clock-sync", "SYNCHRONIZED")
	cmd.Dir = env.Dir
	cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var (
		mu    sync.Mutex
		lines []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	saw := func(s string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, l := range lines {
				if strings.Contains(l, s) {
					return true
				}
			}
			return false
		}
	}
	observation := func() int64 {
		var v struct {
			Observation *struct {
				Version int64 `json:"observation_version"`
			} `json:"observation"`
		}
		env.OpOK(t, "storage", &v, "nodes", "get", seeded)
		if v.Observation == nil {
			return 0
		}
		return v.Observation.Version
	}
	require.Eventually(t, saw("nodes heartbeat "+seeded+": READY"), 20*time.Second, 50*time.Millisecond)

	stop()
	require.Eventually(t, saw("nodes heartbeat "+seeded+": unavailable: "), 20*time.Second, 50*time.Millisecond, "a failed heartbeat is reported")
	restarted, _ := startEtcd(t, dir, fixedPorts(clientPort, peerPort))
	require.Equal(t, server.Endpoint, restarted.Endpoint)
	seen := observation()
	require.Eventually(t, func() bool { return observation() > seen }, 20*time.Second, 100*time.Millisecond, "the agent heartbeats again once etcd is back")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	<-done
	require.NoError(t, cmd.Wait())
	var last struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &last), stdout.String())
	require.Equal(t, "UNAVAILABLE", last.Status)
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		require.True(t, strings.HasPrefix(l, "storage: nodes heartbeat "+seeded+": "), "one line per event: %q", l)
	}
}

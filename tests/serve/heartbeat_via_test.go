package serve_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// viaRecord is the part of a node record these tests read.
type viaRecord struct {
	Status  string `json:"status"`
	Session struct {
		Live bool `json:"live"`
	} `json:"session"`
	Observation *struct {
		Clock struct {
			OffsetMs         *int64 `json:"offset_ms"`
			UncertaintyMs    *int64 `json:"uncertainty_ms"`
			ExceedsTolerance bool   `json:"exceeds_tolerance"`
		} `json:"clock"`
	} `json:"observation"`
	Schedulable bool     `json:"schedulable"`
	Reasons     []string `json:"unschedulable_reasons"`
}

// viaDaemon starts a daemon on etcd with an HTTP API whose writes need a
// token, node n1 added by core, and answers the API's base URL and the
// token file.
func viaDaemon(t *testing.T) (*testenv.Env, string, string) {
	t.Helper()
	env := testenv.NewEtcd(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	tokenFile := filepath.Join(env.Dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("hb-Token-77e1\n"), 0o600))
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML(), "http: "+addr, "token_file: token")
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	return env, "http://" + addr, tokenFile
}

func nodeRecord(t *testing.T, env *testenv.Env, node string) viaRecord {
	t.Helper()
	var rec viaRecord
	env.OpOK(t, "storage", &rec, "nodes", "get", node, "-o", "json")
	return rec
}

// TestAHeartbeatViaTheDaemon runs `nodes heartbeat --via` with the real
// clocks of one host: the daemon records the session and the observation,
// with an offset it measured within its uncertainty of zero (both clocks
// are the same one); without the right token nothing is recorded; a daemon
// nobody answers at is unavailable.
func TestAHeartbeatViaTheDaemon(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env, base, tokenFile := viaDaemon(t)

	t.Run("without the token the daemon refuses and records nothing", func(t *testing.T) {
		res := env.Op(t, "storage", "nodes", "heartbeat", "n1", "--via", base)
		require.Equal(t, 10, res.Code, describe(res))
		require.Empty(t, res.Stdout)
		require.Contains(t, res.Stderr, "unauthenticated: daemon "+base+": a write needs the bearer token")
		wrong := filepath.Join(env.Dir, "wrong-token")
		require.NoError(t, os.WriteFile(wrong, []byte("nope"), 0o600))
		res = env.Op(t, "storage", "nodes", "heartbeat", "n1", "--via", base, "--token-file", wrong)
		require.Equal(t, 10, res.Code, describe(res))
		require.False(t, nodeRecord(t, env, "n1").Session.Live)
	})

	t.Run("with the token the daemon records the session and the measured offset", func(t *testing.T) {
		var rec viaRecord
		env.OpOK(t, "storage", &rec, "nodes", "heartbeat", "n1", "--via", base, "--token-file", tokenFile,
			"--clock-sync", "SYNCHRONIZED", "--ttl", "20s", "-o", "json")
		require.True(t, rec.Session.Live)
		require.NotNil(t, rec.Observation)
		c := rec.Observation.Clock
		require.NotNil(t, c.OffsetMs)
		require.NotNil(t, c.UncertaintyMs)
		require.Positive(t, *c.UncertaintyMs, "a round trip takes time")
		off := *c.OffsetMs
		if off < 0 {
			off = -off
		}
		require.LessOrEqual(t, off, *c.UncertaintyMs+1, "one clock: the offset is zero within the uncertainty (and rounding)")
		require.False(t, c.ExceedsTolerance)
		require.True(t, rec.Schedulable, "%v", rec.Reasons)
		stored := nodeRecord(t, env, "n1")
		require.True(t, stored.Session.Live, "the session is in the store")
		require.Equal(t, *c.OffsetMs, *stored.Observation.Clock.OffsetMs)
	})

	t.Run("the table output reads the daemon's answer", func(t *testing.T) {
		res := env.Op(t, "storage", "nodes", "heartbeat", "n1", "--via", base, "--token-file", tokenFile, "--clock-sync", "SYNCHRONIZED", "-o", "table")
		require.Equal(t, 0, res.Code, describe(res))
		require.Contains(t, res.Stdout, "n1")
	})

	t.Run("an unknown node comes back not_found", func(t *testing.T) {
		res := env.Op(t, "storage", "nodes", "heartbeat", "n9", "--via", base, "--token-file", tokenFile)
		require.Equal(t, 3, res.Code, describe(res))
		require.Contains(t, res.Stderr, "not_found: daemon "+base+": node n9 is not registered")
	})

	t.Run("a daemon nobody answers at is unavailable", func(t *testing.T) {
		res := env.Op(t, "storage", "nodes", "heartbeat", "n1", "--via", "http://"+testenv.FreeAddr(t), "--token-file", tokenFile)
		require.Equal(t, 7, res.Code, describe(res))
		require.Contains(t, res.Stderr, "unavailable: daemon http://")
		require.Empty(t, res.Stdout)
	})

	t.Run("a token file without --via is invalid", func(t *testing.T) {
		res := env.Op(t, "storage", "nodes", "heartbeat", "n1", "--token-file", tokenFile)
		require.Equal(t, 2, res.Code, describe(res))
		require.Contains(t, res.Stderr, "invalid_argument: --token-file goes with --via")
	})

	t.Run("a bad URL is invalid", func(t *testing.T) {
		res := env.Op(t, "storage", "nodes", "heartbeat", "n1", "--via", "ftp://x", "--token-file", tokenFile)
		require.Equal(t, 2, res.Code, describe(res))
		require.Contains(t, res.Stderr, `invalid_argument: --via "ftp://x"`)
	})
}

// skewedHeartbeat is a node whose clock runs skew ahead of the daemon's:
// the test plays the node of the two-step exchange, reading its own clock
// plus skew as that node would.
func skewedHeartbeat(t *testing.T, base, token string, skew time.Duration) (int, string) {
	t.Helper()
	code, body := request(t, http.DefaultClient, "GET", base+"/v1/clock", "", "")
	require.Equal(t, 200, code, body)
	var stamp struct {
		Stamp string `json:"stamp"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &stamp))
	req, err := json.Marshal(obj{
		"measurement": obj{"clock_sync": "SYNCHRONIZED"},
		"stamp":       stamp.Stamp,
		"node_time":   time.Now().Add(skew).UTC().Format(time.RFC3339Nano),
	})
	require.NoError(t, err)
	return request(t, http.DefaultClient, "POST", base+"/v1/nodes/n1:heartbeat", token, string(req))
}

// TestASkewedNodeClockBlocksPlacement: a node whose clock is 5s ahead of
// the daemon's (tolerance 500ms) is recorded with exceeds_tolerance,
// `nodes get` names the offset and calculate-deploy refuses it; its next
// heartbeat with a good clock lifts the refusal.
func TestASkewedNodeClockBlocksPlacement(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env, base, tokenFile := viaDaemon(t)
	data, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	token := strings.TrimSpace(string(data))

	code, body := skewedHeartbeat(t, base, token, 5*time.Second)
	require.Equal(t, 200, code, body)
	rec := nodeRecord(t, env, "n1")
	require.True(t, rec.Session.Live)
	c := rec.Observation.Clock
	require.True(t, c.ExceedsTolerance)
	require.InDelta(t, 5000, *c.OffsetMs, float64(*c.UncertaintyMs+1))
	require.False(t, rec.Schedulable)
	require.Len(t, rec.Reasons, 1)
	require.Regexp(t, `^node clock exceeds tolerance: SYNCHRONIZED, offset \+(49|50)\d\dms ± \d+ms beyond 500ms$`, rec.Reasons[0])

	line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"storage": "1G"}})
	require.Contains(t, line, "failed_precondition: node clock exceeds tolerance: SYNCHRONIZED, offset +")

	code, body = skewedHeartbeat(t, base, token, -5*time.Second)
	require.Equal(t, 200, code, body)
	require.Contains(t, nodeRecord(t, env, "n1").Reasons[0], "offset -")

	code, body = skewedHeartbeat(t, base, token, 0)
	require.Equal(t, 200, code, body)
	rec = nodeRecord(t, env, "n1")
	require.True(t, rec.Schedulable, "%v", rec.Reasons)
	env.Call(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"storage": "1G"}}, nil)

	t.Run("a stamp the daemon did not make is refused", func(t *testing.T) {
		req := `{"measurement":{},"stamp":"AAAA","node_time":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}`
		code, body := request(t, http.DefaultClient, "POST", base+"/v1/nodes/n1:heartbeat", token, req)
		require.Equal(t, 400, code, body)
		require.Contains(t, body, `"code":"invalid_argument"`)
	})
}

// TestAHeartbeatAgentViaTheDaemon runs the agent (--interval) through the
// daemon: it keeps the session, and on SIGTERM ends it through the daemon.
func TestAHeartbeatAgentViaTheDaemon(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env, base, tokenFile := viaDaemon(t)
	agent, out, errb := startAgent(t, env.Dir, base, tokenFile, "--interval", "300ms", "--ttl", "5s")
	require.Eventually(t, func() bool { return nodeRecord(t, env, "n1").Session.Live }, 20*time.Second, 100*time.Millisecond)
	require.NoError(t, agent.Process.Signal(syscall.SIGTERM))
	require.NoError(t, agent.Wait(), errb.String())
	var rec viaRecord
	require.NoError(t, json.Unmarshal([]byte(out.String()), &rec), out.String())
	require.False(t, rec.Session.Live, "the agent ended its session on the way out")
	require.False(t, nodeRecord(t, env, "n1").Session.Live)
	require.Contains(t, errb.String(), "stopped, ending the session")
}

// TestAHeartbeatViaMutualTLS: with serve.tls.client_ca, a node presenting
// the certificate of --tls-cert/--tls-key (and trusting the daemon through
// --tls-ca) heartbeats; one without a certificate gets no answer and the
// daemon is unavailable to it.
func TestAHeartbeatViaMutualTLS(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env := testenv.NewEtcd(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	dir := env.Dir
	ca := newCA(t)
	ca.issue(t, dir, "server", true)
	ca.issue(t, dir, "client", false)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.cert.Raw)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("mtls-Token-31\n"), 0o600))
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML(), "http: "+addr, "token_file: token", "tls:", "  cert: server.pem", "  key: server-key.pem", "  client_ca: ca.pem")
	env.Serve(t, addr)
	base := "https://" + addr
	args := []string{"nodes", "heartbeat", "n1", "--via", base, "--token-file", "token", "--tls-ca", "ca.pem", "--clock-sync", "SYNCHRONIZED", "-o", "json"}

	var rec viaRecord
	require.Eventually(t, func() bool {
		res := env.Op(t, "storage", append(args, "--tls-cert", "client.pem", "--tls-key", "client-key.pem")...)
		return res.Code == 0 && json.Unmarshal([]byte(res.Stdout), &rec) == nil
	}, 20*time.Second, 50*time.Millisecond, "the daemon's HTTPS never answered the node")
	require.True(t, rec.Session.Live)
	require.NotNil(t, rec.Observation.Clock.UncertaintyMs)

	res := env.Op(t, "storage", args...)
	require.Equal(t, 7, res.Code, describe(res))
	require.Contains(t, res.Stderr, "unavailable: daemon "+base+" cannot be reached")
	require.Empty(t, res.Stdout)
}

// TestAHeartbeatAgentOutlivesAStampItsDaemonDidNotMake: between an agent's
// two steps its daemon may restart, or a second daemon behind the same
// address may answer; the stamp of step 1 is then not the answering
// daemon's. A proxy in front of the daemon hands the agent such stamps
// (well formed, sealed by no daemon) for three heartbeats after its first:
// the agent reports them and goes on, and its next heartbeats record its
// session again.
func TestAHeartbeatAgentOutlivesAStampItsDaemonDidNotMake(t *testing.T) {
	t.Parallel()
	env, base, tokenFile := viaDaemon(t)
	target, err := url.Parse(base)
	require.NoError(t, err)
	daemon := httputil.NewSingleHostReverseProxy(target)
	var clocks, foreign atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/clock" && clocks.Add(1) > 1 && foreign.Add(1) <= 3 {
			stamp := base64.RawURLEncoding.EncodeToString(make([]byte, 8+32))
			_ = json.NewEncoder(w).Encode(map[string]any{"daemon_time": time.Now().UTC(), "stamp": stamp})
			return
		}
		daemon.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	agent, _, errb := startAgent(t, env.Dir, proxy.URL, tokenFile, "--interval", "200ms", "--ttl", "5s")
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	// The session is live from the first heartbeat; the heartbeats after
	// the foreign stamps renew it.
	require.Eventually(t, func() bool { return foreign.Load() > 3 || len(exited) > 0 }, 20*time.Second, 50*time.Millisecond)
	after := time.Now()
	time.Sleep(time.Second) // several intervals past the foreign stamps
	select {
	case err := <-exited:
		t.Fatalf("the agent ended on a stamp it can replace: %v\n%s", err, errb.String())
	default:
	}
	require.Equal(t, 3, strings.Count(errb.String(), "not one this daemon made"), errb.String())
	var rec struct {
		Session struct {
			Live     bool      `json:"live"`
			LastSeen time.Time `json:"last_seen"`
		} `json:"session"`
	}
	env.OpOK(t, "storage", &rec, "nodes", "get", "n1", "-o", "json")
	require.True(t, rec.Session.Live)
	require.True(t, rec.Session.LastSeen.After(after), "a heartbeat after the foreign stamps landed (last seen %v)", rec.Session.LastSeen)
	require.NoError(t, agent.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-exited, errb.String())
}

// startAgent starts `storage nodes heartbeat n1 --via via` as an agent in
// dir, with a synchronised clock, JSON output and flags (its --interval,
// its --ttl), and kills it when the test ends if it is still running.
func startAgent(t *testing.T, dir, via, tokenFile string, flags ...string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
	t.Helper()
	args := append([]string{"nodes", "heartbeat", "n1", "--via", via, "--token-file", tokenFile, "--clock-sync", "SYNCHRONIZED", "-o", "json"}, flags...)
	agent := exec.Command(testenv.Bin(t, "storage"), args...)
	agent.Dir = dir
	agent.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	var out, errb syncBuffer
	agent.Stdout, agent.Stderr = &out, &errb
	require.NoError(t, agent.Start())
	t.Cleanup(func() { _ = agent.Process.Kill() })
	return agent, &out, &errb
}

// syncBuffer is a strings.Builder a test may read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAnAgentViaTheDaemonHeartbeatsWithinTheDaemonsSession: without --ttl
// the session lives the daemon's nodes.session_ttl (2s here), not the
// node's own default (30s, this node has no config): an --interval the
// daemon's session would lapse within is refused after the first answer
// says so, one line, and the session that heartbeat opened is ended; a
// shorter one runs the agent, whatever the node's own session_ttl.
func TestAnAgentViaTheDaemonHeartbeatsWithinTheDaemonsSession(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	tokenFile := filepath.Join(env.Dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("ttl-Token-5\n"), 0o600))
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML()+"nodes:\n  session_ttl: 2s\n", "http: "+addr, "token_file: token")
	env.Serve(t, addr).WaitHTTP(t)
	agent := func(ctx context.Context, interval string, nodeConfig string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
		c := exec.CommandContext(ctx, testenv.Bin(t, "storage"), "nodes", "heartbeat", "n1", "--via", "http://"+addr, "--token-file", tokenFile,
			"--clock-sync", "SYNCHRONIZED", "--interval", interval, "-o", "json")
		c.Dir = t.TempDir() // the node's folder
		if nodeConfig != "" {
			require.NoError(t, os.WriteFile(filepath.Join(c.Dir, "storage.yaml"), []byte(nodeConfig), 0o644))
		}
		c.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
		var out, errb syncBuffer
		c.Stdout, c.Stderr = &out, &errb
		return c, &out, &errb
	}
	for _, interval := range []string{"2s", "5s"} {
		t.Run("an interval of "+interval+" is refused and the session its first heartbeat opened ended", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, out, errb := agent(ctx, interval, "")
			err := c.Run()
			require.NoError(t, ctx.Err(), "the agent ran on with a session that lapses between its heartbeats: %s", errb.String())
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, errb.String())
			require.Equal(t, 2, exit.ExitCode(), errb.String())
			require.Empty(t, out.String())
			require.Equal(t, "storage: nodes heartbeat: invalid_argument: --interval "+interval+": want less than the daemon's session ttl 2s (its nodes.session_ttl), or the session lapses between heartbeats; give a shorter --interval or a --ttl\n", errb.String())
			require.False(t, nodeRecord(t, env, "n1").Session.Live)
		})
	}
	for _, c := range []struct {
		name, interval, nodeConfig string
	}{
		{"an interval shorter than the daemon's session runs the agent", "500ms", ""},
		{"an interval shorter than the daemon's session runs the agent, though the node's own session_ttl is shorter still", "1.5s", "nodes:\n  session_ttl: 1s\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd, _, errb := agent(ctx, c.interval, c.nodeConfig)
			require.NoError(t, cmd.Start())
			require.Eventually(t, func() bool { return strings.Contains(errb.String(), "heartbeat every "+c.interval) }, 15*time.Second, 50*time.Millisecond, errb.String())
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, cmd.Wait(), errb.String())
		})
	}
}

// TestAnAgentStoppedDuringItsFirstHeartbeatEndsItsSession: systemd may
// stop the agent while its first heartbeat is still on its way (a slow
// daemon, a restart loop). A proxy holds that heartbeat's GET /v1/clock
// until the signal has been sent: the agent finishes the heartbeat, ends
// the session it opened and exits 0, rather than dying of the signal with
// the session live until its ttl.
func TestAnAgentStoppedDuringItsFirstHeartbeatEndsItsSession(t *testing.T) {
	t.Parallel()
	env, base, tokenFile := viaDaemon(t)
	target, err := url.Parse(base)
	require.NoError(t, err)
	daemon := httputil.NewSingleHostReverseProxy(target)
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGTERM during the first heartbeat ends the session and exits 0", syscall.SIGTERM},
		{"SIGINT during the first heartbeat ends the session and exits 0", syscall.SIGINT},
	} {
		t.Run(c.name, func(t *testing.T) {
			held, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/clock" {
					once.Do(func() { close(held); <-release })
				}
				daemon.ServeHTTP(w, r)
			}))
			defer proxy.Close()
			agent, out, errb := startAgent(t, env.Dir, proxy.URL, tokenFile, "--interval", "1s", "--ttl", "30s")
			select {
			case <-held:
			case <-time.After(20 * time.Second):
				t.Fatalf("the agent sent no heartbeat: %s", errb.String())
			}
			require.NoError(t, agent.Process.Signal(c.sig))
			time.Sleep(200 * time.Millisecond) // the signal is delivered while the heartbeat is held
			close(release)
			require.NoError(t, agent.Wait(), errb.String())
			var rec viaRecord
			require.NoError(t, json.Unmarshal([]byte(out.String()), &rec), out.String())
			require.False(t, rec.Session.Live, "the agent ended the session its first heartbeat opened")
			require.False(t, nodeRecord(t, env, "n1").Session.Live)
			require.Contains(t, errb.String(), "stopped, ending the session")
		})
	}
}

package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// EnvServe, set to 1, makes every Env start a serve daemon in its plugin
// folder, so that every call a suite makes is forwarded through it: the
// same suites then prove that forwarded answers are the answers. Set to
// "kill", the daemon is also SIGKILLed at random moments and restarted
// while a test's load runs (see Chaos): calls then run through it, locally
// while it is down, or die with it ("outcome unknown").
const EnvServe = "ERU_TEST_SERVE"

// Serving reports whether suites run with a daemon per Env.
func Serving() bool { return os.Getenv(EnvServe) == "1" || Killing() }

// Killing reports whether the daemons of the suite are killed at random.
func Killing() bool { return os.Getenv(EnvServe) == "kill" }

// OutcomeUnknown reports whether a call died with the daemon after the
// daemon took it: a write that may or may not have landed.
func OutcomeUnknown(res Result) bool {
	return res.Code == 128 && strings.Contains(res.Stderr, ": unavailable: outcome unknown: the serve daemon")
}

// Daemon is a `storage serve` process started for a test (the plugin binary
// execs the daemon's, libexec/serve, in the same process).
type Daemon struct {
	Cmd    *exec.Cmd
	Socket string
	HTTP   string // host:port when the config names serve.http

	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}

	// stopping runs once, when the daemon is first stopped or killed.
	stopping     func()
	stoppingOnce sync.Once
}

// stopped runs the daemon's stopping hook, once.
func (d *Daemon) stopped() {
	d.stoppingOnce.Do(func() {
		if d.stopping != nil {
			d.stopping()
		}
	})
}

var answeredRe = regexp.MustCompile(`"answered":(\d+)`)

// Log is what the daemon wrote on stderr so far.
func (d *Daemon) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

type lockedWriter struct{ d *Daemon }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.d.stderr.Write(p)
}

// FreeAddr is a loopback address nobody listens on yet.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// Serve starts `storage serve` in the Env's folder, waits until its socket
// answers, and stops it (SIGTERM) when the test ends. httpAddr is the
// serve.http address the config names, if any, for Daemon.HTTP.
func (e *Env) Serve(t testing.TB, httpAddr string) *Daemon {
	t.Helper()
	d, err := e.startDaemon(t, httpAddr, false)
	require.NoError(t, err)
	return d
}

// startDaemon starts the Env's daemon, stopped when the test ends. For a
// suite run through daemons (suite), the test then fails when it made
// calls a daemon may answer and its daemon answered none: the suite
// would otherwise pass with every call declined and run locally.
func (e *Env) startDaemon(t testing.TB, httpAddr string, suite bool) (*Daemon, error) {
	t.Helper()
	d, err := e.launchDaemon(Bin(t, "storage"), httpAddr)
	if d != nil {
		// The calls made while the daemon ran (a test may stop it and
		// start its own).
		made := e.forwardable.Load()
		var during int64
		d.stopping = func() { during = e.forwardable.Load() - made }
		t.Cleanup(func() {
			d.Stop(t)
			log := d.Log()
			m := answeredRe.FindStringSubmatch(log)
			if m != nil {
				t.Logf("serve daemon answered %s forwarded calls", m[1])
			}
			// A daemon logging to a file says nothing here; one whose test
			// rewrote the config declines its calls, as it must.
			if suite && during > 0 && m != nil && m[1] == "0" && !strings.Contains(log, "config changed since the daemon started") {
				t.Errorf("the suite runs every call through a daemon, but this Env's daemon answered none of the %d calls made while it ran; its log:\n%s", during, log)
			}
		})
	}
	return d, err
}

// launchDaemon starts `storage serve` (the binary at bin) in the Env's
// folder and waits until its socket answers; the caller stops it. It
// touches no testing.T, so it may run on any goroutine.
func (e *Env) launchDaemon(bin, httpAddr string) (*Daemon, error) {
	d := &Daemon{Socket: filepath.Join(e.Dir, "eru-resources.sock"), HTTP: httpAddr, done: make(chan struct{})}
	d.Cmd = exec.Command(bin, "serve")
	d.Cmd.Dir = e.Dir
	d.Cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	d.Cmd.Stdout = io.Discard
	d.Cmd.Stderr = lockedWriter{d}
	if err := d.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = d.Cmd.Wait(); close(d.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unix", d.Socket); err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("serve exited: %s", d.Log())
		default:
		}
		if time.Now().After(deadline) {
			d.Kill()
			return d, fmt.Errorf("serve did not listen in 20s: %s", d.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.setDaemon(d)
	return d, nil
}

func (e *Env) setDaemon(d *Daemon) {
	e.daemonMu.Lock()
	defer e.daemonMu.Unlock()
	e.daemon = d
}

// KillDaemonAtRandom keeps a daemon answering for the Env until stop is
// closed, SIGKILLing it at random moments (20 to 220 ms after it starts
// answering) and starting it again after a random pause (up to 50 ms,
// during which calls run in the binaries). It returns how many times it
// killed it, and leaves a daemon running (Daemon) for the caller to stop.
// It may run on any goroutine.
func (e *Env) KillDaemonAtRandom(t testing.TB, seed uint64, stop <-chan struct{}) int {
	bin := Bin(t, "storage")
	rng := rand.New(rand.NewPCG(seed, 1))
	kills := 0
	running := func() bool {
		if d := e.Daemon(); d != nil && !d.Exited() {
			return true
		}
		if _, err := e.launchDaemon(bin, ""); err != nil {
			t.Errorf("restarting the serve daemon after %d kills: %v", kills, err)
			return false
		}
		return true
	}
	for running() {
		select {
		case <-stop:
			return kills
		case <-time.After(time.Duration(20+rng.IntN(200)) * time.Millisecond):
		}
		e.Daemon().Kill()
		kills++
		select {
		case <-stop:
			running()
			return kills
		case <-time.After(time.Duration(rng.IntN(50)) * time.Millisecond):
		}
	}
	return kills
}

// Chaos, under ERU_TEST_SERVE=kill, kills the Env's daemon at random
// moments (KillDaemonAtRandom) from now until the returned stop is called
// (or the test ends); stop returns how many times, and leaves a daemon
// answering. A test wraps the load it checks in it, so that its setup and
// its final reads are not the ones to die with the daemon. Otherwise Chaos
// does nothing and stop returns 0.
func (e *Env) Chaos(t testing.TB) (stop func() int) {
	if !Killing() {
		return func() int { return 0 }
	}
	Bin(t, "storage") // built here: a failed build fails the test, not the goroutine
	quit, done := make(chan struct{}), make(chan struct{})
	kills := 0
	go func() {
		defer close(done)
		kills = e.KillDaemonAtRandom(t, uint64(time.Now().UnixNano()), quit)
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() {
			close(quit)
			<-done
			t.Logf("serve daemon killed %d times during the load", kills)
		})
		return kills
	}
	t.Cleanup(func() { stop() })
	return stop
}

// Stop ends the daemon with SIGTERM and waits for it.
func (d *Daemon) Stop(t testing.TB) {
	select {
	case <-d.done:
		return
	default:
	}
	d.stopped()
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		_ = d.Cmd.Process.Kill()
		<-d.done
		t.Errorf("serve did not stop within 15s of SIGTERM")
	}
}

// Kill ends the daemon with SIGKILL, as a crash would.
func (d *Daemon) Kill() {
	d.stopped()
	_ = d.Cmd.Process.Kill()
	<-d.done
}

// Exited reports whether the daemon has ended.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Get fetches path over the daemon's HTTP listener.
func (d *Daemon) Get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + d.HTTP + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// Forwarded is how many calls the daemon answered (the sum of
// eru_serve_requests_total with result ok or failed), read from /metrics.
func (d *Daemon) Forwarded(t testing.TB) int {
	t.Helper()
	code, body := d.Get(t, "/metrics")
	require.Equal(t, 200, code, body)
	n := 0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "eru_serve_requests_total{") || strings.Contains(line, `verb="GET `) {
			continue
		}
		if !strings.Contains(line, `result="ok"`) && !strings.Contains(line, `result="failed"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err)
		n += int(v)
	}
	return n
}

// Daemon is the daemon started for the Env (the latest), nil without one.
func (e *Env) Daemon() *Daemon {
	e.daemonMu.Lock()
	defer e.daemonMu.Unlock()
	return e.daemon
}

// serveIfAsked starts a daemon for the Env when the suite runs with
// ERU_TEST_SERVE=1 or kill (a daemon Chaos restarts is stopped when the
// test ends).
func (e *Env) serveIfAsked(t testing.TB) {
	if Killing() {
		t.Cleanup(func() {
			if d := e.Daemon(); d != nil {
				d.Stop(t)
			}
		})
	}
	if !Serving() {
		return
	}
	// A config the daemon refuses (tests of malformed configs) leaves the
	// calls to run locally, as they would in production.
	if _, err := e.startDaemon(t, "", !Killing()); err != nil { // a killed daemon answers no count
		t.Logf("no daemon for this Env: %v", err)
	}
}

// WaitHTTP waits until the daemon's HTTP listener answers /healthz.
func (d *Daemon) WaitHTTP(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := http.Get("http://" + d.HTTP + "/healthz"); err == nil {
			_ = resp.Body.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.FailNow(t, fmt.Sprintf("serve's HTTP %s did not answer: %s", d.HTTP, d.Log()))
}

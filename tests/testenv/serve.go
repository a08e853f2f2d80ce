package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
// same suites then prove that forwarded answers are the answers.
const EnvServe = "ERU_TEST_SERVE"

// Serving reports whether suites run with a daemon per Env.
func Serving() bool { return os.Getenv(EnvServe) == "1" }

// Daemon is a `storage serve` process started for a test.
type Daemon struct {
	Cmd    *exec.Cmd
	Socket string
	HTTP   string // host:port when the config names serve.http

	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
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
	d, err := e.startDaemon(t, httpAddr)
	require.NoError(t, err)
	return d
}

func (e *Env) startDaemon(t testing.TB, httpAddr string) (*Daemon, error) {
	t.Helper()
	d := &Daemon{Socket: filepath.Join(e.Dir, "eru-resources.sock"), HTTP: httpAddr, done: make(chan struct{})}
	d.Cmd = exec.Command(Bin(t, "storage"), "serve")
	d.Cmd.Dir = e.Dir
	d.Cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	d.Cmd.Stdout = io.Discard
	d.Cmd.Stderr = lockedWriter{d}
	require.NoError(t, d.Cmd.Start())
	go func() { _ = d.Cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.Stop(t)
		if m := answeredRe.FindStringSubmatch(d.Log()); m != nil {
			t.Logf("serve daemon answered %s forwarded calls", m[1])
		}
	})
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
			return nil, fmt.Errorf("serve did not listen in 20s: %s", d.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.daemon = d
	return d, nil
}

// Stop ends the daemon with SIGTERM and waits for it.
func (d *Daemon) Stop(t testing.TB) {
	select {
	case <-d.done:
		return
	default:
	}
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

// Daemon is the daemon started for the Env, nil without one.
func (e *Env) Daemon() *Daemon { return e.daemon }

// serveIfAsked starts a daemon for the Env when the suite runs with
// ERU_TEST_SERVE=1.
func (e *Env) serveIfAsked(t testing.TB) {
	if !Serving() {
		return
	}
	// A config the daemon refuses (tests of malformed configs) leaves the
	// calls to run locally, as they would in production.
	if _, err := e.startDaemon(t, ""); err != nil {
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

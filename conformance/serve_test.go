package conformance

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/conformance/internal/gobuild"
)

// envServe, set to 1, runs the whole suite with a serve daemon in every
// plugin folder, installed as docs/serve.md describes: the small front
// (cmd/forwarder) under the plugins' names at the top of the folder, the
// full binaries in libexec/, where core never looks. Every call core makes
// is then forwarded through the daemon, and the suite's assertions, the
// same in both modes, prove that forwarded answers are the answers.
//
//	ERU_TEST_SERVE=1 go test ./...
const envServe = "ERU_TEST_SERVE"

// frontName is the front's file in the suite's build folder.
const frontName = "forwarder"

// engineDir is the sub-folder of the full binaries beside the front.
const engineDir = "libexec"

func serving() bool { return os.Getenv(envServe) == "1" }

// installBinary puts the plugin binary called name into the folder: the
// full binary itself, or with a daemon, the front in its place and the
// full binary in libexec/, beside the daemon's binary (libexec/serve).
func (e *env) installBinary(t *testing.T, name string) {
	t.Helper()
	if !serving() {
		install(t, filepath.Join(e.suite.binDir, name), filepath.Join(e.dir, name))
		return
	}
	require.NoError(t, os.MkdirAll(filepath.Join(e.dir, engineDir), 0o755))
	install(t, filepath.Join(e.suite.binDir, name), filepath.Join(e.dir, engineDir, name))
	install(t, filepath.Join(e.suite.binDir, frontName), filepath.Join(e.dir, name))
	if name == resourceNames[0] { // one daemon binary for both
		install(t, filepath.Join(e.suite.binDir, gobuild.Daemon), filepath.Join(e.dir, gobuild.Daemon))
	}
}

// lockedBuffer is a daemon's stderr, written by its process and read by
// the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var answeredRe = regexp.MustCompile(`"answered":(\d+)`)

// serve starts `libexec/storage serve` in the plugin folder (which execs
// libexec/serve; it serves both plugins' configs), waits until its socket answers, and stops it
// with SIGTERM when the test ends. A daemon that died during the test, or
// answered no call, fails it: every call would then have run in the
// binaries, and the suite would not have tested forwarding.
func (e *env) serve(t *testing.T) {
	t.Helper()
	var log lockedBuffer
	cmd := exec.Command(filepath.Join(e.dir, engineDir, "storage"), "serve")
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	cmd.Stderr = &log
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
			t.Errorf("the serve daemon of %s ended during the test: %s", e.dir, log.String())
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("the serve daemon did not stop within 15s of SIGTERM: %s", log.String())
		}
		// A daemon that answered nothing let core's calls all run in the
		// binaries: forwarding was not tested. (A daemon logging to a file
		// says nothing here; one whose test rewrote the config declines
		// its calls, as it must.)
		m := answeredRe.FindStringSubmatch(log.String())
		if m == nil {
			return
		}
		if m[1] == "0" && !strings.Contains(log.String(), "config changed since the daemon started") {
			t.Errorf("the serve daemon answered no forwarded call: %s", log.String())
			return
		}
		t.Logf("the serve daemon answered %s forwarded calls", m[1])
	})
	socket := filepath.Join(e.dir, "eru-resources.sock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", socket); err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-done:
			require.FailNow(t, "the serve daemon exited at start", log.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "the serve daemon did not listen in 20s: %s", log.String())
	}
}

// Package serve_test checks the serve daemon through the built binaries:
// forwarded calls answer the bytes a local call answers, reads through
// one daemon see writes acknowledged through another or through none, the
// watch cache survives compaction and etcd restarts, the socket and the
// HTTP API refuse whom they must, and a daemon killed under a write leaves
// its client saying the outcome is unknown.
package serve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

type obj = map[string]any

// withServe adds a serve section to the Env's config files (both), keeping
// the rest.
func withServe(t testing.TB, env *testenv.Env, lines ...string) {
	t.Helper()
	cfg := env.ConfigYAML() + "serve:\n"
	for _, l := range lines {
		cfg += "  " + l + "\n"
	}
	for _, name := range []string{"storage.yaml", "compute.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(env.Dir, name), []byte(cfg), 0o644))
	}
}

// local runs a call in the Env without any daemon: the variable that
// turns forwarding off is given to that one process, so tests calling
// local may run in parallel.
func local(t testing.TB, env *testenv.Env, bin string, stdin []byte, args ...string) testenv.Result {
	t.Helper()
	return execPath(t, env, testenv.Bin(t, bin), stdin, args, "ERU_RESOURCE_NO_FORWARD=1")
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// metric is the value of the first sample of /metrics whose line starts
// with prefix.
func metric(t testing.TB, d *testenv.Daemon, prefix string) string {
	t.Helper()
	_, body := d.Get(t, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	return ""
}

// hasOpen reports whether process pid has the file at path open, as
// /proc/<pid>/fd shows it (by the file's real path).
func hasOpen(pid int, path string) bool {
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		path = filepath.Join(dir, filepath.Base(path))
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); err == nil && target == path {
			return true
		}
	}
	return false
}

func describe(r testenv.Result) string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
}

// thinFront builds cmd/forwarder as storage and compute in a folder of its
// own, with the full binaries in its libexec/, and returns that folder.
func thinFront(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "libexec"), 0o755))
	c := exec.Command("go", "build", "-o", filepath.Join(dir, "storage"), "./cmd/forwarder")
	c.Dir = testenv.Root()
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.Link(filepath.Join(dir, "storage"), filepath.Join(dir, "compute")))
	for _, b := range []string{"storage", "compute"} {
		require.NoError(t, os.Symlink(testenv.Bin(t, b), filepath.Join(dir, "libexec", b)))
	}
	return dir
}

// execPath runs the binary at path with args in the Env's folder, with
// the test's environment plus vars.
func execPath(t testing.TB, env *testenv.Env, path string, stdin []byte, args []string, vars ...string) testenv.Result {
	t.Helper()
	return execWith(t, env, path, bytes.NewReader(stdin), nil, args, vars...)
}

// execWith is execPath with stdin read from in and, when out is not nil,
// stdout written to it (the Result's Stdout is then empty).
func execWith(t testing.TB, env *testenv.Env, path string, in io.Reader, out io.Writer, args []string, vars ...string) testenv.Result {
	t.Helper()
	c := exec.Command(path, args...)
	c.Dir = env.Dir
	c.Env = append(append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH="), vars...)
	var stdout, errb bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = in, &stdout, &errb
	if out != nil {
		c.Stdout = out
	}
	err := c.Run()
	res := testenv.Result{Stdout: stdout.String(), Stderr: errb.String()}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "running %s %v: %v", path, args, err)
		res.Code = exit.ExitCode()
	}
	return res
}

// servedEmbedded is a fresh Env on the embedded store with a daemon of
// its own, listening for HTTP too.
func servedEmbedded(t *testing.T) (*testenv.Env, *testenv.Daemon) {
	t.Helper()
	env := testenv.NewEmbedded(t)
	return env, serveWithHTTP(t, env)
}

// serveWithHTTP starts a daemon of the Env's own, listening for HTTP on a
// free port, in place of any the suite started for it (ERU_TEST_SERVE=1
// starts one without HTTP), and waits until it answers.
func serveWithHTTP(t *testing.T, env *testenv.Env) *testenv.Daemon {
	t.Helper()
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	addr := testenv.FreeAddr(t)
	withServe(t, env, "http: "+addr)
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	return d
}

// sumMetric adds the values of every /metrics line starting with prefix.
func sumMetric(t testing.TB, d *testenv.Daemon, prefix string) float64 {
	t.Helper()
	_, body := d.Get(t, "/metrics")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			f := strings.Fields(line)
			_, err := fmt.Sscan(f[len(f)-1], &v)
			require.NoError(t, err)
			sum += v
		}
	}
	return sum
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

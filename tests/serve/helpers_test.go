// Package serve_test checks the serve daemon through the built binaries:
// forwarded calls answer the bytes a local call answers, reads through
// one daemon see writes acknowledged through another or through none, the
// watch cache survives compaction and etcd restarts, the socket and the
// HTTP API refuse whom they must, and a daemon killed under a write leaves
// its client saying the outcome is unknown.
package serve_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// local runs a call in the Env without any daemon.
func local(t testing.TB, env *testenv.Env, bin string, stdin []byte, args ...string) testenv.Result {
	t.Helper()
	t.Setenv("ERU_RESOURCE_NO_FORWARD", "1")
	defer os.Unsetenv("ERU_RESOURCE_NO_FORWARD")
	return env.Exec(t, bin, stdin, args...)
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

func describe(r testenv.Result) string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
}

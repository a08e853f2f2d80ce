package serve_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestServeRefusesAConfigErrorBeforeCreatingAnything: a serve section the
// daemon cannot work with — a socket path longer than a unix socket
// address holds, a token or TLS file that is not there — is the operator's
// configuration error: `storage serve` exits 2 (invalid_argument) with one
// line naming the key, and leaves the folder as it found it (no socket,
// no store).
func TestServeRefusesAConfigErrorBeforeCreatingAnything(t *testing.T) {
	t.Parallel() // light on the CPU: every daemon here stops at once
	for _, c := range []struct {
		name  string
		lines func(dir string) []string
		says  func(dir string) string
	}{
		{"a socket path longer than a unix socket address holds is refused with its length and the limit",
			func(string) []string { return []string{"socket: " + strings.Repeat("s", 120) + ".sock"} },
			func(dir string) string {
				n := len(filepath.Join(dir, strings.Repeat("s", 120)+".sock"))
				return "serve.socket: path is " + strconv.Itoa(n) + " bytes (relative to the config's folder), a unix socket path allows at most 107 (line FIRST)"
			}},
		{"a missing token file is refused naming the key and the path",
			func(string) []string { return []string{"http: 127.0.0.1:0", "token_file: nope.tok"} },
			func(dir string) string {
				return "serve.token_file: open " + filepath.Join(dir, "nope.tok") + ": no such file or directory"
			}},
		{"a missing certificate is refused naming the key and the path",
			func(string) []string {
				return []string{"http: 127.0.0.1:0", "tls:", "  cert: nope.pem", "  key: nope-key.pem"}
			},
			func(dir string) string {
				return "serve.tls.cert: open " + filepath.Join(dir, "nope.pem") + ": no such file or directory"
			}},
		{"an HTTP address without a port is refused naming the key and the value",
			func(string) []string { return []string{"http: 127.0.0.1"} },
			func(string) string {
				return `serve.http: "127.0.0.1" is not a listen address like 127.0.0.1:9464 (line FIRST)`
			}},
		{"an HTTP port out of range is refused naming the key and the value",
			func(string) []string { return []string{"http: 127.0.0.1:94640"} },
			func(string) string {
				return `serve.http: "127.0.0.1:94640": port "94640" is not a number from 0 to 65535 or a service name (line FIRST)`
			}},
		{"an empty socket path is refused, pointing at the default",
			func(string) []string { return []string{`socket: ""`} },
			func(string) string {
				return "serve.socket: want a path (leave the key out for eru-resources.sock beside the config file) (line FIRST)"
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.NewEmbedded(t)
			if d := env.Daemon(); d != nil {
				d.Stop(t)
			}
			writeConfig(t, env, env.ConfigYAML(), c.lines(env.Dir)...)
			before := listing(t, env.Dir)
			res := env.Exec(t, "storage", nil, "serve")
			require.Equal(t, 2, res.Code, describe(res))
			require.Empty(t, res.Stdout)
			// FIRST is the line of the serve section's first key, after the
			// base config and the section's own line.
			first := strconv.Itoa(strings.Count(env.ConfigYAML(), "\n") + 2)
			says := strings.ReplaceAll(c.says(env.Dir), "FIRST", first)
			require.Equal(t, "storage: serve: invalid_argument: config "+filepath.Join(env.Dir, "storage.yaml")+": "+says+"\n", res.Stderr)
			require.Equal(t, before, listing(t, env.Dir), "nothing created")
		})
	}
}

// TestServeReadsConfigAsTheBinariesDo: `storage serve` takes --config as
// every other command does (docs/configuration.md, "Which file is read"):
// an empty value (`--config=$UNSET`) is an error, not the folder's file, and
// so is --config given twice, not the last one. The folder's own file here
// has a serve section the daemon refuses at once, so a daemon that fell
// back on it says so instead of serving.
func TestServeReadsConfigAsTheBinariesDo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"an empty --config= is refused, not taken for the folder's file", []string{"serve", "--config="}, "--config: empty file name"},
		{"--config given twice is refused, not the last one taken", []string{"serve", "--config", "other.yaml", "--config", "storage.yaml"}, "--config given twice (other.yaml and storage.yaml)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.NewEmbedded(t)
			if d := env.Daemon(); d != nil {
				d.Stop(t)
			}
			writeConfig(t, env, env.ConfigYAML(), `socket: ""`)
			require.NoError(t, os.WriteFile(filepath.Join(env.Dir, "other.yaml"), []byte(env.ConfigYAML()), 0o644))
			before := listing(t, env.Dir)
			res := env.Exec(t, "storage", nil, c.args...)
			require.Equal(t, 2, res.Code, describe(res))
			require.Empty(t, res.Stdout)
			require.Equal(t, "storage: serve: invalid_argument: "+c.says+"\n", res.Stderr)
			require.Equal(t, before, listing(t, env.Dir), "nothing created")
		})
	}
}

// TestCallsWithASocketPathTooLongRunLocally: the binaries, full and front,
// find the same too-long serve.socket; no daemon can listen there, so they
// run the call themselves, printing only its answer.
func TestCallsWithASocketPathTooLongRunLocally(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	writeConfig(t, env, env.ConfigYAML(), "socket: "+strings.Repeat("s", 120)+".sock")
	file := filepath.Join(env.Dir, "storage.yaml")
	want := local(t, env, "storage", nil, "--config", file, "name")
	require.Equal(t, 0, want.Code, describe(want))
	front := thinFront(t)
	for _, bin := range []string{testenv.Bin(t, "storage"), filepath.Join(front, "storage")} {
		res := execPath(t, env, bin, nil, []string{"--config", file, "name"})
		require.Equal(t, want, res, bin)
	}
}

// listing is the names in dir, sorted.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestServeRefusesAFileInTheSocketsPlace: a file that is not a socket where
// the socket goes is the host's state for the operator to fix, not a
// passing failure: failed_precondition (exit 4), the file left as it is.
func TestServeRefusesAFileInTheSocketsPlace(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	path := filepath.Join(env.Dir, "eru-resources.sock")
	require.NoError(t, os.WriteFile(path, []byte("notes\n"), 0o644))
	res := env.Exec(t, "storage", nil, "serve")
	require.Equal(t, 4, res.Code, describe(res))
	require.Empty(t, res.Stdout)
	require.Equal(t, "storage: serve: failed_precondition: socket "+path+": a file that is not a socket is in the way; move it or set serve.socket\n", res.Stderr)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "notes\n", string(got), "the file is left as it was")
}

package config_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// These tests check what the command layer does with the configuration:
// where --config may stand, what an operator is told on the built-in
// defaults, the log file, and which verbs may create the embedded store.

func TestConfigFlagAnywhere(t *testing.T) {
	env := testenv.NewEmbedded(t)
	env.Call(t, "storage", "add-node", addStorage, nil)
	other := t.TempDir()
	conf := filepath.Join(env.Dir, "storage.yaml")
	for _, args := range [][]string{
		{"--config", conf, "nodes", "list"},
		{"nodes", "list", "--config", conf},
		{"nodes", "get", "n1", "--config=" + conf, "-o", "json"},
		{"nodes", "get", "-o", "json", "--config", conf, "n1"},
	} {
		t.Run(strings.Join(args, " ")+" reads that file from another folder", func(t *testing.T) {
			e := &testenv.Env{Dir: other}
			res := e.Exec(t, "storage", nil, args...)
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Empty(t, res.Stderr)
			require.Contains(t, res.Stdout, `"n1"`)
		})
	}
	t.Run("--config given twice is refused", func(t *testing.T) {
		e := &testenv.Env{Dir: other}
		res := e.Exec(t, "storage", nil, "--config", conf, "nodes", "list", "--config", "/x.yaml")
		require.Equal(t, 2, res.Code)
		require.Equal(t, "storage: invalid_argument: --config given twice ("+conf+" and /x.yaml)\n", res.Stderr)
	})
}

func TestAnOperatorCommandOnTheDefaultsSaysSo(t *testing.T) {
	e := &testenv.Env{Dir: t.TempDir()}
	res := e.Exec(t, "storage", nil, "nodes", "list")
	require.Equal(t, 4, res.Code, "no store to read")
	lines := strings.Split(strings.TrimSpace(res.Stderr), "\n")
	require.Len(t, lines, 2)
	require.Equal(t, "storage: nodes list: no config file found (looked for --config, $ERU_RESOURCE_CONFIG_PATH, "+
		filepath.Join(e.Dir, "storage.yaml")+", "+filepath.Join(e.Dir, "compute.yaml")+", "+filepath.Join(e.Dir, "eru-resources.yaml")+
		"): using built-in defaults and the embedded store "+filepath.Join(e.Dir, "eru-resources.db"), lines[0])
	require.Contains(t, lines[1], "failed_precondition: embedded store "+filepath.Join(e.Dir, "eru-resources.db"))
}

func TestAHeartbeatThroughTheDaemonSaysNothingOfALocalStore(t *testing.T) {
	// A node that heartbeats --via the daemon has no config and no store of
	// its own (docs/serve.md): the defaults notice would tell its operator
	// it used an embedded store in the working directory, which it never
	// opens.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/clock", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"daemon_time":"`+time.Now().UTC().Format(time.RFC3339Nano)+`","stamp":"s"}`)
	})
	mux.HandleFunc("POST /v1/nodes/{action}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"node_id":"n1","status":"READY"}`+"\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	e := &testenv.Env{Dir: t.TempDir()}
	token := filepath.Join(e.Dir, "serve.token")
	require.NoError(t, os.WriteFile(token, []byte("tok\n"), 0o600))

	t.Run("a heartbeat sent to the daemon prints its record and no notice of built-in defaults", func(t *testing.T) {
		res := e.Exec(t, "storage", nil, "nodes", "heartbeat", "n1", "--via", srv.URL, "--token-file", token)
		require.Equal(t, 0, res.Code, res.Stderr)
		require.Empty(t, res.Stderr)
		require.Contains(t, res.Stdout, `"n1"`)
		require.NoFileExists(t, filepath.Join(e.Dir, "eru-resources.db"))
	})
	t.Run("a heartbeat written to the store still says which store it used", func(t *testing.T) {
		res := e.Exec(t, "storage", nil, "nodes", "heartbeat", "n1")
		require.Contains(t, res.Stderr, "no config file found")
	})
}

func TestTheLogFile(t *testing.T) {
	t.Run("a log file that cannot be opened fails an operator command, not a verb", func(t *testing.T) {
		env := testenv.NewEmbedded(t, testenv.WithConfig("log:\n  file: missing/plugin.log"))
		env.Call(t, "storage", "add-node", addStorage, nil)
		res := env.Op(t, "storage", "nodes", "list")
		require.Equal(t, 2, res.Code)
		require.Equal(t, "storage: nodes list: invalid_argument: config "+filepath.Join(env.Dir, "storage.yaml")+": log.file: open "+
			filepath.Join(env.Dir, "missing", "plugin.log")+": no such file or directory\n", res.Stderr)
	})
	t.Run("every line names the config file, and a password every user can read is warned of", func(t *testing.T) {
		dir := t.TempDir()
		env := &testenv.Env{Kind: "embedded", Dir: dir, Prefix: "/eru-resources", DB: filepath.Join(dir, "eru-resources.db")}
		conf := filepath.Join(dir, "eru-resources.yaml")
		require.NoError(t, os.WriteFile(conf, []byte("log: {file: plugin.log}\netcd: {auth: {username: eru, password: s3cret-Xy}}\n"), 0o644))
		env.Call(t, "storage", "add-node", addStorage, nil)
		env.OpOK(t, "compute", nil, "nodes", "list")
		logged, err := os.ReadFile(filepath.Join(dir, "plugin.log"))
		require.NoError(t, err)
		require.NotContains(t, string(logged), "s3cret-Xy")
		lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
		require.Len(t, lines, 4, "a warning and a line for each call: %s", logged)
		for _, l := range lines {
			require.Contains(t, l, `"config":{"file":"`+conf+`","source":"the shared file"}`)
		}
		require.Contains(t, lines[0], `"level":"WARN"`)
		require.Contains(t, lines[0], conf+" holds etcd.auth.password and every user of this host can read it (mode 0644)")
	})
}

// TestOnlyAVerbThatMayWriteAFirstRecordCreatesTheEmbeddedStore: a missing
// store file is created only by the verbs core may call on a node the
// plugin has never seen, to write its first record (docs/configuration.md).
func TestOnlyAVerbThatMayWriteAFirstRecordCreatesTheEmbeddedStore(t *testing.T) {
	t.Run("a writing verb of an unknown node on a missing store is not_found and creates nothing", func(t *testing.T) {
		env := testenv.NewEmbedded(t)
		line := env.Fail(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": []any{}})
		require.Contains(t, line, "node n1: not_found: ")
		require.NoFileExists(t, env.DB)
	})
	for _, c := range []struct {
		verb    string
		request obj
	}{
		{"add-node", addStorage},
		{"set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"storage": "1T"}, "delta": false}},
		{"set-node-resource-info", obj{"nodename": "n1", "capacity": obj{"volumes": obj{}, "disks": []any{}, "storage": 1000}, "usage": obj{"volumes": obj{}, "disks": []any{}, "storage": 0}}},
	} {
		t.Run(c.verb+" creates it with the node's record", func(t *testing.T) {
			env := testenv.NewEmbedded(t)
			env.Call(t, "storage", c.verb, c.request, nil)
			require.FileExists(t, env.DB)
			var info map[string]any
			env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": []any{}}, &info)
			require.NotNil(t, info["capacity"], "the node's record is in the store it created")
		})
	}
}

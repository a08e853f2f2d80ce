package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// These tests run the built binaries, as core does, on config files written
// the ways operators write them.

type obj = map[string]any

var prefixes atomic.Int64

// folder is a plugin folder holding the given files (name → content), on
// the shared etcd under a prefix of its own.
func folder(t *testing.T, files map[string]string) *testenv.Env {
	t.Helper()
	env := &testenv.Env{Kind: "etcd", Dir: t.TempDir(), Etcd: testenv.SharedEtcd(t), Prefix: fmt.Sprintf("/config-%d-%d", os.Getpid(), prefixes.Add(1))}
	for name, content := range files {
		content = strings.ReplaceAll(content, "ENDPOINT", env.Etcd.Endpoint)
		content = strings.ReplaceAll(content, "PREFIX", env.Prefix)
		require.NoError(t, os.WriteFile(filepath.Join(env.Dir, name), []byte(content), 0o644))
	}
	return env
}

var addStorage = obj{"nodename": "n1", "resource": obj{"volumes": []string{"/data0:1T"}, "storage": "1T"}}

// requireNoLocalStore checks that no embedded store was created in the
// folder: a config meant for etcd must never fall back to a local file.
func requireNoLocalStore(t *testing.T, env *testenv.Env) {
	t.Helper()
	entries, err := os.ReadDir(env.Dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasSuffix(e.Name(), ".db") || strings.HasSuffix(e.Name(), ".lock") || strings.HasSuffix(e.Name(), ".gate"), "a local store %s was created", e.Name())
	}
}

func TestAnchorsAndMergeKeysReachEtcd(t *testing.T) {
	for _, c := range []struct{ name, doc string }{
		{"etcd given as an alias of an anchor", ".etcd: &etcd\n  machines: [ENDPOINT]\n  prefix: PREFIX\netcd: *etcd\n"},
		{"etcd merging a base and overriding its prefix", "x-base: &base\n  machines: [ENDPOINT]\n  prefix: /not-this-one\netcd:\n  <<: *base\n  prefix: PREFIX\n"},
		{"a copy of core's own config", "log_level: INFO\nbind: \":5001\"\nauth: {username: admin, password: admin}\n" +
			"etcd:\n  machines: [ENDPOINT]\n  prefix: PREFIX\n  lock_prefix: __lock__/eru\n" +
			"docker:\n  network_mode: host\n  log: {type: journald}\nscheduler:\n  maxshare: -1\n  sharebase: 100\n" +
			"resource_plugin: {dir: /etc/eru/plugins, call_timeout: 30s}\n"},
	} {
		t.Run(c.name+": add-node writes to etcd, and no local store appears", func(t *testing.T) {
			env := folder(t, map[string]string{"storage.yaml": c.doc})
			env.Call(t, "storage", "add-node", addStorage, nil)
			require.True(t, env.Record(t, "/resource/storage/n1", nil), "the record is in etcd under the configured prefix")
			requireNoLocalStore(t, env)
		})
	}
}

func TestAMalformedConfigIsRefusedBeforeAnyStoreIsTouched(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"a misspelt etcd key", "etcd:\n  machine: [ENDPOINT]\n  prefix: PREFIX\n", "etcd.machine: unknown key; did you mean etcd.machines? (line 2)"},
		{"a misspelt embedded key", "embedded:\n  pth: state.db\n", "embedded.pth: unknown key; did you mean embedded.path? (line 2)"},
		{"a misspelt section", "embeded:\n  path: state.db\n", "embeded: unknown section; did you mean embedded? (line 1)"},
		{"a max_deploy_count with a fraction", "scheduler:\n  max_deploy_count: 1.5\n", `scheduler.max_deploy_count: "1.5" is not an integer (line 2)`},
		{"etcd with two letters swapped", "ectd:\n  machines: [ENDPOINT]\n  prefix: PREFIX\n", "ectd: unknown section; did you mean etcd? (line 1)"},
		{"a key given twice", "etcd:\n  machines: [ENDPOINT]\n  prefix: PREFIX\n  prefix: /other\n", "etcd.prefix: key given twice, first at line 3 (line 4)"},
	} {
		t.Run(c.name+" fails every call in one line naming the file and the key", func(t *testing.T) {
			env := folder(t, map[string]string{"storage.yaml": c.doc})
			file := filepath.Join(env.Dir, "storage.yaml")
			line := env.Fail(t, "storage", "add-node", addStorage)
			require.Equal(t, "storage: add-node: node n1: invalid_argument: config "+file+": "+c.want, line)
			line = env.Fail(t, "compute", "get-node-resource-info", obj{"nodename": "n1"})
			require.Contains(t, line, "invalid_argument: config "+file+": "+c.want, "compute reads storage's file")
			res := env.Op(t, "storage", "nodes", "list")
			require.Equal(t, 2, res.Code)
			require.Equal(t, "storage: nodes list: invalid_argument: config "+file+": "+c.want+"\n", res.Stderr)
			require.Empty(t, env.Dump(t), "nothing was written")
			requireNoLocalStore(t, env)
		})
	}
}

func TestBothPluginsFindOneStore(t *testing.T) {
	for _, file := range []string{"storage.yaml", "compute.yaml", "eru-resources.yaml"} {
		t.Run("with only "+file+" in the folder, both binaries use the store it names", func(t *testing.T) {
			dir := t.TempDir()
			env := &testenv.Env{Kind: "embedded", Dir: dir, Prefix: "/eru-resources", DB: filepath.Join(dir, "state", "one.db")}
			require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte("embedded:\n  path: state/one.db\n"), 0o644))
			env.Call(t, "storage", "add-node", addStorage, nil)
			env.Call(t, "compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 4, "memory": "8G"}}, nil)
			require.True(t, env.Record(t, "/resource/storage/n1", nil))
			require.True(t, env.Record(t, "/resource/compute/n1", nil))
			env.OpOK(t, "storage", nil, "nodes", "drain", "n1")
			line := env.Fail(t, "compute", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"cpu": 1}})
			require.Contains(t, line, "draining", "compute sees the drain storage wrote")
			require.NoFileExists(t, filepath.Join(dir, "eru-resources.db"), "no second store")
		})
	}
}

// TestEtcdSettingsTheClientRefusesNameTheFileAndTheKey: an etcd setting
// the client cannot use — a TLS file that is not there, a certificate
// without its key, an endpoint without its port — fails every call in one
// line naming the config file, the key and the line it is written on (docs/serve.md: the serve TLS
// files are refused "naming the key and the path, as the etcd TLS files
// are"), and no local store appears. No etcd is reached: the endpoint is
// never dialled.
func TestEtcdSettingsTheClientRefusesNameTheFileAndTheKey(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      func(dir string) string
	}{
		{"a CA file that is not there", "etcd:\n  machines: [127.0.0.1:1]\n  ca: missing-ca.pem\n",
			func(dir string) string {
				return "etcd.ca: open " + filepath.Join(dir, "missing-ca.pem") + ": no such file or directory (line 3)"
			}},
		{"a client key that is not there", "etcd:\n  machines: [127.0.0.1:1]\n  cert: cert.pem\n  key: missing-key.pem\n",
			func(dir string) string {
				return "etcd.key: open " + filepath.Join(dir, "missing-key.pem") + ": no such file or directory (line 4)"
			}},
		{"a client certificate without its key", "etcd:\n  machines: [127.0.0.1:1]\n  cert: cert.pem\n",
			func(string) string {
				return "etcd.key: missing: etcd.cert is set, and a client certificate needs both"
			}},
		{"an endpoint without its port", "etcd:\n  machines: [localhost]\n",
			func(string) string {
				return `etcd.machines: endpoint "localhost": not host:port, http://host:port or https://host:port (line 2)`
			}},
	} {
		t.Run(c.name+" is refused in one line naming the config file and the key", func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "storage.yaml")
			require.NoError(t, os.WriteFile(file, []byte(c.doc), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("not read this far\n"), 0o644))
			want := "invalid_argument: config " + file + ": " + c.want(dir) + "\n"
			res, err := testenv.Run(testenv.Bin(t, "storage"), dir, []byte(`{"nodename":"n1","resource":{"storage":"1T"}}`), "add-node")
			require.NoError(t, err)
			require.Equal(t, 128, res.Code)
			require.Equal(t, "storage: add-node: node n1: "+want, res.Stderr)
			res, err = testenv.Run(testenv.Bin(t, "storage"), dir, nil, "nodes", "list")
			require.NoError(t, err)
			require.Equal(t, 2, res.Code)
			require.Equal(t, "storage: nodes list: "+want, res.Stderr)
			env := &testenv.Env{Dir: dir}
			requireNoLocalStore(t, env)
		})
	}
}

package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestResolveOrder(t *testing.T) {
	wd := t.TempDir()
	local := filepath.Join(wd, "storage.yaml")
	require.NoError(t, os.WriteFile(local, nil, 0o644))
	cases := []struct {
		name, explicit, env, want string
	}{
		{"--config wins over everything", "/etc/eru/x.yaml", "/etc/eru/env.yaml", "/etc/eru/x.yaml"},
		{"the environment variable comes next", "", "/etc/eru/env.yaml", "/etc/eru/env.yaml"},
		{"then <name>.yaml in the working directory", "", "", local},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvPath, c.env)
			got, err := Resolve(c.explicit, "storage", wd)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
	t.Run("and nothing at all means the built-in defaults", func(t *testing.T) {
		t.Setenv(EnvPath, "")
		got, err := Resolve("", "compute", wd)
		require.NoError(t, err)
		require.Empty(t, got)
	})
}

func TestParse(t *testing.T) {
	t.Run("a copy of core's config works: unknown keys are ignored", func(t *testing.T) {
		cfg, err := Parse([]byte(`
bind: ":5001"
etcd:
  machines: ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]
  prefix: /eru/
  auth: {username: eru, password: secret}
  lock_prefix: "core/_lock"
scheduler:
  maxshare: -1
  max_deploy_count: 500
resource_plugin: {dir: /etc/eru/plugins, call_timeout: 10s}
`), "/etc/eru/core.yaml")
		require.NoError(t, err)
		require.Equal(t, []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"}, cfg.Etcd.Machines)
		require.Equal(t, "/eru", cfg.Etcd.Prefix, "a trailing slash is dropped")
		require.Equal(t, "eru", cfg.Etcd.Username)
		require.Equal(t, "secret", cfg.Etcd.Password)
		require.Equal(t, 500, cfg.Scheduler.MaxDeployCount)
		require.Equal(t, 3*time.Second, cfg.Etcd.CallTimeout, "defaults fill what is left out")
		require.True(t, cfg.UsesEtcd())
	})
	t.Run("relative paths are relative to the file's folder", func(t *testing.T) {
		cfg, err := Parse([]byte("embedded:\n  path: state/x.db\nlog:\n  file: plugin.log\netcd:\n  ca: ca.pem\n"), "/etc/eru/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, "/etc/eru/state/x.db", cfg.Embedded.Path)
		require.Equal(t, "/etc/eru/plugin.log", cfg.Log.File)
		require.Equal(t, "/etc/eru/ca.pem", cfg.Etcd.CA)
		require.False(t, cfg.UsesEtcd())
	})
	t.Run("the node registry keys are read", func(t *testing.T) {
		cfg, err := Parse([]byte("nodes:\n  require_session: true\n  session_ttl: 10s\n  clock_skew_tolerance: 1s\n  memory_tight_bytes: 1G\n"), "/x/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, Nodes{RequireSession: true, SessionTTL: 10 * time.Second, ClockSkewTolerance: time.Second, MemoryTightBytes: 1 << 30}, cfg.Nodes)
	})
	t.Run("an empty file is the defaults", func(t *testing.T) {
		cfg, err := Parse(nil, "/x/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, 10000, cfg.Scheduler.MaxDeployCount)
		require.Equal(t, "/x/eru-resources.db", cfg.Embedded.Path)
	})
	for _, c := range []struct{ name, doc, want string }{
		{"malformed YAML", "etcd: [", "config /x/storage.yaml: yaml: "},
		{"a document that is a list", "- a\n- b\n", "the document is not a mapping of keys"},
		{"a duration that is not one", "etcd:\n  call_timeout: soon\n", `etcd.call_timeout: "soon" is not a positive duration`},
		{"a negative duration", "embedded:\n  lock_timeout: -1s\n", "embedded.lock_timeout"},
		{"a count that is not an integer", "scheduler:\n  max_deploy_count: many\n", `scheduler.max_deploy_count: "many" is not an integer`},
		{"a count out of range", "scheduler:\n  max_deploy_count: 0\n", "scheduler.max_deploy_count: 0 is not between 1 and 1000000"},
		{"a flag that is not a boolean", "nodes:\n  require_session: maybe\n", `nodes.require_session: "maybe" is not true or false`},
		{"a size that is not one", "nodes:\n  memory_tight_bytes: lots\n", "nodes.memory_tight_bytes"},
		{"machines given as a mapping", "etcd:\n  machines: {a: b}\n", "etcd.machines: want a list of strings"},
		{"a prefix without a leading slash", "etcd:\n  prefix: eru\n", `etcd.prefix: "eru" must start with /`},
	} {
		t.Run(c.name+" is an error naming the file and the key", func(t *testing.T) {
			_, err := Parse([]byte(c.doc), "/x/storage.yaml")
			require.ErrorContains(t, err, c.want)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
}

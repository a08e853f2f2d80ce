package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestResolveOrder(t *testing.T) {
	write := func(t *testing.T, dir string, names ...string) {
		for _, n := range names {
			require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o644))
		}
	}
	cases := []struct {
		name          string
		files         []string
		explicit, env string
		want          string // file name in the working directory, or an absolute path
		source        Source
	}{
		{"--config wins over everything", []string{"storage.yaml"}, "/etc/eru/x.yaml", "/etc/eru/env.yaml", "/etc/eru/x.yaml", FromFlag},
		{"the environment variable comes next", []string{"storage.yaml"}, "", "/etc/eru/env.yaml", "/etc/eru/env.yaml", FromEnv},
		{"then <name>.yaml in the working directory", []string{"storage.yaml", "compute.yaml", SharedName}, "", "", "storage.yaml", FromWorkdir},
		{"then the sibling plugin's file, so both find one store", []string{"compute.yaml", SharedName}, "", "", "compute.yaml", FromSibling},
		{"then the shared eru-resources.yaml", []string{SharedName}, "", "", SharedName, FromShared},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wd := t.TempDir()
			write(t, wd, c.files...)
			t.Setenv(EnvPath, c.env)
			got, err := Find(c.explicit, "storage", wd)
			require.NoError(t, err)
			want := c.want
			if !filepath.IsAbs(want) {
				want = filepath.Join(wd, want)
			}
			require.Equal(t, want, got.File)
			require.Equal(t, c.source, got.Source)
		})
	}
	t.Run("compute finds storage's file the same way", func(t *testing.T) {
		wd := t.TempDir()
		write(t, wd, "storage.yaml")
		t.Setenv(EnvPath, "")
		got, err := Resolve("", "compute", wd)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(wd, "storage.yaml"), got)
	})
	t.Run("nothing at all means the built-in defaults, and says where it looked", func(t *testing.T) {
		wd := t.TempDir()
		t.Setenv(EnvPath, "")
		got, err := Find("", "compute", wd)
		require.NoError(t, err)
		require.Empty(t, got.File)
		require.Equal(t, FromDefaults, got.Source)
		require.Equal(t, []string{"--config", "$" + EnvPath, filepath.Join(wd, "compute.yaml"), filepath.Join(wd, "storage.yaml"), filepath.Join(wd, SharedName)}, got.Searched)
	})
	t.Run("a folder where a config file is looked for is an error", func(t *testing.T) {
		wd := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(wd, "storage.yaml"), 0o755))
		t.Setenv(EnvPath, "")
		_, err := Find("", "storage", wd)
		require.ErrorContains(t, err, "storage.yaml: is a folder")
	})
}

func TestLoad(t *testing.T) {
	t.Run("the built-in defaults say so, with where they looked and which store they use", func(t *testing.T) {
		wd := t.TempDir()
		t.Chdir(wd)
		t.Setenv(EnvPath, "")
		cfg, err := Load("", "storage")
		require.NoError(t, err)
		require.True(t, cfg.Defaulted())
		notice := cfg.DefaultsNotice()
		require.Contains(t, notice, "using built-in defaults and the embedded store "+filepath.Join(wd, DefaultFile))
		require.Contains(t, notice, filepath.Join(wd, SharedName))
		require.Equal(t, "config", cfg.LogAttr().Key)
	})
	t.Run("a file found says nothing on stderr and logs which file it is", func(t *testing.T) {
		wd := t.TempDir()
		t.Chdir(wd)
		t.Setenv(EnvPath, "")
		require.NoError(t, os.WriteFile(filepath.Join(wd, "compute.yaml"), []byte("embedded: {path: x.db}\n"), 0o600))
		cfg, err := Load("", "storage")
		require.NoError(t, err)
		require.False(t, cfg.Defaulted())
		require.Empty(t, cfg.DefaultsNotice())
		require.Equal(t, FromSibling, cfg.Source)
		require.Equal(t, filepath.Join(wd, "x.db"), cfg.Embedded.Path)
		require.Contains(t, cfg.LogAttr().String(), filepath.Join(wd, "compute.yaml"))
	})
	for _, c := range []struct {
		name string
		mode os.FileMode
		doc  string
		warn bool
	}{
		{"a password in a file every user can read is warned of", 0o644, "etcd: {auth: {username: eru, password: s3cret}}\n", true},
		{"a password in a file only its owner and group read is not", 0o640, "etcd: {auth: {username: eru, password: s3cret}}\n", false},
		{"a world-readable file without a password is not", 0o644, "etcd: {prefix: /x}\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "storage.yaml")
			require.NoError(t, os.WriteFile(file, []byte(c.doc), 0o600))
			require.NoError(t, os.Chmod(file, c.mode))
			cfg, err := Load(file, "storage")
			require.NoError(t, err)
			if !c.warn {
				require.Empty(t, cfg.Warnings)
				return
			}
			require.Len(t, cfg.Warnings, 1)
			require.Contains(t, cfg.Warnings[0], file+" holds etcd.auth.password and every user of this host can read it (mode 0644)")
			require.NotContains(t, cfg.Warnings[0], "s3cret")
		})
	}
	t.Run("a config file larger than a config may be is refused naming it and the limit, unparsed", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "storage.yaml")
		data := []byte("embedded: {path: x.db}\n" + strings.Repeat("# padding\n", MaxFileSize/10))
		require.NoError(t, os.WriteFile(file, data, 0o644))
		_, err := Load(file, "storage")
		require.EqualError(t, err, "config: "+file+": larger than 1048576 bytes, the most a config file may hold")
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		t.Run("and one at the limit is read", func(t *testing.T) {
			require.NoError(t, os.WriteFile(file, data[:MaxFileSize], 0o644))
			cfg, err := Load(file, "storage")
			require.NoError(t, err)
			require.Equal(t, filepath.Join(filepath.Dir(file), "x.db"), cfg.Embedded.Path)
		})
	})
	t.Run("a config file that does not exist is an error naming it", func(t *testing.T) {
		_, err := Load("/nonexistent/storage.yaml", "storage")
		require.ErrorContains(t, err, "config: open /nonexistent/storage.yaml")
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
	})
	t.Run("a config file named by the environment that does not exist says the environment named it", func(t *testing.T) {
		t.Setenv(EnvPath, "/nonexistent/from-env.yaml")
		_, err := Load("", "storage")
		require.EqualError(t, err, "config named by $"+EnvPath+": open /nonexistent/from-env.yaml: no such file or directory",
			"an operator who gave no --config must learn where the path came from")
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
	})
}

func TestParse(t *testing.T) {
	t.Run("a copy of core's config works: its own keys in our sections and its other sections are left alone", func(t *testing.T) {
		cfg, err := Parse([]byte(`
log_level: INFO
bind: ":5001"
wal_file: core.wal
auth: {username: admin, password: admin}
grpc: {max_concurrent_streams: 100}
etcd:
  machines: ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]
  prefix: /eru/
  lock_prefix: "core/_lock"
  auth: {username: eru, password: secret}
docker:
  version: "1.32"
  log: {type: journald}
scheduler:
  maxshare: -1
  sharebase: 100
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
	t.Run("an alias stands for its anchor", func(t *testing.T) {
		cfg, err := Parse([]byte(`
.shared: &etcd
  machines: ["http://10.0.0.9:2379"]
  prefix: /anchored
etcd: *etcd
`), "/x/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, []string{"http://10.0.0.9:2379"}, cfg.Etcd.Machines)
		require.Equal(t, "/anchored", cfg.Etcd.Prefix)
	})
	t.Run("aliases of lists and values work too", func(t *testing.T) {
		cfg, err := Parse([]byte(`
_: {m: &m ["http://10.0.0.7:2379", "http://10.0.0.8:2379"], p: &p /aliased, t: &t 7s}
etcd: {machines: *m, prefix: *p, call_timeout: *t}
`), "/x/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, []string{"http://10.0.0.7:2379", "http://10.0.0.8:2379"}, cfg.Etcd.Machines)
		require.Equal(t, "/aliased", cfg.Etcd.Prefix)
		require.Equal(t, 7*time.Second, cfg.Etcd.CallTimeout)
	})
	t.Run("a merge key brings in the anchor's keys and the keys written win", func(t *testing.T) {
		cfg, err := Parse([]byte(`
x-base: &base
  machines: ["http://10.0.0.9:2379"]
  prefix: /base
  dial_timeout: 5s
etcd:
  prefix: /mine
  <<: *base
`), "/x/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, []string{"http://10.0.0.9:2379"}, cfg.Etcd.Machines)
		require.Equal(t, "/mine", cfg.Etcd.Prefix)
		require.Equal(t, 5*time.Second, cfg.Etcd.DialTimeout)
	})
	t.Run("of several merged mappings the first wins", func(t *testing.T) {
		cfg, err := Parse([]byte(`
_a: &a {prefix: /a}
_b: &b {prefix: /b, call_timeout: 9s}
etcd: {<<: [*a, *b]}
`), "/x/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, "/a", cfg.Etcd.Prefix)
		require.Equal(t, 9*time.Second, cfg.Etcd.CallTimeout)
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
	t.Run("a key set to nothing keeps its default", func(t *testing.T) {
		cfg, err := Parse([]byte("etcd:\n  prefix:\n  call_timeout: ~\nnodes:\n"), "/x/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, "/eru-resources", cfg.Etcd.Prefix)
		require.Equal(t, 3*time.Second, cfg.Etcd.CallTimeout)
	})
	t.Run("a session ttl at the heartbeat's limit is taken", func(t *testing.T) {
		cfg, err := Parse([]byte("nodes:\n  session_ttl: 10m\n"), "/x/storage.yaml")
		require.NoError(t, err)
		require.Equal(t, 10*time.Minute, cfg.Nodes.SessionTTL)
	})
	t.Run("an empty file is the defaults", func(t *testing.T) {
		for _, doc := range []string{"", "\n", "# nothing\n", "---\n"} {
			cfg, err := Parse([]byte(doc), "/x/storage.yaml")
			require.NoError(t, err)
			require.Equal(t, 10000, cfg.Scheduler.MaxDeployCount)
			require.Equal(t, "/x/eru-resources.db", cfg.Embedded.Path)
		}
	})
	for _, c := range []struct{ name, doc, want string }{
		{"malformed YAML", "etcd: [", "config /x/storage.yaml: yaml: "},
		{"a document that is a list", "- a\n- b\n", "the document is not a mapping of keys"},
		{"a second document", "etcd: {}\n---\nembedded: {}\n", "holds a second YAML document (line 2)"},
		{"a duration that is not one", "etcd:\n  call_timeout: soon\n", `etcd.call_timeout: "soon" is not a positive duration like 2s or 500ms (line 2)`},
		{"a negative duration", "embedded:\n  lock_timeout: -1s\n", "embedded.lock_timeout"},
		{"a count that is not an integer", "scheduler:\n  max_deploy_count: many\n", `scheduler.max_deploy_count: "many" is not an integer`},
		{"a count out of range", "scheduler:\n  max_deploy_count: 0\n", "scheduler.max_deploy_count: 0 is not between 1 and 1000000"},
		{"a session ttl above what a heartbeat's session may live", "nodes:\n  session_ttl: 11m\n",
			`nodes.session_ttl: "11m" is longer than a heartbeat's session may live: want at most 10m0s (line 2)`},
		{"a session ttl given in hours", "nodes:\n  require_session: true\n  session_ttl: 1h\n", `nodes.session_ttl: "1h" is longer than a heartbeat's session may live: want at most 10m0s (line 3)`},
		{"a flag that is not a boolean", "nodes:\n  require_session: maybe\n", `nodes.require_session: "maybe" is not true or false`},
		{"a size that is not one", "nodes:\n  memory_tight_bytes: lots\n", `nodes.memory_tight_bytes: "lots" is not a size`},
		{"machines given as a mapping", "etcd:\n  machines: {a: b}\n", "etcd.machines: want a list of strings, got a mapping"},
		{"a string given as a list", "log:\n  file: [a, b]\n", "log.file: want a single value, got a list"},
		{"a section given as a value", "etcd: http://10.0.0.1:2379\n", "etcd: want a mapping of keys, got a value (line 1)"},
		{"a prefix without a leading slash", "etcd:\n  prefix: eru\n", `etcd.prefix: "eru" must start with /`},
		{"an empty store path", "embedded:\n  path: ''\n", "embedded.path: empty"},
		{"a user name without a password", "etcd:\n  auth: {username: eru}\n", `etcd.auth.password: missing: etcd.auth.username "eru" is set`},
		{"a password without a user name", "etcd:\n  auth: {password: x}\n", "etcd.auth.username: missing"},
		{"a merge of something that is not a mapping", "etcd:\n  <<: 5\n", "etcd: a merge key (<<) must name a mapping or a list of mappings"},
	} {
		t.Run(c.name+" is an error naming the file and the key", func(t *testing.T) {
			_, err := Parse([]byte(c.doc), "/x/storage.yaml")
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "config /x/storage.yaml: ")
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
}

func TestUnknownAndDuplicateKeys(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"a misspelt etcd key", "etcd:\n  machine: [http://a:2379]\n", "etcd.machine: unknown key; did you mean etcd.machines? (line 2)"},
		{"a misspelt embedded key", "embedded:\n  pth: x.db\n", "embedded.pth: unknown key; did you mean embedded.path?"},
		{"a misspelt key under etcd.auth", "etcd:\n  auth: {user: eru, password: x}\n", "etcd.auth.user: unknown key; did you mean etcd.auth.username?"},
		{"a misspelt scheduler key", "scheduler:\n  max_deploy: 5\n", "scheduler.max_deploy: unknown key; did you mean scheduler.max_deploy_count?"},
		{"a misspelt log key", "log:\n  fiel: x.log\n", "log.fiel: unknown key; did you mean log.file?"},
		{"a misspelt nodes key", "nodes:\n  session_tll: 5s\n", "nodes.session_tll: unknown key; did you mean nodes.session_ttl?"},
		{"an unknown key brought in by a merge", "_b: &b {machine: x}\netcd:\n  <<: *b\n", "etcd.machine: unknown key; did you mean etcd.machines? (line 1)"},
		{"a misspelt section", "embeded:\n  path: x.db\n", "embeded: unknown section; did you mean embedded?"},
		{"a section named in the singular", "node:\n  require_session: true\n", "node: unknown section; did you mean nodes?"},
		{"a key given twice", "etcd:\n  prefix: /a\n  prefix: /b\n", "etcd.prefix: key given twice, first at line 2 (line 3)"},
		{"a section given twice", "etcd: {}\nembedded: {}\netcd: {}\n", "etcd: key given twice, first at line 1 (line 3)"},
		{"a key given twice in a section core owns", "docker:\n  hub: a\n  hub: b\n", "docker.hub: key given twice"},
		{"a merge key given twice", "_a: &a {prefix: /a}\netcd:\n  <<: *a\n  <<: *a\n", "etcd.<<: key given twice"},
	} {
		t.Run(c.name+" is refused naming it", func(t *testing.T) {
			_, err := Parse([]byte(c.doc), "/x/storage.yaml")
			require.ErrorContains(t, err, "config /x/storage.yaml: "+c.want)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
	for _, c := range []struct{ name, doc string }{
		{"core's own keys in our sections", "etcd:\n  lock_prefix: __lock__/eru\nscheduler:\n  maxshare: -1\n  sharebase: 100\n"},
		{"sections of core's and of others", "docker: {network_mode: host}\nvirt: {version: v1}\nmy_tool: {anything: 1}\n"},
		{"keys that only hold anchors", ".etcd: &e {machines: [x]}\n_base: &b {}\nx-embedded: &m {}\n"},
		{"a core key that looks like one of ours", "store: etcd\n"},
	} {
		t.Run(c.name+" are accepted", func(t *testing.T) {
			_, err := Parse([]byte(c.doc), "/x/storage.yaml")
			require.NoError(t, err)
		})
	}
}

func TestMergesOfMergesAreRefusedAtOnce(t *testing.T) {
	// Ten mappings, each merging the one before ten times: 500 bytes that
	// stand for 10^9 merges. yaml.v3 refuses such a document as excessive
	// aliasing; the checks before it must not walk every merge first.
	var doc strings.Builder
	doc.WriteString("_a0: &a0 {prefix: /x}\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&doc, "_a%d: &a%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ","))
	}
	for _, section := range []string{"etcd", "serve"} {
		t.Run("merged into "+section+", it is an error naming the file within a second", func(t *testing.T) {
			data := []byte(doc.String() + section + ": {<<: *a9}\n")
			done := make(chan error, 1)
			go func() {
				cfg, err := Parse(data, "/x/storage.yaml")
				if err == nil {
					var s struct {
						Prefix string `yaml:"prefix"`
					}
					err = cfg.DecodeSection("serve", &s)
				}
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorContains(t, err, "config /x/storage.yaml: ")
				require.ErrorContains(t, err, "excessive aliasing")
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			case <-time.After(time.Second):
				t.Fatal("the config was still being checked after a second")
			}
		})
	}
}

func TestDecodeSection(t *testing.T) {
	type serve struct {
		Socket string `yaml:"socket"`
		Statsd struct {
			Address  string        `yaml:"address"`
			Interval time.Duration `yaml:"interval"`
		} `yaml:"statsd"`
		UIDs   []int `yaml:"uids"`
		Routes []struct {
			Path string `yaml:"path"`
		} `yaml:"routes"`
	}
	t.Run("the serve section decodes into the daemon's own struct, merges included", func(t *testing.T) {
		cfg, err := Parse([]byte("_s: &s {address: 'localhost:8125'}\nserve:\n  socket: /run/eru.sock\n  statsd: {<<: *s, interval: 5s}\n"), "/x/storage.yaml")
		require.NoError(t, err)
		var s serve
		require.NoError(t, cfg.DecodeSection("serve", &s))
		require.Equal(t, "/run/eru.sock", s.Socket)
		require.Equal(t, "localhost:8125", s.Statsd.Address)
		require.Equal(t, 5*time.Second, s.Statsd.Interval)
	})
	t.Run("an absent section leaves the struct alone", func(t *testing.T) {
		cfg, err := Parse([]byte("etcd: {}\n"), "/x/storage.yaml")
		require.NoError(t, err)
		s := serve{Socket: "default"}
		require.NoError(t, cfg.DecodeSection("serve", &s))
		require.Equal(t, "default", s.Socket)
	})
	for _, c := range []struct{ name, doc, want string }{
		{"an unknown key", "serve:\n  sokcet: /run/x\n", "serve.sokcet: unknown key; did you mean serve.socket? (line 2)"},
		{"a nested unknown key", "serve:\n  statsd: {adress: x}\n", "serve.statsd.adress: unknown key; did you mean serve.statsd.address?"},
		{"a value of the wrong kind", "serve:\n  statsd: {interval: [1]}\n", "serve.statsd.interval: want a duration like 2s or 500ms, got a list (line 2)"},
		{"a duration that is not one", "serve:\n  statsd:\n    interval: soon\n", `serve.statsd.interval: "soon" is not a duration like 2s or 500ms (line 3)`},
		{"a wrong item of a list", "serve:\n  uids:\n    - 1000\n    - abc\n", `serve.uids[1]: "abc" is not an integer (line 4)`},
		{"an unknown key in an item of a list", "serve:\n  routes:\n    - path: /a\n    - {path: /b, pth: /c}\n", "serve.routes[1].pth: unknown key; did you mean serve.routes[1].path? (line 4)"},
	} {
		t.Run(c.name+" is refused naming the file and the key", func(t *testing.T) {
			cfg, err := Parse([]byte(c.doc), "/x/storage.yaml")
			require.NoError(t, err, "the section's content is the daemon's to judge")
			var s serve
			err = cfg.DecodeSection("serve", &s)
			require.ErrorContains(t, err, "config /x/storage.yaml: "+c.want)
		})
	}
	t.Run("a section that is not a mapping is refused when the file is read", func(t *testing.T) {
		_, err := Parse([]byte("flowcontrol: 5\n"), "/x/storage.yaml")
		require.ErrorContains(t, err, "flowcontrol: want a mapping of keys")
	})
}

func TestFlagFromArgs(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		path string
		rest []string
	}{
		{"before the command", []string{"--config", "f.yaml", "nodes", "list"}, "f.yaml", []string{"nodes", "list"}},
		{"after the command", []string{"nodes", "list", "--config", "f.yaml"}, "f.yaml", []string{"nodes", "list"}},
		{"between a command's flags, with =", []string{"nodes", "drain", "-o", "table", "--config=f.yaml", "n1"}, "f.yaml", []string{"nodes", "drain", "-o", "table", "n1"}},
		{"with one dash", []string{"-config", "f.yaml", "name"}, "f.yaml", []string{"name"}},
		{"absent", []string{"nodes", "list"}, "", []string{"nodes", "list"}},
		{"after --, where it is an argument", []string{"nodes", "get", "--", "--config"}, "", []string{"nodes", "get", "--", "--config"}},
	} {
		t.Run("--config "+c.name+" is found", func(t *testing.T) {
			path, rest, err := FlagFromArgs(c.args)
			require.NoError(t, err)
			require.Equal(t, c.path, path)
			require.Equal(t, c.rest, rest)
		})
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"without a value", []string{"nodes", "list", "--config"}, "--config: want a file name"},
		{"with an empty value", []string{"--config=", "name"}, "--config: empty file name"},
		{"given twice", []string{"--config", "a", "nodes", "list", "--config", "b"}, "--config given twice (a and b)"},
	} {
		t.Run("--config "+c.name+" is an error", func(t *testing.T) {
			_, _, err := FlagFromArgs(c.args)
			require.ErrorContains(t, err, c.want)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
}

func TestOpenLog(t *testing.T) {
	t.Run("no log file configured opens nothing", func(t *testing.T) {
		f, err := Default(t.TempDir()).OpenLog()
		require.NoError(t, err)
		require.Nil(t, f)
	})
	t.Run("a log file is created and appended to", func(t *testing.T) {
		cfg := Default(t.TempDir())
		cfg.Log.File = filepath.Join(t.TempDir(), "plugin.log")
		f, err := cfg.OpenLog()
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.FileExists(t, cfg.Log.File)
	})
	t.Run("a log file that cannot be opened is an error naming the key and the file", func(t *testing.T) {
		cfg, err := Parse([]byte("log:\n  file: missing/folder/plugin.log\n"), "/x/storage.yaml")
		require.NoError(t, err)
		_, err = cfg.OpenLog()
		require.ErrorContains(t, err, "config /x/storage.yaml: log.file: open /x/missing/folder/plugin.log: ")
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
	})
}

func TestLogger(t *testing.T) {
	t.Run("every line names the config, and its warnings come first", func(t *testing.T) {
		dir := t.TempDir()
		cfg, err := Parse([]byte("log:\n  file: plugin.log\n"), filepath.Join(dir, "storage.yaml"))
		require.NoError(t, err)
		cfg.Source = FromWorkdir
		cfg.Warnings = []string{"a warning"}
		log, closeLog, err := cfg.Logger("storage", true)
		require.NoError(t, err)
		log.Info("verb", "verb", "add-node")
		closeLog()
		data, err := os.ReadFile(filepath.Join(dir, "plugin.log"))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		require.Len(t, lines, 2)
		require.Contains(t, lines[0], `"level":"WARN","msg":"config"`)
		require.Contains(t, lines[0], `"warning":"a warning"`)
		require.Contains(t, lines[1], `"plugin":"storage"`)
		require.Contains(t, lines[1], `"config":{"file":"`+filepath.Join(dir, "storage.yaml")+`","source":"the plugin's own file"}`)
	})
	cfg, err := Parse([]byte("log:\n  file: /nonexistent/folder/plugin.log\n"), "/x/storage.yaml")
	require.NoError(t, err)
	t.Run("a log file that cannot be opened fails an operator command", func(t *testing.T) {
		_, _, err := cfg.Logger("storage", true)
		require.ErrorContains(t, err, "config /x/storage.yaml: log.file: open /nonexistent/folder/plugin.log")
	})
	t.Run("and a plugin verb goes on without a log", func(t *testing.T) {
		log, closeLog, err := cfg.Logger("storage", false)
		require.NoError(t, err)
		log.Info("nothing")
		closeLog()
	})
}

func TestTheSamplesParse(t *testing.T) {
	for _, name := range []string{"storage.yaml.sample", "compute.yaml.sample"} {
		t.Run(name+" is a valid config", func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", name))
			require.NoError(t, err)
			cfg, err := Parse(data, "/etc/eru/"+name)
			require.NoError(t, err)
			require.Equal(t, "/etc/eru/eru-resources.db", cfg.Embedded.Path)
			require.False(t, cfg.UsesEtcd(),
				"the README's install says the samples ship with etcd.machines commented out: on the embedded store")
		})
	}
}

package serve

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseConfig(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		check     func(t *testing.T, c Config)
		err       string
	}{
		{"no serve section gives the defaults", "etcd:\n  prefix: /x\n", func(t *testing.T, c Config) {
			require.Equal(t, "/etc/eru/eru-resources.sock", c.Socket)
			require.Equal(t, os.FileMode(0o660), c.Mode())
			require.Equal(t, 5*time.Second, c.ShutdownGrace)
			require.Equal(t, time.Second, c.CacheWait)
			require.Equal(t, 15*time.Second, c.Statsd.Interval)
		}, ""},
		{"relative paths are relative to the config's folder", "serve:\n  socket: run/s.sock\n  token_file: tok\n  tls: {cert: c.pem, key: k.pem, client_ca: /abs/ca.pem}\n", func(t *testing.T, c Config) {
			require.Equal(t, "/etc/eru/run/s.sock", c.Socket)
			require.Equal(t, "/etc/eru/tok", c.TokenFile)
			require.Equal(t, "/etc/eru/c.pem", c.TLS.Cert)
			require.Equal(t, "/abs/ca.pem", c.TLS.ClientCA)
		}, ""},
		{"every key is read", "serve:\n  socket_mode: \"0600\"\n  allowed_uids: [1000, 1001]\n  http: 127.0.0.1:9464\n  statsd: {address: 127.0.0.1:8125, interval: 1s, prefix: eru}\n  shutdown_grace: 2s\n  cache_wait: 250ms\n", func(t *testing.T, c Config) {
			require.Equal(t, os.FileMode(0o600), c.Mode())
			require.Equal(t, []int{1000, 1001}, c.AllowedUIDs)
			require.Equal(t, "127.0.0.1:9464", c.HTTP)
			require.Equal(t, Statsd{Address: "127.0.0.1:8125", Interval: time.Second, Prefix: "eru"}, c.Statsd)
			require.Equal(t, 2*time.Second, c.ShutdownGrace)
			require.Equal(t, 250*time.Millisecond, c.CacheWait)
		}, ""},
		{"a mode that is not octal is refused", "serve:\n  socket_mode: rw\n", nil, `serve.socket_mode: "rw" is not octal permission bits like 0660`},
		{"a certificate without its key is refused", "serve:\n  tls: {cert: c.pem}\n", nil, "serve.tls: cert and key go together"},
		{"a client CA without a certificate is refused", "serve:\n  tls: {client_ca: ca.pem}\n", nil, "serve.tls.client_ca: needs tls.cert and tls.key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.doc), "/etc/eru/storage.yaml")
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			c.check(t, cfg)
		})
	}
}

// TestParseConfigNamesTheKeyAndTheLineOfTheFile: a serve section yaml.v3
// cannot decode is refused with one line naming the file, the key as
// written, its line in the operator's file and what is wanted, in words:
// never a line of a re-encoded fragment or a Go type.
func TestParseConfigNamesTheKeyAndTheLineOfTheFile(t *testing.T) {
	const head = "etcd:\n  prefix: /x\n# the daemon's own section\nserve:\n  http: 127.0.0.1:9464\n"
	for _, c := range []struct{ name, doc, want string }{
		{"an unknown key is named with its line and the key it may mean", head + "  sokcet: /run/x.sock\n",
			"serve.sokcet: unknown key; did you mean serve.socket? (line 6)"},
		{"an unknown nested key is named with its whole path", head + "  statsd:\n    address: 127.0.0.1:8125\n    intreval: 5s\n",
			"serve.statsd.intreval: unknown key; did you mean serve.statsd.interval? (line 8)"},
		{"a duration that is not one asks for a duration", head + "  statsd:\n    interval: abc\n",
			`serve.statsd.interval: "abc" is not a duration like 2s or 500ms (line 7)`},
		{"a bare number for a duration asks for a duration", head + "  cache_wait: 5\n",
			`serve.cache_wait: "5" is not a duration like 2s or 500ms (line 6)`},
		{"a list for a duration asks for a duration", head + "  shutdown_grace: [5s]\n",
			"serve.shutdown_grace: want a duration like 2s or 500ms, got a list (line 6)"},
		{"a user id that is not a number names its place in the list", head + "  allowed_uids:\n    - 1000\n    - abc\n",
			`serve.allowed_uids[1]: "abc" is not an integer (line 8)`},
		{"a mapping where one value goes asks for a single value", head + "  socket: {path: /run/x.sock}\n",
			"serve.socket: want a single value, got a mapping (line 6)"},
		{"a value where a mapping goes asks for a mapping", head + "  tls: yes\n",
			"serve.tls: want a mapping of keys, got a value (line 6)"},
		{"a section that is not a mapping asks for one", "etcd:\n  prefix: /x\nserve: [socket]\n",
			"serve: want a mapping of keys, got a list (line 3)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.doc), "/etc/eru/storage.yaml")
			require.EqualError(t, err, "config /etc/eru/storage.yaml: "+c.want)
			for _, goName := range []string{"serve.Config", "serve.Statsd", "time.Duration", "!!str", "unmarshal"} {
				require.NotContains(t, err.Error(), goName)
			}
		})
	}
}

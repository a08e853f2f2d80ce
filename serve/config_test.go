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
		{"an unknown key is refused", "serve:\n  sockett: x\n", nil, "config /etc/eru/storage.yaml: serve: yaml: unmarshal errors: line 1: field sockett not found in type serve.Config"},
		{"a mode that is not octal is refused", "serve:\n  socket_mode: rw\n", nil, `serve.socket_mode: "rw" is not octal permission bits like 0660`},
		{"a duration that is not one is refused", "serve:\n  cache_wait: soon\n", nil, "serve: yaml"},
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

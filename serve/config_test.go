package serve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
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
		{"an HTTP address with port 0 (a free port) or a service name is taken", "serve:\n  http: 127.0.0.1:0\n", func(t *testing.T, c Config) {
			require.Equal(t, "127.0.0.1:0", c.HTTP)
			cfg, err := ParseConfig([]byte("serve:\n  http: \":https\"\n"), "/etc/eru/storage.yaml")
			require.NoError(t, err)
			require.Equal(t, ":https", cfg.HTTP)
		}, ""},
		{"an HTTP address that is not host:port is refused", "serve:\n  http: localhost\n", nil, `serve.http: "localhost" is not a listen address like 127.0.0.1:9464`},
		{"an empty socket path is refused", "serve:\n  socket: \"\"\n", nil, "serve.socket: want a path"},
		{"a mode that is not octal is refused", "serve:\n  socket_mode: rw\n", nil, `serve.socket_mode: "rw" is not octal permission bits like 0660`},
		{"a certificate without its key is refused", "serve:\n  tls: {cert: c.pem}\n", nil, "serve.tls.cert: needs serve.tls.key: cert and key go together"},
		{"a key without its certificate is refused", "serve:\n  tls: {key: k.pem}\n", nil, "serve.tls.key: needs serve.tls.cert: cert and key go together"},
		{"a client CA without a certificate is refused", "serve:\n  tls: {client_ca: ca.pem}\n", nil, "serve.tls.client_ca: needs tls.cert and tls.key"},
		{"a socket path of 107 bytes, the most a unix socket address holds, is taken", "serve:\n  socket: " + pathOf(107) + "\n", func(t *testing.T, c Config) {
			require.Equal(t, pathOf(107), c.Socket)
		}, ""},
		{"a socket path of 108 bytes is refused naming the key, its length and the limit", "serve:\n  socket: " + pathOf(108) + "\n", nil,
			"config /etc/eru/storage.yaml: serve.socket: path is 108 bytes, a unix socket path allows at most 107"},
		{"a relative socket path too long once resolved is refused saying so", "serve:\n  socket: " + strings.Repeat("s", 100) + "\n", nil,
			"config /etc/eru/storage.yaml: serve.socket: path is 109 bytes (relative to the config's folder), a unix socket path allows at most 107"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.doc), "/etc/eru/storage.yaml")
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			c.check(t, cfg)
		})
	}
}

// pathOf is an absolute path of n bytes.
func pathOf(n int) string {
	return "/" + strings.Repeat("p", n-len("/.sock")) + ".sock"
}

// TestTheDefaultSocketIsCheckedToo: a config file in a folder so deep that
// the default socket beside it does not fit an address is refused the same
// way, saying the path is the default; so is the working directory's
// default when there is no config file.
func TestTheDefaultSocketIsCheckedToo(t *testing.T) {
	deep := "/" + strings.Repeat("d", 100)
	t.Run("beside a config file", func(t *testing.T) {
		_, err := ParseConfig([]byte("etcd:\n  prefix: /x\n"), deep+"/storage.yaml")
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		require.EqualError(t, err, "config "+deep+"/storage.yaml: serve.socket: path is 120 bytes (the default, eru-resources.sock beside the config file), a unix socket path allows at most 107")
	})
	t.Run("in the working directory without a config file", func(t *testing.T) {
		_, err := LoadConfig("", deep)
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		require.EqualError(t, err, "serve.socket: path is 120 bytes (the default, eru-resources.sock in the working directory), a unix socket path allows at most 107")
	})
}

// TestReadHTTPFiles: the files the serve section names for HTTP are read
// before the daemon creates anything; one that is missing, empty or not
// what its key wants is the operator's configuration error
// (invalid_argument), on one line naming the key and the path.
func TestReadHTTPFiles(t *testing.T) {
	dir := t.TempDir()
	writeSelfSigned(t, dir, "server")
	writeSelfSigned(t, dir, "other")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tok"), []byte("s3cret\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), []byte(" \n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "text"), []byte("not a certificate\n"), 0o600))
	file := filepath.Join(dir, "storage.yaml")
	at := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		name, section string
		err           string // the whole message; "" for none
		check         func(t *testing.T, f HTTPFiles)
	}{
		{"a token file and TLS files that are there are read", "token_file: tok\n  tls: {cert: server.pem, key: server-key.pem, client_ca: other.pem}", "", func(t *testing.T, f HTTPFiles) {
			require.Equal(t, "s3cret", f.Token)
			require.NotNil(t, f.TLS)
			require.Len(t, f.TLS.Certificates, 1)
			require.Equal(t, tls.RequireAndVerifyClientCert, f.TLS.ClientAuth)
		}},
		{"without files there is no token and no TLS", "http: 127.0.0.1:0", "", func(t *testing.T, f HTTPFiles) {
			require.Equal(t, HTTPFiles{}, f)
		}},
		{"a missing token file is refused naming the key and the path", "token_file: nope.tok",
			"config " + file + ": serve.token_file: open " + at("nope.tok") + ": no such file or directory", nil},
		{"an empty token file is refused naming the key and the path", "token_file: empty",
			"config " + file + ": serve.token_file: " + at("empty") + " is empty", nil},
		{"a missing certificate is refused naming the key and the path", "tls: {cert: nope.pem, key: server-key.pem}",
			"config " + file + ": serve.tls.cert: open " + at("nope.pem") + ": no such file or directory", nil},
		{"a missing key is refused naming the key and the path", "tls: {cert: server.pem, key: nope-key.pem}",
			"config " + file + ": serve.tls.key: open " + at("nope-key.pem") + ": no such file or directory", nil},
		{"a key of another certificate is refused naming both keys and paths", "tls: {cert: server.pem, key: other-key.pem}",
			"config " + file + ": serve.tls.cert " + at("server.pem") + ", serve.tls.key " + at("other-key.pem") + ": tls: private key does not match public key", nil},
		{"a missing client CA is refused naming the key and the path", "tls: {cert: server.pem, key: server-key.pem, client_ca: nope-ca.pem}",
			"config " + file + ": serve.tls.client_ca: open " + at("nope-ca.pem") + ": no such file or directory", nil},
		{"a client CA with no certificate in it is refused naming the key and the path", "tls: {cert: server.pem, key: server-key.pem, client_ca: text}",
			"config " + file + ": serve.tls.client_ca: " + at("text") + ": no certificate in it", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, err := ParseConfig([]byte("serve:\n  "+c.section+"\n"), file)
			require.NoError(t, err)
			f, err := sc.ReadHTTPFiles(file)
			if c.err != "" {
				require.EqualError(t, err, c.err)
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.Equal(t, 2, types.ClassOf(err).ExitCode())
				return
			}
			require.NoError(t, err)
			c.check(t, f)
		})
	}
}

// writeSelfSigned writes NAME.pem and NAME-key.pem, a self-signed
// certificate for 127.0.0.1 and its key, in dir.
func writeSelfSigned(t *testing.T, dir, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+"-key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
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
		{"a mode that is not octal names its line", head + "  socket_mode: \"0999\"\n",
			`serve.socket_mode: "0999" is not octal permission bits like 0660 (line 6)`},
		{"a listen address that is not host:port names its line", "serve:\n  http: nonsense\n",
			`serve.http: "nonsense" is not a listen address like 127.0.0.1:9464 (line 2)`},
		{"a negative user id names its place in the list and its line", head + "  allowed_uids:\n    - 1000\n    - -1\n",
			"serve.allowed_uids[1]: -1 is not a user id (0 to 4294967294) (line 8)"},
		{"a user id past uid_t names the limit", head + "  allowed_uids: [4294967295]\n",
			"serve.allowed_uids[0]: 4294967295 is not a user id (0 to 4294967294) (line 6)"},
		{"a zero duration names its line", head + "  statsd:\n    interval: 0s\n",
			"serve.statsd.interval: want a positive duration (line 7)"},
		{"a value from a merge key names the line it is written on", "defaults: &d\n  shutdown_grace: -1s\nserve:\n  <<: *d\n",
			"serve.shutdown_grace: want a positive duration (line 2)"},
		{"a socket path too long names its line", head + "  socket: " + pathOf(108) + "\n",
			"serve.socket: path is 108 bytes, a unix socket path allows at most 107 (line 6)"},
		{"a certificate without its key names the certificate's line", head + "  tls:\n    cert: c.pem\n",
			"serve.tls.cert: needs serve.tls.key: cert and key go together (line 7)"},
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

// TestAStatsdAddressThatIsNotHostPortIsRefusedAtStart: serve.statsd.address
// is host:port. Without a port (or with one no datagram can go to) the
// push could never start: taken, the daemon would log that statsd is down
// and try again every interval for its whole life, pushing nothing.
func TestAStatsdAddressThatIsNotHostPortIsRefusedAtStart(t *testing.T) {
	for _, c := range []struct{ name, address, err string }{
		{"a host without a port", "127.0.0.1", `serve.statsd.address: "127.0.0.1" is not a statsd address like 127.0.0.1:8125`},
		{"a bare port", "8125", `serve.statsd.address: "8125" is not a statsd address like 127.0.0.1:8125`},
		{"port 0", "127.0.0.1:0", `serve.statsd.address: "127.0.0.1:0": port "0"`},
		{"a port out of range", "127.0.0.1:70000", `serve.statsd.address: "127.0.0.1:70000": port "70000"`},
	} {
		t.Run(c.name+" is refused naming the key", func(t *testing.T) {
			_, err := ParseConfig([]byte("serve:\n  statsd:\n    address: \""+c.address+"\"\n"), "/etc/eru/storage.yaml")
			require.ErrorContains(t, err, c.err)
			require.ErrorContains(t, err, "(line 3)")
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
	for _, address := range []string{"127.0.0.1:8125", "statsd.example:8125", ":8125", "[::1]:8125"} {
		t.Run(address+" is taken", func(t *testing.T) {
			cfg, err := ParseConfig([]byte("serve:\n  statsd:\n    address: \""+address+"\"\n"), "/etc/eru/storage.yaml")
			require.NoError(t, err)
			require.Equal(t, address, cfg.Statsd.Address)
		})
	}
}

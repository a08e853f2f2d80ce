package reliability_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/eru-extend/resources/tests/testenv"
)

// authority is a certificate authority made for one test.
type authority struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	certFile string
}

var serials = big.NewInt(1)

func nextSerial() *big.Int {
	serials.Add(serials, big.NewInt(1))
	return new(big.Int).Set(serials)
}

func newAuthority(t testing.TB, dir, name string) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	a := &authority{cert: cert, key: key, certFile: filepath.Join(dir, name+".pem")}
	writePEM(t, a.certFile, "CERTIFICATE", der)
	return a
}

// issue signs a certificate for name, a server's for 127.0.0.1 or a
// client's, and writes it and its key as PEM files.
func (a *authority) issue(t testing.TB, dir, name string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}

// securedCase is one way of configuring a plugin for a secured etcd.
type securedCase struct {
	name     string
	etcdKeys obj
	works    bool
	want     string // the failure line contains this
	code     int    // the exit status of an operator command
}

// requireRoundTrip adds the seeded node and reads it back through each
// binary, and checks an operator command works with the same config.
func requireRoundTrip(t *testing.T, env *testenv.Env) {
	t.Helper()
	for _, bin := range bins {
		var added, read map[string]json.RawMessage
		env.Call(t, bin, "add-node", obj{"nodename": seeded, "resource": seedResource[bin]}, &added)
		env.Call(t, bin, "get-node-resource-info", obj{"nodename": seeded}, &read)
		require.NotEmpty(t, added["capacity"])
		require.JSONEq(t, string(added["capacity"]), string(read["capacity"]), "%s: the capacity read back is the one added", bin)
		require.JSONEq(t, string(added["usage"]), string(read["usage"]), "%s: the usage read back is the one added", bin)
	}
	env.OpOK(t, "storage", nil, "nodes", "get", seeded)
}

// requireRefusedEverywhere runs a reading and a writing verb of each binary
// and an operator command with env's config, all of which must fail in one
// line containing want and naming the endpoint, fast; it returns the lines.
func requireRefusedEverywhere(t *testing.T, env *testenv.Env, endpoint, want string, code int) []string {
	t.Helper()
	calls := []call{
		verbCall(t, "storage", "add-node", obj{"nodename": "n2", "resource": seedResource["storage"]}),
		verbCall(t, "storage", "get-node-resource-info", obj{"nodename": seeded}),
		verbCall(t, "compute", "set-node-resource-usage", obj{"nodename": seeded, "resource_request": obj{"cpu": 1}, "delta": true, "incr": true}),
		verbCall(t, "compute", "get-nodes-deploy-capacity", obj{"nodenames": []string{seeded}, "workload_resource": obj{"cpu": 1}}),
		{bin: "storage", args: []string{"nodes", "drain", seeded}},
	}
	results := runAll(t, env, calls)
	var lines []string
	for i, c := range calls {
		var line string
		if len(c.args) == 1 {
			line = refusedVerb(t, results[i], c.bin, c.args[0])
		} else {
			line = refusedCommand(t, results[i], c.bin, "nodes drain", code)
		}
		require.Contains(t, line, want)
		require.Contains(t, line, "etcd "+endpoint+": ", "the line names the endpoint")
		require.Less(t, results[i].Took, 3500*time.Millisecond, "%s", line)
		lines = append(lines, line)
	}
	return lines
}

// TestTLSEtcdWithClientCertificates: an etcd that speaks only TLS and wants
// a client certificate signed by its CA. The plugins work with etcd.ca,
// etcd.cert and etcd.key; with a wrong CA, without a client certificate or
// with one it does not trust, every call fails in one clear line and
// nothing is written.
func TestTLSEtcdWithClientCertificates(t *testing.T) {
	skipUnderShort(t)
	dir := t.TempDir()
	ca := newAuthority(t, dir, "eru-test-ca")
	serverCert, serverKey := ca.issue(t, dir, "etcd-server", true)
	clientCert, clientKey := ca.issue(t, dir, "eru-plugin", false)
	rogue := newAuthority(t, dir, "rogue-ca")
	rogueCert, rogueKey := rogue.issue(t, dir, "rogue-plugin", false)

	server, _ := startEtcd(t, t.TempDir(), func(cfg *embed.Config) {
		u, _ := url.Parse("https://127.0.0.1:0")
		cfg.ListenClientUrls = []url.URL{*u}
		cfg.AdvertiseClientUrls = []url.URL{*u}
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: serverCert, KeyFile: serverKey, TrustedCAFile: ca.certFile, ClientCertAuth: true}
	})
	require.Regexp(t, `^https://127\.0\.0\.1:\d+$`, server.Endpoint)
	tlsCfg, err := transport.TLSInfo{CertFile: clientCert, KeyFile: clientKey, TrustedCAFile: ca.certFile}.ClientConfig()
	require.NoError(t, err)
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Endpoint}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })

	prefix := newPrefix()
	good := etcdEnv(t, nil, prefix, etcdConfig(server.Endpoint, prefix, obj{"ca": ca.certFile, "cert": clientCert, "key": clientKey}))
	t.Run("with the right CA, client certificate and key add-node and get-node-resource-info round-trip", func(t *testing.T) {
		requireRoundTrip(t, good)
		require.Contains(t, dumpEtcd(t, admin, prefix), "/resource/storage/"+seeded)
	})
	before := dumpEtcd(t, admin, prefix)
	require.NotEmpty(t, before)

	cases := []securedCase{
		{name: "a CA that did not sign the server's certificate", etcdKeys: obj{"ca": rogue.certFile, "cert": clientCert, "key": clientKey}, want: "unauthenticated: etcd " + server.Endpoint + ": unreachable: no connection within 2s: TLS: tls: failed to verify certificate: x509: certificate signed by unknown authority: etcd's certificate is not trusted (etcd.ca)", code: 10},
		{name: "no client certificate", etcdKeys: obj{"ca": ca.certFile}, want: "unauthenticated: etcd " + server.Endpoint + ": unreachable: no connection within 2s: TLS: tls: certificate required: etcd refused the client certificate (etcd.cert, etcd.key)", code: 10},
		{name: "a client certificate of a CA the server does not trust", etcdKeys: obj{"ca": ca.certFile, "cert": rogueCert, "key": rogueKey}, want: "unauthenticated: etcd " + server.Endpoint + ": unreachable: no connection within 2s: TLS: tls: unknown certificate authority: etcd refused the client certificate (etcd.cert, etcd.key)", code: 10},
		{name: "no TLS settings, so the system's roots", etcdKeys: obj{}, want: "unauthenticated: etcd " + server.Endpoint + ": unreachable: no connection within 2s: TLS: tls: failed to verify certificate: x509: certificate signed by unknown authority: etcd's certificate is not trusted (etcd.ca)", code: 10},
	}
	for _, c := range cases {
		t.Run(c.name+" fails in one line that says why, and writes nothing", func(t *testing.T) {
			env := etcdEnv(t, nil, prefix, etcdConfig(server.Endpoint, prefix, c.etcdKeys))
			requireRefusedEverywhere(t, env, server.Endpoint, c.want, c.code)
			require.Equal(t, before, dumpEtcd(t, admin, prefix))
		})
	}
	t.Run("a CA file that does not exist is an invalid argument naming the config file, the key and the path", func(t *testing.T) {
		env := etcdEnv(t, nil, prefix, etcdConfig(server.Endpoint, prefix, obj{"ca": filepath.Join(dir, "missing.pem"), "cert": clientCert, "key": clientKey}))
		line := refusedVerb(t, env.Verb(t, "storage", "get-node-resource-info", obj{"nodename": seeded}), "storage", "get-node-resource-info")
		require.Contains(t, line, "invalid_argument: config ")
		require.Contains(t, line, ": etcd.ca: open "+filepath.Join(dir, "missing.pem")+": no such file or directory")
		require.Equal(t, before, dumpEtcd(t, admin, prefix))
	})
}

// TestEtcdWithPasswordAuth: an etcd with authentication on. The plugins
// work with etcd.auth.username and etcd.auth.password; a wrong password,
// an unknown user, a user without rights on the prefix or no credentials
// fail in one clear line and write nothing; and no password ever shows in
// an error line or in the log file.
func TestEtcdWithPasswordAuth(t *testing.T) {
	skipUnderShort(t)
	const (
		rootPassword     = "root-Secret-4Kx9"
		eruPassword      = "eru-Secret-Vq72"
		strangerPassword = "stranger-Secret-Zp31"
		wrongPassword    = "wrong-Secret-Lm58"
	)
	secrets := []string{rootPassword, eruPassword, strangerPassword, wrongPassword}
	server, _ := startEtcd(t, t.TempDir(), nil)
	prefix := newPrefix()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	setup := server.Client(t)
	for _, step := range []func() error{
		func() error { _, err := setup.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := setup.RoleAdd(ctx, "root"); return err },
		func() error { _, err := setup.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := setup.UserAdd(ctx, "eru", eruPassword); return err },
		func() error { _, err := setup.RoleAdd(ctx, "eru-rw"); return err },
		func() error {
			_, err := setup.RoleGrantPermission(ctx, "eru-rw", prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := setup.UserGrantRole(ctx, "eru", "eru-rw"); return err },
		func() error { _, err := setup.UserAdd(ctx, "stranger", strangerPassword); return err },
		func() error { _, err := setup.AuthEnable(ctx); return err },
	} {
		require.NoError(t, step())
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Endpoint}, Username: "root", Password: rootPassword, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })

	// config is a plugin folder logging to log.file with the given
	// credentials.
	config := func(t *testing.T, auth obj) (*testenv.Env, string) {
		t.Helper()
		dir := t.TempDir()
		logFile := filepath.Join(dir, "plugin.log")
		cfg := etcdConfig(server.Endpoint, prefix, nil)
		if auth != nil {
			cfg["etcd"].(obj)["auth"] = auth
		}
		cfg["log"] = obj{"file": logFile}
		env := &testenv.Env{Kind: "etcd", Dir: dir, Prefix: prefix}
		configure(t, env, cfg)
		return env, logFile
	}
	// requireNoSecrets checks the error lines and the log file, which
	// must hold something, for every password.
	requireNoSecrets := func(t *testing.T, lines []string, logFile string) {
		t.Helper()
		logged, err := os.ReadFile(logFile)
		require.NoError(t, err, "the plugin logs to log.file")
		require.NotEmpty(t, logged)
		for _, secret := range secrets {
			require.NotContains(t, string(logged), secret, "a password in the log file")
			for _, line := range lines {
				require.NotContains(t, line, secret, "a password in an error line")
			}
		}
	}

	t.Run("with the right user name and password add-node and get-node-resource-info round-trip", func(t *testing.T) {
		env, logFile := config(t, obj{"username": "eru", "password": eruPassword})
		requireRoundTrip(t, env)
		require.Contains(t, dumpEtcd(t, root, prefix), "/resource/compute/"+seeded)
		requireNoSecrets(t, nil, logFile)
	})
	before := dumpEtcd(t, root, prefix)
	require.NotEmpty(t, before)

	cases := []securedCase{
		{name: "a wrong password", etcdKeys: obj{"username": "eru", "password": wrongPassword}, want: "unauthenticated: etcd " + server.Endpoint + ": authentication failed: the user name or password is wrong (etcd.auth.username, etcd.auth.password)", code: 10},
		{name: "an unknown user", etcdKeys: obj{"username": "nobody", "password": eruPassword}, want: "unauthenticated: etcd " + server.Endpoint + ": authentication failed", code: 10},
		{name: "a user without rights on the prefix", etcdKeys: obj{"username": "stranger", "password": strangerPassword}, want: "permission_denied: etcd " + server.Endpoint + ": permission denied: the etcd user has no role granting this on the key prefix (etcd.prefix)", code: 9},
		{name: "no credentials at all", etcdKeys: nil, want: "unauthenticated: etcd " + server.Endpoint + ": etcd requires a user name and password, and none is configured (etcd.auth.username, etcd.auth.password)", code: 10},
	}
	for _, c := range cases {
		t.Run(c.name+" fails in one clear line, writes nothing and leaks no password", func(t *testing.T) {
			env, logFile := config(t, c.etcdKeys)
			lines := requireRefusedEverywhere(t, env, server.Endpoint, c.want, c.code)
			require.Equal(t, before, dumpEtcd(t, root, prefix))
			requireNoSecrets(t, lines, logFile)
		})
	}
}

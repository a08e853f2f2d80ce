package serve_test

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

const nobody = 65534

// TestTheSocketRefusesPeersOfAnotherUID runs the binary as another user
// against a daemon run by this one: by the socket's permissions, or, when
// they let the peer connect, by its credentials (SO_PEERCRED), the daemon
// refuses it and the binary runs the call itself; listed in allowed_uids,
// the peer is served.
func TestTheSocketRefusesPeersOfAnotherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running a child as another uid needs root")
	}
	for _, c := range []struct {
		name      string
		serve     []string
		forwarded int
		refused   bool
	}{
		{"the socket's mode keeps it out", nil, 0, false},
		{"its credentials are refused", []string{`socket_mode: "0666"`}, 0, true},
		{"a listed uid is served", []string{`socket_mode: "0666"`, "allowed_uids: [65534]"}, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.NewEmbedded(t)
			if d := env.Daemon(); d != nil {
				d.Stop(t)
			}
			addr := testenv.FreeAddr(t)
			writeConfig(t, env, env.ConfigYAML(), append([]string{"http: " + addr}, c.serve...)...)
			d := env.Serve(t, addr)
			d.WaitHTTP(t)
			// The peer must reach the folder and a binary it may run.
			for dir := env.Dir; dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
				require.NoError(t, os.Chmod(dir, 0o755))
			}
			bin := filepath.Join(env.Dir, "storage-copy")
			data, err := os.ReadFile(testenv.Bin(t, "storage"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(bin, data, 0o755))

			// A bare `name` is answered before the socket is looked at
			// (cmd.RunFixed); with --config it goes through the socket.
			child := exec.Command(bin, "--config", filepath.Join(env.Dir, "storage.yaml"), "name")
			child.Dir = env.Dir
			child.Env = []string{"PATH=/usr/bin:/bin"}
			child.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			var out, errb bytes.Buffer
			child.Stdout, child.Stderr = &out, &errb
			require.NoError(t, child.Run(), errb.String())
			require.Equal(t, "\"storage\"\n", out.String(), "the call is answered either way")
			require.Equal(t, c.forwarded, d.Forwarded(t))
			if c.refused {
				require.Contains(t, d.Log(), `"msg":"peer refused on the socket"`)
				require.Contains(t, d.Log(), `"peer_uid":65534`)
				require.Equal(t, "1", metric(t, d, `eru_serve_requests_total{result="refused",verb=""}`))
			} else {
				require.NotContains(t, d.Log(), "peer refused")
			}
		})
	}
}

func request(t *testing.T, client *http.Client, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

// TestTheOperatorAPIWritesOnlyWithTheToken: reads are open, writes need the
// bearer token of serve.token_file (none configured: read-only), error
// classes come back as HTTP statuses, and the token is never logged.
func TestTheOperatorAPIWritesOnlyWithTheToken(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	const token = "s3cret-Token-4f1c9a"
	env := testenv.NewEtcd(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	env.Call(t, "storage", "add-node", obj{"nodename": "p1", "resource": obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}}}, nil)
	logFile := filepath.Join(env.Dir, "serve.log")

	t.Run("without a token file the API is read-only", func(t *testing.T) {
		addr := testenv.FreeAddr(t)
		writeConfig(t, env, env.ConfigYAML(), "http: "+addr)
		d := env.Serve(t, addr)
		d.WaitHTTP(t)
		code, body := request(t, http.DefaultClient, "GET", "http://"+addr+"/v1/nodes/n1", "", "")
		require.Equal(t, 200, code, body)
		require.Contains(t, body, `"node_id":"n1"`)
		code, body = request(t, http.DefaultClient, "POST", "http://"+addr+"/v1/nodes/n1:drain", token, "")
		require.Equal(t, 403, code, body)
		require.JSONEq(t, `{"code":"permission_denied","message":"the operator API is read-only: serve.token_file is not set"}`, body)
		d.Stop(t)
	})

	t.Run("with a token file writes need the token", func(t *testing.T) {
		addr := testenv.FreeAddr(t)
		require.NoError(t, os.WriteFile(filepath.Join(env.Dir, "token"), []byte(token+"\n"), 0o600))
		writeConfig(t, env, env.ConfigYAML()+"log:\n  file: serve.log\n", "http: "+addr, "token_file: token")
		d := env.Serve(t, addr)
		d.WaitHTTP(t)
		base := "http://" + addr
		for _, c := range []struct {
			name, method, path, token, body string
			status                          int
			contains                        string
		}{
			{"a write without the token", "POST", "/v1/nodes/n1:drain", "", "", 401, `"code":"unauthenticated"`},
			{"a write with another token", "POST", "/v1/nodes/n1:drain", "wrong", "", 401, `"code":"unauthenticated"`},
			{"a read without the token", "GET", "/v1/nodes?status=READY", "", "", 200, `"node_id":"n1"`},
			{"a write with the token", "POST", "/v1/nodes/n1:drain", token, `{"command_id":"c1"}`, 200, `"drain":true`},
			{"a replay of the command", "POST", "/v1/nodes/n1:drain", token, `{"command_id":"c1"}`, 200, `"drain":true`},
			{"the same id with other arguments", "POST", "/v1/nodes/n1:isolate", token, `{"command_id":"c1"}`, 409, `"code":"already_exists"`},
			{"a stale version", "POST", "/v1/nodes/n1:cancel-drain", token, `{"if_version":1}`, 409, `"code":"aborted"`},
			{"an unknown node", "POST", "/v1/nodes/n9:drain", token, "", 404, `"code":"not_found"`},
			{"an unknown operation", "POST", "/v1/nodes/n1:explode", token, "", 404, `"code":"not_found"`},
			{"a retirement", "POST", "/v1/nodes/n1:retire", token, "", 200, `"status":"RETIRED"`},
			{"a refused precondition", "POST", "/v1/nodes/n1:admit", token, "", 400, `"code":"failed_precondition"`},
			{"overcommit defaults", "PUT", "/v1/overcommit/defaults", token, `{"cpu":2000,"memory":1000}`, 200, `"cpu":2000`},
			{"overcommit defaults read", "GET", "/v1/overcommit/defaults", "", "", 200, `"memory":1000`},
			{"a bad ratio", "PUT", "/v1/overcommit/nodes/n1", token, `{"cpu":0}`, 400, `"code":"invalid_argument"`},
			{"the pools", "GET", "/v1/pools", "", "", 200, `"pool_id":"ceph-a"`},
			{"a pool", "GET", "/v1/pools/ceph-a", "", "", 200, `"node_id":"p1"`},
			{"a pool's capacity without the token", "PUT", "/v1/pools/ceph-a/capacity", "", `{"capacity":"300G","if_version":0}`, 401, `"code":"unauthenticated"`},
			{"a pool's capacity without its version", "PUT", "/v1/pools/ceph-a/capacity", token, `{"capacity":"300G"}`, 400, `"code":"invalid_argument"`},
			{"a pool's capacity", "PUT", "/v1/pools/ceph-a/capacity", token, `{"capacity":"300G","if_version":0}`, 200, `"capacity_bytes":322122547200`},
			{"a pool's objects", "GET", "/v1/pools/ceph-a/objects", "", "", 200, `"objects"`},
			{"an unknown object", "GET", "/v1/objects/v-0123456789abcdef", "", "", 404, `"code":"not_found"`},
			{"declare-lost while a member is not isolated", "POST", "/v1/pools/ceph-a:declare-lost", token, "", 400, `"code":"failed_precondition"`},
			{"an unknown pool operation", "POST", "/v1/pools/ceph-a:explode", token, "", 404, `"code":"not_found"`},
		} {
			code, body := request(t, http.DefaultClient, c.method, base+c.path, c.token, c.body)
			require.Equal(t, c.status, code, "%s: %s", c.name, body)
			require.Contains(t, body, c.contains, c.name)
		}
		// A body field the route does not take, or of the wrong type, is
		// refused before anything runs: dropped, it would leave a write to
		// run without it (a ratio cleared, a version check skipped).
		before := env.Dump(t)
		for _, c := range []struct {
			name, method, path, body string
			status                   int
			says                     string
		}{
			{"a misspelt ratio", "PUT", "/v1/overcommit/nodes/p1", `{"cpus":3000}`, 400,
				`body: unknown field \"cpus\": PUT /v1/overcommit/nodes/{id} takes cpu, memory, command_id, if_version`},
			{"a misspelt version", "PUT", "/v1/overcommit/defaults", `{"cpu":3000,"memory":1000,"if_verison":0}`, 400, `body: unknown field \"if_verison\"`},
			{"a field of another route", "POST", "/v1/nodes/p1:drain", `{"cpu":1000}`, 400, `POST /v1/nodes/{id}:action takes command_id, if_version`},
			{"a command id that is not a string", "POST", "/v1/nodes/p1:drain", `{"command_id":7}`, 400, `body: command_id must be a non-empty string, not 7`},
			{"an empty command id", "POST", "/v1/nodes/p1:drain", `{"command_id":""}`, 400, `body: command_id must be a non-empty string`},
			{"a version that is not an integer", "POST", "/v1/nodes/p1:drain", `{"if_version":"3"}`, 400, `body: if_version must be an integer`},
			{"a fractional version", "POST", "/v1/nodes/p1:drain", `{"if_version":1.5}`, 400, `body: if_version must be an integer`},
			{"a negative version, in the API's words", "POST", "/v1/nodes/p1:drain", `{"if_version":-1}`, 400, `{"code":"invalid_argument","message":"body: if_version -1: a record's version is 0 or more"}`},
			{"a ratio that is an object", "PUT", "/v1/overcommit/defaults", `{"cpu":{},"memory":1000}`, 400, `body: cpu must be a number or a string`},
			{"defaults with one ratio, in the API's words", "PUT", "/v1/overcommit/defaults", `{"cpu":3000}`, 400, `{"code":"invalid_argument","message":"PUT /v1/overcommit/defaults replaces both ratios: give cpu and memory"}`},
			{"a pool's capacity without its version, in the API's words", "PUT", "/v1/pools/ceph-a/capacity", `{"capacity":"300G"}`, 400, `{"code":"invalid_argument","message":"body: if_version is missing: PUT /v1/pools/{id}/capacity sets the capacity only at the version read (GET /v1/pools/ceph-a)"}`},
			{"a body that is not an object", "POST", "/v1/nodes/p1:drain", `[]`, 400, `body: want a JSON object, not array`},
			{"data after the object", "POST", "/v1/nodes/p1:drain", `{} {}`, 400, `body: data after the JSON object`},
			{"a stray brace after the object", "POST", "/v1/nodes/p1:drain", `{}}`, 400, `body: data after the JSON object`},
			{"a stray bracket after an object with fields", "POST", "/v1/nodes/p1:drain", `{"command_id":"c1"} ]`, 400, `body: data after the JSON object`},
			{"data after a heartbeat's object", "POST", "/v1/nodes/p1:heartbeat", `{} }`, 400, `body: data after the JSON object`},
			{"a method the path does not take", "DELETE", "/v1/nodes/p1", "", 405, `{"code":"unimplemented","message":"DELETE /v1/nodes/p1: this path takes GET, HEAD, POST"}`},
			{"a path no route has", "GET", "/v1/nodes/p1/extra", "", 404, `{"code":"not_found","message":"no route GET /v1/nodes/p1/extra`},
			{"a path with a trailing slash", "GET", "/v1/nodes/", "", 404, `"code":"not_found"`},
			{"a path with a doubled slash", "GET", "//v1/nodes", "", 404, `{"code":"not_found","message":"no route GET //v1/nodes`},
			{"a write through a dot segment", "POST", "/v1/./nodes/p1:drain", `{}`, 404, `{"code":"not_found","message":"no route POST /v1/./nodes/p1:drain`},
		} {
			code, body := request(t, http.DefaultClient, c.method, base+c.path, token, c.body)
			require.Equal(t, c.status, code, "%s: %s", c.name, body)
			require.Contains(t, body, c.says, c.name)
			require.True(t, json.Valid([]byte(body)), "%s: a JSON body: %s", c.name, body)
		}
		require.Equal(t, before, env.Dump(t), "nothing written")

		// `OPTIONS *` (no path) goes through flow control like any
		// request: net/http would otherwise answer it itself.
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = conn.Write([]byte("OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, conn.Close())
		require.NotEmpty(t, resp.Header.Get("X-Eru-PF-Priority-Level"), "OPTIONS * admitted: %d %v", resp.StatusCode, resp.Header)
		require.NotEmpty(t, resp.Header.Get("X-Eru-PF-Flow-Schema"))

		code, body := request(t, http.DefaultClient, "GET", base+"/metrics", "", "")
		require.Equal(t, 200, code)
		d.Stop(t)
		logged, err := os.ReadFile(logFile)
		require.NoError(t, err)
		require.Contains(t, string(logged), "operator call", "the daemon logs its calls")
		for _, where := range []string{string(logged), d.Log(), body} {
			require.NotContains(t, where, token)
		}
	})
}

// TestAClientCAMakesClientsPresentACertificate: with serve.tls.client_ca, a
// client without a certificate signed by it does not get through the
// handshake; one with it does.
func TestAClientCAMakesClientsPresentACertificate(t *testing.T) {
	t.Parallel() // light on the CPU: runs beside the tests that wait on etcd
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	dir := env.Dir
	ca := newCA(t)
	ca.issue(t, dir, "server", true)
	ca.issue(t, dir, "client", false)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.cert.Raw)
	addr := testenv.FreeAddr(t)
	writeConfig(t, env, env.ConfigYAML(), "http: "+addr, "tls:", "  cert: server.pem", "  key: server-key.pem", "  client_ca: ca.pem")
	d := env.Serve(t, addr)

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	require.NoError(t, err)
	known := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}

	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := known.Get("https://" + addr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			break
		}
		require.True(t, time.Now().Before(deadline), "HTTPS did not answer: %v %s", err, d.Log())
		time.Sleep(20 * time.Millisecond)
	}
	code, body := request(t, known, "GET", "https://"+addr+"/v1/nodes", "", "")
	require.Equal(t, 200, code, body)
	_, err = anonymous.Get("https://" + addr + "/v1/nodes")
	require.Error(t, err, "a client without a certificate gets no answer")
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		_ = resp.Body.Close()
		require.Equal(t, 400, resp.StatusCode, "plain HTTP is not served")
	}
}

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *authority {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "serve test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &authority{cert: cert, key: key}
}

func (a *authority) issue(t *testing.T, dir, name string, server bool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	require.NoError(t, err)
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", kder)
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}

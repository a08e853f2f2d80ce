package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/tests/testenv"
)

// obj is a JSON object literal.
type obj = map[string]any

// bins are the plugin binaries under test.
var bins = []string{"storage", "compute"}

// seeded is the node every environment holds before a verb runs.
const seeded = "n1"

// seedResource is the add-node resource of the seeded node.
var seedResource = map[string]obj{
	"storage": {"volumes": []string{"/data0:1T"}, "storage": "1T"},
	"compute": {"cpu": 4, "memory": "8G"},
}

// verbCase is one plugin verb with a request that is valid against a store
// holding the seeded node; store says whether the verb needs the store.
type verbCase struct {
	verb  string
	req   obj
	store bool
}

// verbCases lists every verb of engine.Names() with a valid request for bin.
func verbCases(bin string) []verbCase {
	n := seeded
	switch bin {
	case "storage":
		return []verbCase{
			{"name", obj{}, false},
			{"add-node", obj{"nodename": "n2", "resource": obj{"volumes": []string{"/data0:1T"}, "storage": "1T"}}, true},
			{"remove-node", obj{"nodename": n}, true},
			{"get-nodes-deploy-capacity", obj{"nodenames": []string{n}, "workload_resource": obj{"volumes": []string{"AUTO:/data:rw:1G"}}}, true},
			{"set-node-resource-capacity", obj{"nodename": n, "resource_request": obj{"storage": "3T"}, "delta": false}, true},
			{"get-node-resource-info", obj{"nodename": n, "workloads_resource": []any{}}, true},
			{"set-node-resource-info", obj{"nodename": n,
				"capacity": obj{"volumes": obj{"/data0": 1 << 40}, "disks": []any{}, "storage": 2 << 40},
				"usage":    obj{"volumes": obj{"/data0": 0}, "disks": []any{}, "storage": 0}}, true},
			{"set-node-resource-usage", obj{"nodename": n, "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true}, true},
			{"get-most-idle-node", obj{"nodenames": []string{n}}, true}, // it answers a placeable node: the registry is read
			{"fix-node-resource", obj{"nodename": n, "workloads_resource": []any{}}, true},
			{"calculate-deploy", obj{"nodename": n, "deploy_count": 1, "workload_resource_request": obj{"volumes": []string{"AUTO:/data:rw:1G"}}}, true},
			{"calculate-realloc", obj{"nodename": n, "workload_resource": obj{}, "workload_resource_request": obj{"storage": "1G"}}, true},
			{"calculate-remap", obj{"nodename": n, "workloads_resource": obj{}}, false},
			{"get-metrics-description", obj{}, false},
			{"get-metrics", obj{"podname": "pod1", "nodename": n}, true},
		}
	case "compute":
		return []verbCase{
			{"name", obj{}, false},
			{"add-node", obj{"nodename": "n2", "resource": obj{"cpu": 4, "memory": "8G"}}, true},
			{"remove-node", obj{"nodename": n}, true},
			{"get-nodes-deploy-capacity", obj{"nodenames": []string{n}, "workload_resource": obj{"cpu": 1, "memory": "1G"}}, true},
			{"set-node-resource-capacity", obj{"nodename": n, "resource_request": obj{"cpu": 8}, "delta": false}, true},
			{"get-node-resource-info", obj{"nodename": n, "workloads_resource": []any{}}, true},
			{"set-node-resource-info", obj{"nodename": n,
				"capacity": obj{"cpu_millis": 4000, "memory_bytes": 8 << 30},
				"usage":    obj{"cpu_millis": 0, "memory_bytes": 0}}, true},
			{"set-node-resource-usage", obj{"nodename": n, "resource_request": obj{"cpu": 1}, "delta": true, "incr": true}, true},
			{"get-most-idle-node", obj{"nodenames": []string{n}}, true},
			{"fix-node-resource", obj{"nodename": n, "workloads_resource": []any{}}, true},
			{"calculate-deploy", obj{"nodename": n, "deploy_count": 1, "workload_resource_request": obj{"cpu": 1, "memory": "1G"}}, true},
			{"calculate-realloc", obj{"nodename": n, "workload_resource": obj{"cpu_request_millis": 1000, "cpu_limit_millis": 1000, "memory_request": 1 << 30, "memory_limit": 1 << 30}, "workload_resource_request": obj{"cpu": 1}}, true},
			{"calculate-remap", obj{"nodename": n, "workloads_resource": obj{}}, false},
			{"get-metrics-description", obj{}, false},
			{"get-metrics", obj{"podname": "pod1", "nodename": n}, true},
		}
	}
	panic("no verb cases for " + bin)
}

// operatorCommands are operator commands that need the store, reading and
// writing, of both binaries.
var operatorCommands = []struct {
	bin  string
	name string // as the error line names it
	args []string
}{
	{"storage", "nodes list", []string{"nodes", "list"}},
	{"storage", "nodes get", []string{"nodes", "get", seeded}},
	{"storage", "nodes drain", []string{"nodes", "drain", seeded}},
	{"storage", "nodes heartbeat", []string{"nodes", "heartbeat", seeded}},
	{"compute", "overcommit get-defaults", []string{"overcommit", "get-defaults"}},
	{"compute", "overcommit set-defaults", []string{"overcommit", "set-defaults", "--cpu", "2000", "--memory", "1000"}},
}

// TestTheVerbTablesCoverEveryVerb keeps the tables above honest: every verb
// of the protocol has a case, so a new verb cannot slip past the fault tests.
//
// Each request is valid: on a healthy etcd holding the seeded node it
// succeeds, so that a failure in the fault tests is the fault's and not the
// request's.
func TestTheVerbTablesCoverEveryVerb(t *testing.T) {
	for _, bin := range bins {
		t.Run(bin+" has a case for every verb, in protocol order", func(t *testing.T) {
			var got []string
			for _, c := range verbCases(bin) {
				got = append(got, c.verb)
			}
			require.Equal(t, engine.Names(), got)
		})
		for _, c := range verbCases(bin) {
			t.Run(bin+" "+c.verb+" with its request succeeds on a healthy etcd", func(t *testing.T) {
				env := testenv.NewEtcd(t)
				seed(t, env, bin)
				env.Call(t, bin, c.verb, c.req, nil)
			})
		}
	}
	t.Run("the operator commands succeed on a healthy etcd", func(t *testing.T) {
		env := testenv.NewEtcd(t)
		for _, bin := range bins {
			seed(t, env, bin)
		}
		for _, c := range operatorCommands {
			env.OpOK(t, c.bin, nil, c.args...)
		}
	})
}

// configure writes cfg (a YAML mapping) as the env's storage.yaml and
// compute.yaml.
func configure(t testing.TB, env *testenv.Env, cfg obj) {
	t.Helper()
	data, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	for _, name := range []string{"storage.yaml", "compute.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(env.Dir, name), data, 0o644))
	}
}

// etcdConfig is a config naming endpoint, with extra keys under etcd.
func etcdConfig(endpoint, prefix string, etcdKeys obj) obj {
	e := obj{"machines": []string{endpoint}, "prefix": prefix}
	for k, v := range etcdKeys {
		e[k] = v
	}
	return obj{"etcd": e}
}

var prefixes atomic.Int64

// newPrefix is a key prefix no other test uses.
func newPrefix() string { return fmt.Sprintf("/reliability-%d-%d", os.Getpid(), prefixes.Add(1)) }

// etcdEnv is a plugin folder configured with cfg; server, when not nil, is
// the etcd the config names (for Dump).
func etcdEnv(t testing.TB, server *storetest.Etcd, prefix string, cfg obj) *testenv.Env {
	t.Helper()
	env := &testenv.Env{Kind: "etcd", Dir: t.TempDir(), Prefix: prefix, Etcd: server}
	configure(t, env, cfg)
	return env
}

// seed adds the seeded node to env through the plugin itself.
func seed(t testing.TB, env *testenv.Env, bin string) {
	t.Helper()
	env.Call(t, bin, "add-node", obj{"nodename": seeded, "resource": seedResource[bin]}, nil)
}

// freePort is a loopback port nobody listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// fixedPorts makes an etcd listen on the given client and peer ports, so
// that it can be stopped and started again at the same address.
func fixedPorts(client, peer int) func(*embed.Config) {
	return func(cfg *embed.Config) {
		c, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", client))
		p, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", peer))
		cfg.ListenClientUrls = []url.URL{*c}
		cfg.AdvertiseClientUrls = []url.URL{*c}
		cfg.ListenPeerUrls = []url.URL{*p}
		cfg.AdvertisePeerUrls = []url.URL{*p}
		cfg.InitialCluster = cfg.Name + "=" + p.String()
	}
}

// startEtcd starts an etcd of the test's own; stop stops it (once), and the
// test's end stops it if nothing did before.
func startEtcd(t testing.TB, dir string, tune func(*embed.Config)) (e *storetest.Etcd, stop func()) {
	t.Helper()
	e, err := storetest.StartEtcd(dir, tune)
	require.NoError(t, err)
	var once sync.Once
	stop = func() { once.Do(e.Stop) }
	t.Cleanup(stop)
	return e, stop
}

// dumpEtcd reads every key under prefix through client, leaving out the
// guard keys successful writes bind to a short lease (they expire on their
// own and are not state).
func dumpEtcd(t testing.TB, client *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.Get(ctx, prefix+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		if key := strings.TrimPrefix(string(kv.Key), prefix); !strings.HasPrefix(key, "/guards/") {
			out[key] = string(kv.Value)
		}
	}
	return out
}

// call is one process to run: a plugin verb (stdin set) or an operator
// command.
type call struct {
	bin   string
	args  []string
	stdin []byte
}

// concurrentCalls is how many processes runAll starts at once: enough to
// overlap the waits, few enough that their start-up on a small, busy
// machine does not eat the time bounds under test.
const concurrentCalls = 4

// runAll runs the calls in env's folder, concurrentCalls at a time, and
// returns their results in order. Exec failures other than a non-zero exit
// fail the test.
func runAll(t testing.TB, env *testenv.Env, calls []call) []testenv.Result {
	t.Helper()
	paths := map[string]string{}
	for _, c := range calls {
		paths[c.bin] = testenv.Bin(t, c.bin)
	}
	results := make([]testenv.Result, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrentCalls)
	for i, c := range calls {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			results[i], errs[i] = testenv.Run(paths[c.bin], env.Dir, c.stdin, c.args...)
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "running %s %v", calls[i].bin, calls[i].args)
	}
	return results
}

// verbCall is a plugin verb call with req on stdin.
func verbCall(t testing.TB, bin, verb string, req any) call {
	t.Helper()
	return call{bin: bin, args: []string{verb}, stdin: mustJSON(t, req)}
}

// refusedVerb checks that a plugin verb failed as core needs it to: exit
// 128, nothing on stdout, one line on stderr naming binary and verb. It
// returns the line.
func refusedVerb(t testing.TB, res testenv.Result, bin, verb string) string {
	t.Helper()
	require.Equal(t, 128, res.Code, "%s %s should fail; stdout %q stderr %q", bin, verb, res.Stdout, res.Stderr)
	require.Empty(t, res.Stdout, "a failed verb prints no answer")
	return oneLine(t, res.Stderr, bin+": "+verb+": ")
}

// refusedCommand checks that an operator command failed with exit code and
// one line naming binary and command. It returns the line.
func refusedCommand(t testing.TB, res testenv.Result, bin, command string, code int) string {
	t.Helper()
	require.Equal(t, code, res.Code, "%s %s: stdout %q stderr %q", bin, command, res.Stdout, res.Stderr)
	require.Empty(t, res.Stdout, "a failed command prints no answer")
	return oneLine(t, res.Stderr, bin+": "+command+": ")
}

func oneLine(t testing.TB, stderr, prefix string) string {
	t.Helper()
	require.True(t, strings.HasSuffix(stderr, "\n"), "the error line ends with a newline: %q", stderr)
	line := strings.TrimSuffix(stderr, "\n")
	require.NotContains(t, line, "\n", "the error must be one line")
	require.True(t, strings.HasPrefix(line, prefix), "error line %q should start with %q", line, prefix)
	return line
}

// answered checks that a call succeeded as core needs it to: exit 0,
// nothing on stderr, one JSON value on stdout.
func answered(t testing.TB, res testenv.Result, what string) {
	t.Helper()
	require.Equal(t, 0, res.Code, "%s failed: %s", what, res.Stderr)
	require.Empty(t, res.Stderr, "%s wrote to stderr", what)
	require.True(t, jsonValue(res.Stdout), "%s printed no JSON: %q", what, res.Stdout)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// jsonValue reports whether s is exactly one JSON value.
func jsonValue(s string) bool {
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if err := dec.Decode(&v); err != nil {
		return false
	}
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

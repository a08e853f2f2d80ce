package serve_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/tests/testenv"
)

// step is one call of a scenario.
type step struct {
	bin   string
	verb  string
	stdin string
}

// scenario exercises every verb of both plugins, successes and refusals,
// in an order where each call depends on the state the ones before left.
var scenario = []step{
	{"storage", "name", ``},
	{"storage", "get-metrics-description", ``},
	{"storage", "get-node-resource-info", `{"nodename":"n1"}`},
	{"storage", "add-node", `{"nodename":"n1","resource":{"volumes":["/data0:1T","/data1:1T"],"disks":["/dev/vda:/,/data0:1000:1000:1G:1G"],"storage":"2T"}}`},
	{"storage", "add-node", `{"nodename":"n1","resource":{"storage":"1T"}}`},
	{"storage", "add-node", `{"nodename":"n2","resource":{"volumes":["/data0:100G"],"storage":"100G"}}`},
	{"compute", "add-node", `{"nodename":"n1","resource":{"cpu":8,"memory":"16G"}}`},
	{"compute", "add-node", `{"nodename":"n2","resource":{"cpu":2,"memory":"2G"}}`},
	{"storage", "get-nodes-deploy-capacity", `{"nodenames":["n1","n2","n3"],"workload_resource":{"volumes":["AUTO:/data:rw:10G"],"storage":"1G"}}`},
	{"compute", "get-nodes-deploy-capacity", `{"nodenames":["n1","n2","n3"],"workload_resource":{"cpu":1,"memory":"1G"}}`},
	{"storage", "calculate-deploy", `{"nodename":"n1","deploy_count":2,"workload_resource_request":{"volumes":["AUTO:/data:rw:10G"],"storage":"1G"}}`},
	{"storage", "calculate-deploy", `{"nodename":"n2","deploy_count":50,"workload_resource_request":{"volumes":["AUTO:/data:rw:10G"]}}`},
	{"compute", "calculate-deploy", `{"nodename":"n1","deploy_count":3,"workload_resource_request":{"cpu":1,"memory":"1G"}}`},
	{"storage", "set-node-resource-usage", `{"nodename":"n1","resource_request":{"volumes":["/data0:10G"],"storage":"1G"},"delta":true,"incr":true}`},
	{"compute", "set-node-resource-usage", `{"nodename":"n1","resource_request":{"cpu":2,"memory":"2G"},"delta":true,"incr":true}`},
	{"storage", "set-node-resource-usage", `{"nodename":"n2","resource_request":{"storage":"1P"},"delta":true,"incr":true}`},
	{"storage", "get-node-resource-info", `{"nodename":"n1","workloads_resource":[]}`},
	{"compute", "get-node-resource-info", `{"nodename":"n1","workloads_resource":[]}`},
	{"storage", "set-node-resource-capacity", `{"nodename":"n2","resource_request":{"storage":"200G"},"delta":false}`},
	{"compute", "set-node-resource-capacity", `{"nodename":"n2","resource_request":{"cpu":-1},"delta":true,"incr":true}`},
	{"storage", "get-most-idle-node", `{"nodenames":["n1","n2"]}`},
	{"compute", "get-most-idle-node", `{"nodenames":["n1","n2"]}`},
	{"storage", "calculate-realloc", `{"nodename":"n1","workload_resource":{},"workload_resource_request":{"storage":"1G"}}`},
	{"storage", "calculate-remap", `{"nodename":"n1","workloads_resource":{}}`},
	{"storage", "fix-node-resource", `{"nodename":"n1","workloads_resource":[]}`},
	{"compute", "fix-node-resource", `{"nodename":"n9","workloads_resource":[]}`},
	{"storage", "get-metrics", `{"podname":"p1","nodename":"n1"}`},
	{"compute", "get-metrics", `{"nodes":[{"podname":"p1","nodename":"n1"},{"podname":"p1","nodename":"n2"}]}`},
	{"storage", "set-node-resource-info", `{"nodename":"n3","capacity":{"volumes":{"/data0":1000},"disks":[],"storage":1000},"usage":{"volumes":{"/data0":0},"disks":[],"storage":0}}`},
	{"storage", "calculate-deploy", `not json`},
	{"storage", "calculate-deploy", ``},
	{"storage", "calculate-deploy", `{"nodename":"bad/name","deploy_count":1}`},
	{"compute", "calculate-deploy", `{"nodename":"n1","deploy_count":1,"workload_resource_request":{"cpu":"lots"}}`},
	{"storage", "remove-node", `{"nodename":"n2"}`},
	{"storage", "remove-node", `{"nodename":"n2"}`},
	{"compute", "remove-node", `{"nodename":"n2"}`},
	{"storage", "get-nodes-deploy-capacity", `{"nodenames":["n1","n2","n3"],"workload_resource":{}}`},
}

// TestForwardedCallsAnswerTheBytesOfALocalCall runs the scenario twice on
// fresh stores, once through a daemon and once with none, and compares
// every call's stdout, stderr and exit status byte for byte; the daemon's
// own count proves the calls went through it (all but the bare name and
// get-metrics-description, which the binary answers before looking for a
// daemon).
func TestForwardedCallsAnswerTheBytesOfALocalCall(t *testing.T) {
	t.Parallel() // short waits on its own fresh stores: runs beside the tests that wait on etcd
	testenv.Backends(t, func(t *testing.T, served *testenv.Env) {
		var plain *testenv.Env
		if served.Kind == "etcd" {
			plain = testenv.NewEtcd(t)
		} else {
			plain = testenv.NewEmbedded(t)
		}
		d := serveWithHTTP(t, served)
		verbs := 0
		for i, s := range scenario {
			got := served.Exec(t, s.bin, []byte(s.stdin), s.verb)
			want := local(t, plain, s.bin, []byte(s.stdin), s.verb)
			// The embedded store's path and the etcd prefix differ between
			// the two folders; nothing else may.
			wantErr := strings.ReplaceAll(want.Stderr, plain.Dir, served.Dir)
			wantErr = strings.ReplaceAll(wantErr, plain.Prefix, served.Prefix)
			require.Equal(t, want.Code, got.Code, "step %d %s %s: local %s, forwarded %s", i, s.bin, s.verb, describe(want), describe(got))
			require.Equal(t, want.Stdout, got.Stdout, "step %d %s %s", i, s.bin, s.verb)
			require.Equal(t, wantErr, got.Stderr, "step %d %s %s", i, s.bin, s.verb)
			if !forward.NoInput(s.verb) { // a bare name is answered by the binary itself (cmd.RunFixed)
				verbs++
			}
		}
		require.Equal(t, verbs, d.Forwarded(t), "every call that reads a request went through the daemon")
	})
}

// TestCallsRunLocallyWithoutAnAnsweringDaemon covers the socket's absence,
// a stale socket file nobody listens on, and a daemon that starts on a
// stale socket.
func TestCallsRunLocallyWithoutAnAnsweringDaemon(t *testing.T) {
	t.Parallel() // its own folder, store and daemons
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	sock := env.Dir + "/eru-resources.sock"
	_, err := os.Stat(sock)
	require.True(t, os.IsNotExist(err), "a stopped daemon removes its socket")
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)

	// A socket file left by a daemon that died: connecting is refused.
	d := env.Serve(t, "")
	d.Kill()
	_, err = os.Stat(sock)
	require.NoError(t, err, "a killed daemon leaves its socket behind")
	var info struct {
		Capacity struct {
			Storage int64 `json:"storage"`
		} `json:"capacity"`
	}
	env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n1"}, &info)
	require.Equal(t, int64(1<<40), info.Capacity.Storage)

	// A new daemon removes the stale socket and serves.
	addr := testenv.FreeAddr(t)
	withServe(t, env, "http: "+addr)
	d = env.Serve(t, addr)
	d.WaitHTTP(t)
	env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n1"}, &info)
	require.Equal(t, 1, d.Forwarded(t))
	require.Contains(t, d.Log(), "removed a stale socket")

	// A second daemon on a live socket refuses to start.
	res := env.Exec(t, "storage", nil, "serve")
	require.Equal(t, 7, res.Code, describe(res))
	require.Contains(t, res.Stderr, "another daemon is answering on it")
}

// TestADaemonKilledUnderAWriteLeavesTheOutcomeUnknown holds the embedded
// store's lock so that the daemon's calls wait for it, kills the daemon
// under a write and under a read: the write's client says its outcome is
// unknown (and does not run it again), the read's client runs it itself.
func TestADaemonKilledUnderAWriteLeavesTheOutcomeUnknown(t *testing.T) {
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	cfg := "embedded:\n  path: " + strconv.Quote(env.DB) + "\n  lock_timeout: 20s\n"
	for _, n := range []string{"storage.yaml", "compute.yaml"} {
		require.NoError(t, os.WriteFile(env.Dir+"/"+n, []byte(cfg), 0o644))
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	before := env.Dump(t)

	for _, c := range []struct {
		name, verb, stdin string
		write             bool
	}{
		{"a write", "set-node-resource-usage", `{"nodename":"n1","resource_request":{"storage":"1G"},"delta":true,"incr":true}`, true},
		{"a read", "get-node-resource-info", `{"nodename":"n1"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := env.Serve(t, "")
			held, err := boltstore.Open(env.DB, boltstore.Options{Prefix: env.Prefix, LockTimeout: 5 * time.Second})
			require.NoError(t, err)
			done := make(chan testenv.Result, 1)
			go func() { done <- env.Exec(t, "storage", []byte(c.stdin), c.verb) }()
			// The daemon took the call (a write sent its Accepted before
			// running) and waits for the store's lock: it has the store's
			// lock file open (boltstore queues on it, then opens the store).
			require.Eventually(t, func() bool { return hasOpen(d.Cmd.Process.Pid, env.DB+".lock") }, 20*time.Second, 5*time.Millisecond)
			d.Kill()
			if c.write {
				res := <-done
				require.NoError(t, held.Close())
				require.Equal(t, 128, res.Code, describe(res))
				require.Empty(t, res.Stdout)
				require.Regexp(t, `^storage: set-node-resource-usage: node n1: unavailable: outcome unknown: the serve daemon at \S+ took the call and closed the connection before answering`, res.Stderr)
				require.Equal(t, before, env.Dump(t), "the daemon died before writing, and the client did not write either")
				return
			}
			time.Sleep(200 * time.Millisecond)
			require.NoError(t, held.Close()) // the client's own run gets the lock
			res := <-done
			require.Equal(t, 0, res.Code, describe(res))
			require.Contains(t, res.Stdout, `"storage":1099511627776`)
		})
	}
}

// TestTheForwarderKnowsEveryVerb keeps the forwarder's table of verbs (it
// cannot import the engine's) equal to the command tree's.
func TestTheForwarderKnowsEveryVerb(t *testing.T) {
	env := testenv.NewEmbedded(t)
	res := local(t, env, "storage", nil, "help")
	require.Equal(t, 0, res.Code)
	for _, verb := range forward.Verbs() {
		require.Contains(t, res.Stdout, "   "+verb+" ", "the binary has no verb %q", verb)
	}
	var listed []string
	inVerbs := false
	for _, line := range strings.Split(res.Stdout, "\n") {
		if strings.Contains(line, "core plugin verbs") {
			inVerbs = true
			continue
		}
		if inVerbs {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasSuffix(line, ":") {
				break
			}
			listed = append(listed, strings.TrimSuffix(f[0], ","))
		}
	}
	require.NotEmpty(t, listed)
	for _, v := range listed {
		_, ok := forward.Write(v)
		require.True(t, ok, "verb %q is not forwarded", v)
	}
}

// TestTheThinFrontAnswersLikeTheFullBinary runs the scenario through the
// small forwarding front (cmd/forwarder) three ways — forwarded to a
// daemon, declined by a daemon (its config changed since it started, so
// the front hands the stdin it already read to the full binary it execs),
// and with no daemon at all — and compares each call with the full binary
// run locally.
func TestTheThinFrontAnswersLikeTheFullBinary(t *testing.T) {
	t.Parallel() // short waits on its own fresh stores: runs beside the tests that wait on etcd
	front := thinFront(t)
	testenv.Backends(t, func(t *testing.T, plain *testenv.Env) {
		fresh := func() *testenv.Env {
			if plain.Kind == "etcd" {
				return testenv.NewEtcd(t)
			}
			return testenv.NewEmbedded(t)
		}
		if d := plain.Daemon(); d != nil {
			d.Stop(t)
		}
		served, declined, alone := fresh(), fresh(), fresh()
		for _, env := range []*testenv.Env{served, declined, alone} {
			if d := env.Daemon(); d != nil {
				d.Stop(t)
			}
		}
		addr := testenv.FreeAddr(t)
		withServe(t, served, "http: "+addr)
		d := served.Serve(t, addr)
		d.WaitHTTP(t)
		declinedAddr := testenv.FreeAddr(t)
		withServe(t, declined, "http: "+declinedAddr)
		dd := declined.Serve(t, declinedAddr)
		dd.WaitHTTP(t)
		later := time.Now().Add(time.Minute)
		require.NoError(t, os.Chtimes(declined.Dir+"/storage.yaml", later, later))
		require.NoError(t, os.Chtimes(declined.Dir+"/compute.yaml", later, later))

		for i, s := range scenario {
			want := local(t, plain, s.bin, []byte(s.stdin), s.verb)
			for _, env := range []*testenv.Env{served, declined, alone} {
				got := execPath(t, env, front+"/"+s.bin, []byte(s.stdin), []string{s.verb})
				wantErr := strings.ReplaceAll(want.Stderr, plain.Dir, env.Dir)
				wantErr = strings.ReplaceAll(wantErr, plain.Prefix, env.Prefix)
				require.Equal(t, want.Code, got.Code, "step %d %s %s: local %s, front %s", i, s.bin, s.verb, describe(want), describe(got))
				require.Equal(t, want.Stdout, got.Stdout, "step %d %s %s", i, s.bin, s.verb)
				require.Equal(t, wantErr, got.Stderr, "step %d %s %s", i, s.bin, s.verb)
			}
		}
		named := 0 // the front says its name itself (TestTheFrontSaysItsNameItself)
		for _, s := range scenario {
			if s.verb == "name" {
				named++
			}
		}
		require.Equal(t, len(scenario)-named, d.Forwarded(t))
		require.Equal(t, 0, dd.Forwarded(t), "the declining daemon ran nothing")
		require.Equal(t, float64(len(scenario)-named), sumMetric(t, dd, `eru_serve_requests_total{result="declined"`), "it declined every call")
	})
}

// TestCallsAreForwardedOnlyToADaemonOfTheFileTheBinaryReads runs the
// full binaries in folders holding one config file, whichever its name:
// each binary reads that file (the sibling's, or the shared one), and so
// must the forwarding that sends its call to the daemon.
func TestCallsAreForwardedOnlyToADaemonOfTheFileTheBinaryReads(t *testing.T) {
	t.Parallel() // its own folders, stores and daemons
	oneFile := func(t *testing.T, name, extra string) *testenv.Env {
		env := testenv.NewEmbedded(t)
		if d := env.Daemon(); d != nil {
			d.Stop(t)
		}
		for _, f := range []string{"storage.yaml", "compute.yaml"} {
			require.NoError(t, os.Remove(filepath.Join(env.Dir, f)))
		}
		if name != "" {
			require.NoError(t, os.WriteFile(filepath.Join(env.Dir, name), []byte(env.ConfigYAML()+extra), 0o644))
		}
		return env
	}
	addNode := func(t *testing.T, env *testenv.Env, bin string) testenv.Result {
		t.Helper()
		req := obj{"nodename": "n1", "resource": obj{"storage": "1T"}}
		if bin == "compute" {
			req = obj{"nodename": "n1", "resource": obj{"cpu": 2, "memory": "1G"}}
		}
		return execPath(t, env, testenv.Bin(t, bin), mustJSON(t, req), []string{"add-node"})
	}
	for _, name := range []string{"storage.yaml", "compute.yaml", "eru-resources.yaml"} {
		t.Run("with only "+name+" both binaries' calls are served by the daemon", func(t *testing.T) {
			addr := testenv.FreeAddr(t)
			env := oneFile(t, name, "serve:\n  http: "+addr+"\n")
			d := env.Serve(t, addr)
			d.WaitHTTP(t)
			for _, bin := range []string{"storage", "compute"} {
				res := addNode(t, env, bin)
				require.Equal(t, 0, res.Code, describe(res))
			}
			require.Equal(t, 2, d.Forwarded(t), "both calls were forwarded")
			require.NotContains(t, d.Log(), "declined")
		})
	}
	t.Run("a shared file written after a daemon started on the defaults is not the daemon's: the call runs locally on its store", func(t *testing.T) {
		env := oneFile(t, "", "")
		env.Serve(t, "")
		require.NoError(t, os.WriteFile(filepath.Join(env.Dir, "eru-resources.yaml"), []byte("embedded:\n  path: other.db\n"), 0o644))
		res := addNode(t, env, "storage")
		require.Equal(t, 0, res.Code, describe(res))
		got := execPath(t, env, testenv.Bin(t, "storage"), nil, []string{"nodes", "get", "n1"}, "ERU_RESOURCE_NO_FORWARD=1")
		require.Equal(t, 0, got.Code, "the node is in other.db, the store the binary reads: %s", describe(got))
	})
}

// TestTheFrontSaysItsNameItself: core asks each plugin its name as it
// loads it. The front answers it as the full binary does, byte for byte,
// with or without --config, and needs neither a daemon nor the full binary
// for it (its libexec/ is empty here); a front under a name that is no
// plugin's does not invent one and runs the full binary of that name.
func TestTheFrontSaysItsNameItself(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	front := thinFront(t)
	for _, b := range []string{"storage", "compute"} {
		require.NoError(t, os.Remove(filepath.Join(front, "libexec", b)))
	}
	for _, bin := range []string{"storage", "compute"} {
		for _, args := range [][]string{{"name"}, {"--config", "/nonexistent/plugins.yaml", "name"}, {"--config=" + env.Dir + "/storage.yaml", "name"}} {
			t.Run(bin+" "+strings.Join(args, " ")+" answers as the full binary", func(t *testing.T) {
				want := execPath(t, env, testenv.Bin(t, bin), nil, args)
				require.Equal(t, 0, want.Code, describe(want))
				got := execPath(t, env, filepath.Join(front, bin), nil, args)
				require.Equal(t, want, got)
			})
		}
	}
	t.Run("a front under another name runs the full binary of that name", func(t *testing.T) {
		other := filepath.Join(front, "storage-next")
		require.NoError(t, os.Link(filepath.Join(front, "storage"), other))
		got := execPath(t, env, other, nil, []string{"name"})
		require.Equal(t, forward.PluginExitCode, got.Code, describe(got))
		require.Empty(t, got.Stdout)
		require.Contains(t, got.Stderr, "cannot run the plugin engine libexec/storage-next")
	})
	t.Run("anything after the verb is the full binary's to refuse", func(t *testing.T) {
		got := execPath(t, env, filepath.Join(front, "storage"), nil, []string{"name", "extra"})
		require.Equal(t, forward.PluginExitCode, got.Code, describe(got))
		require.Contains(t, got.Stderr, "cannot run the plugin engine libexec/storage")
	})
}

// TestTheFrontSaysItsNameOnlyWhereTheFullBinaryWould: the front answers
// name itself only for command lines the full binary answers, and fails as
// the full binary fails: a --config the command tree refuses (empty, or
// given twice) is refused, not answered, and an answer that cannot be
// printed is said on stderr in the full binary's one line.
func TestTheFrontSaysItsNameOnlyWhereTheFullBinaryWould(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	front := thinFront(t)
	for _, args := range [][]string{
		{"--config=", "name"},
		{"--config", "", "name"},
		{"--config", "/a.yaml", "--config", "/b.yaml", "name"},
		{"--config=/a.yaml", "-config=/b.yaml", "name"},
	} {
		t.Run("the front refuses "+strings.Join(args, " ")+" as the full binary does", func(t *testing.T) {
			want := execPath(t, env, testenv.Bin(t, "storage"), nil, args)
			require.NotEqual(t, 0, want.Code, "the full binary refuses it: %s", describe(want))
			got := execPath(t, env, filepath.Join(front, "storage"), nil, args)
			require.Equal(t, want, got)
		})
	}
	t.Run("a name the front cannot print is reported in the full binary's line", func(t *testing.T) {
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Skip("no /dev/full here")
		}
		defer full.Close()
		want := execWith(t, env, testenv.Bin(t, "compute"), strings.NewReader(""), full, []string{"name"})
		require.Equal(t, forward.PluginExitCode, want.Code, describe(want))
		require.Contains(t, want.Stderr, "its answer could not be printed")
		got := execWith(t, env, filepath.Join(front, "compute"), strings.NewReader(""), full, []string{"name"})
		require.Equal(t, want, got)
	})
}

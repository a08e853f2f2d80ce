package main

import (
	"context"
	"debug/buildinfo"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestEtcdRangesCountsTheServersReads: the scrape's "no store read" is the
// count of range requests etcd served, and etcd runs in a process of its
// own, so a read by any client must move the count.
func TestEtcdRangesCountsTheServersReads(t *testing.T) {
	endpoint, client, stop, err := startEtcd(t.TempDir())
	require.NoError(t, err)
	defer stop()
	before, err := etcdRanges(endpoint)
	require.NoError(t, err)
	for range 3 {
		_, err := client.Get(context.Background(), "/some/key")
		require.NoError(t, err)
	}
	after, err := etcdRanges(endpoint)
	require.NoError(t, err)
	require.GreaterOrEqual(t, after-before, 3.0, "three reads served by etcd, counted %v", after-before)
}

// tinyBench is a bench on a real etcd with one small cluster loaded by the
// real storage binary and its serve daemon running.
func tinyBench(t *testing.T, nodes int) (*bench, *cluster) {
	t.Helper()
	storage := testenv.Bin(t, "storage")
	b := &bench{goBin: "go", storage: storage, tmp: t.TempDir()}
	b.runner = &runner{path: filepath.Join(b.tmp, "runner"), env: append(pluginEnv(), "ERU_RESOURCE_NO_FORWARD=1")}
	require.NoError(t, goBuild("go", runnerSource, b.runner.path))
	var stop func()
	var err error
	b.endpoint, b.client, stop, err = startEtcd(b.tmp)
	require.NoError(t, err)
	t.Cleanup(stop)
	c, err := load(context.Background(), b, nodes)
	require.NoError(t, err)
	d, err := b.startDaemon(c)
	require.NoError(t, err)
	t.Cleanup(d.stop)
	return b, c
}

// goProgram builds a main package of one file into dir/name.
func goProgram(t *testing.T, source, out string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	require.NoError(t, goBuild("go", source, out))
}

// A front that never forwards: it falls back at once as cmd/forwarder does
// when no daemon answers (ERU_RESOURCE_NO_FORWARD=1 appended, the full
// binary exec'd from libexec/).
const fallingBackFront = `package main

import (
	"os"
	"path/filepath"
	"syscall"
)

func main() {
	exe, _ := os.Executable()
	full := filepath.Join(filepath.Dir(exe), "libexec", filepath.Base(os.Args[0]))
	env := append(os.Environ(), "ERU_RESOURCE_NO_FORWARD=1")
	panic(syscall.Exec(full, append([]string{full}, os.Args[1:]...), env))
}
`

// TestAFrontThatFallsBackIsNotCountedAsForwarded: the forwarded measures
// time the front forwarding the call; a front that falls back to the full
// binary must fail the bench, not pass because the full binary forwarded
// the call in its turn.
func TestAFrontThatFallsBackIsNotCountedAsForwarded(t *testing.T) {
	b, c := tinyBench(t, 3)
	dir := filepath.Join(b.tmp, "fake-front")
	b.front = filepath.Join(dir, "storage")
	goProgram(t, fallingBackFront, b.front)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "libexec"), 0o755))
	require.NoError(t, os.Symlink(b.storage, filepath.Join(dir, "libexec", "storage")))

	cold := b.verb(c, "get-node-resource-info", map[string]any{"nodename": c.names[0], "workloads_resource": []any{}}, nodeInfoOf(0))
	forwarded := cold
	forwarded.cmd = withEnv(b.viaFront(cold.cmd), forwardedEnv)
	forwarded.readsStore = false
	m := measure{name: "forwarded", subject: forwarded, floor: cold,
		via: &daemonCalls{addr: c.serveHTTP, verb: "get-node-resource-info", perRun: 1}}
	_, err := b.runMeasure(m, 1)
	require.ErrorContains(t, err, "the daemon answered 0 of the 2 calls")
}

// A storage binary that answers get-node-resource-info for node-000000
// from memory, without its store, and runs the real binary otherwise.
const cannedStorage = `package main

import (
	"os"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get-node-resource-info" {
		os.Stdout.WriteString(` + "`" + `{"capacity":{"volumes":{"/data0":1099511627776,"/data1":1099511627776},"storage":6597069766656},"usage":{"volumes":{"/data0":0,"/data1":0},"storage":0},"diffs":[]}` + "`" + ` + "\n")
		return
	}
	real := os.Getenv("REAL_STORAGE")
	panic(syscall.Exec(real, append([]string{real}, os.Args[1:]...), os.Environ()))
}
`

// TestACannedAnswerFailsTheBench: an answer right in every byte that was
// not read from the store is no figure of the plugin's read.
func TestACannedAnswerFailsTheBench(t *testing.T) {
	b, c := tinyBench(t, 3)
	canned := filepath.Join(b.tmp, "canned", "storage")
	goProgram(t, cannedStorage, canned)
	b.runner.env = append(b.runner.env, "REAL_STORAGE="+b.storage)
	real := b.verb(c, "get-node-resource-info", map[string]any{"nodename": c.names[0], "workloads_resource": []any{}}, nodeInfoOf(0))
	_, err := b.timed(real, 1)
	require.NoError(t, err, "the real binary reads the store")
	b.storage = canned
	fake := b.verb(c, "get-node-resource-info", map[string]any{"nodename": c.names[0], "workloads_resource": []any{}}, nodeInfoOf(0))
	_, err = b.timed(fake, 1)
	require.ErrorContains(t, err, "without reading the store")
}

// TestFloorsAreBuiltAsThePlugins: every Go floor is built by the plugins'
// toolchain with their cgo setting and -trimpath (make build's flags): a
// floor built with cgo on where the plugins have it off is dynamically
// linked when it links net (etcdctl, the gateway reader), and starts slower
// than the same program built as the plugins are.
func TestFloorsAreBuiltAsThePlugins(t *testing.T) {
	b := &bench{goBin: "go", tmp: t.TempDir()}
	// The plugin as `make build` builds it.
	b.storage = filepath.Join(b.tmp, "storage")
	require.NoError(t, goCmdEnv(testenv.Root(), "go", []string{"CGO_ENABLED=0"},
		"build", "-trimpath", "-tags", "urfave_cli_no_docs", "-ldflags", "-s -w", "-o", b.storage, "./cmd/storage"))
	require.NoError(t, b.sameToolchain())
	require.NoError(t, b.buildTools())
	plugin, err := buildinfo.ReadFile(b.storage)
	require.NoError(t, err)
	settings := func(info *buildinfo.BuildInfo) map[string]string {
		m := map[string]string{}
		for _, s := range info.Settings {
			m[s.Key] = s.Value
		}
		return m
	}
	want := settings(plugin)
	for _, floor := range []string{b.hello, b.gatewayGet, b.etcdctl, b.linked, b.sweep} {
		info, err := buildinfo.ReadFile(floor)
		require.NoError(t, err)
		got := settings(info)
		require.Equal(t, plugin.GoVersion, info.GoVersion, floor)
		require.Equal(t, want["CGO_ENABLED"], got["CGO_ENABLED"], "%s: CGO_ENABLED", floor)
		require.Equal(t, want["-trimpath"], got["-trimpath"], "%s: -trimpath", floor)
		require.Equal(t, "true", got["-trimpath"], "%s: -trimpath", floor)
	}
}

// TestAnRSSCeilingHoldsInEveryRun: "RSS ≤ 40 MiB" is a ceiling on the
// process's peak; a run above it misses the target even when the median
// run is below.
func TestAnRSSCeilingHoldsInEveryRun(t *testing.T) {
	run := func(mib int64) sample { return sample{wall: 1, cpu: 1, rssKiB: mib << 10} }
	o := outcome{m: measure{rssTarget: 40},
		subject: []sample{run(30), run(30), run(50)}, base: []sample{run(50), run(50), run(50)}}
	require.Equal(t, "RSS ≤ 40 MiB: missed", o.verdict())
	o.subject = []sample{run(30), run(30), run(40)}
	require.Equal(t, "RSS ≤ 40 MiB: met", o.verdict())
}

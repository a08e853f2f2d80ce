// Command bench times the built plugin binaries as eru core runs them —
// whole processes, JSON on stdin, the plugin folder as working directory —
// against a real etcd (started in this process), each figure against a
// floor measured in the same run in interleaved pairs: the exec of
// /bin/true, a Go hello-world built by the same toolchain, etcdctl (built
// from the module proxy at the etcd version go.mod requires) reading or
// writing the same keys. Every answer timed is checked; a wrong one fails
// the bench. It prints Markdown: the machine, its load average at the start
// and the end, and per measure the median and range of both sides and of
// their pair-by-pair ratio, their CPU time, peak RSS and page faults.
//
//	go run ./tools/bench -bin ./bin                 # 1,000 and 10,000 nodes, 15 pairs
//	go run ./tools/bench -bin ./bin -quick          # 1,000 nodes, 5 pairs
//	go run ./tools/bench -bin ./bin -nodes 1000,50000
package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// benchPools is how many pools the nodes of the pool measure share.
const benchPools = 10

// minPairs is the fewest pairs a full run may time per measure.
const minPairs = 15

// options are the command line's choices.
type options struct {
	bin   string // folder of the storage and compute binaries
	goBin string // the go command that built them
	pairs int
	nodes []int // cluster sizes, ascending
	quick bool
	args  []string // the command line, as printed
}

func main() {
	if dir := os.Getenv(etcdDirEnv); dir != "" {
		os.Exit(serveEtcd(dir))
	}
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "folder holding the built storage binary")
	flag.StringVar(&o.goBin, "go", "go", "the go command (builds the hello-world floor and the runner)")
	flag.IntVar(&o.pairs, "runs", 0, fmt.Sprintf("interleaved pairs per measure (at least %d; -quick: default 5)", minPairs))
	nodes := flag.String("nodes", "", "cluster sizes, comma-separated (default 1000,10000; -quick: 1000)")
	flag.BoolVar(&o.quick, "quick", false, "fewer pairs and 1,000 nodes only: checks the harness, figures not for BENCHMARKS.md")
	flag.Parse()
	o.args = append([]string{invocation()}, os.Args[1:]...)
	if err := o.settle(*nodes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// invocation names this program as it was started: `go run ./tools/bench`
// when go run built it into a temporary folder.
func invocation() string {
	if strings.Contains(os.Args[0], "go-build") {
		return "go run ./tools/bench"
	}
	return os.Args[0]
}

// settle fills in the defaults and refuses what would not be a comparison.
func (o *options) settle(nodes string) error {
	if nodes == "" {
		nodes = "1000,10000"
		if o.quick {
			nodes = "1000"
		}
	}
	o.nodes = nil
	for _, f := range strings.Split(nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 999999 {
			return fmt.Errorf("-nodes: %q is not a node count from 1 to 999999", f)
		}
		if len(o.nodes) > 0 && n <= o.nodes[len(o.nodes)-1] {
			return fmt.Errorf("-nodes: sizes must ascend, %d after %d", n, o.nodes[len(o.nodes)-1])
		}
		o.nodes = append(o.nodes, n)
	}
	switch {
	case o.pairs == 0 && o.quick:
		o.pairs = 5
	case o.pairs == 0:
		o.pairs = minPairs
	case o.pairs < 1:
		return fmt.Errorf("-runs: %d pairs", o.pairs)
	case o.pairs < minPairs && !o.quick:
		return fmt.Errorf("-runs: %d pairs is too few for figures to report; at least %d, or -quick", o.pairs, minPairs)
	}
	return nil
}

// bench is one run's fixtures: the tools built for it, etcd, the clusters.
type bench struct {
	goBin      string
	storage    string // the storage plugin binary
	tmp        string
	endpoint   string
	client     *clientv3.Client
	runner     *runner
	trueBin    string
	hello      string
	linked     string // tools/bench/linked: the plugin's code, linked and started, printing the name
	sweep      string // runs a plugin call per line of its stdin, as core's metrics sweep
	front      string // the front binary (cmd/forwarder) as storage, the full one as its libexec/storage
	sweepNodes int    // nodes of the get-metrics sweep
	// gatewayGet reads a key over etcd's JSON gateway with the standard
	// library only (gatewaySource).
	gatewayGet string
	etcdctl    string
	goVersion  string // of the toolchain that built the plugins
	// pluginBuild is how the plugins were built (cgo, build tags), as
	// their build information records it: a dynamically linked plugin
	// starts slower than the same code linked statically.
	pluginBuild []string
	maxLoad     float64   // the highest 1-minute load average seen
	progress    io.Writer // where to say what is being measured, or nil
}

func run(ctx context.Context, o options, w, progress io.Writer) error {
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	b := &bench{goBin: o.goBin, storage: filepath.Join(bin, "storage"), trueBin: "/bin/true", progress: progress, sweepNodes: sweepNodes}
	if o.quick {
		b.sweepNodes = quickSweepNodes
	}
	if _, err := os.Stat(b.storage); err != nil {
		return fmt.Errorf("no storage binary in %s (make build): %w", bin, err)
	}
	// `storage serve` execs the daemon's binary beside it.
	if _, err := os.Stat(filepath.Join(bin, "libexec", "serve")); err != nil {
		return fmt.Errorf("no serve daemon binary in %s/libexec (make build): %w", bin, err)
	}
	if b.tmp, err = os.MkdirTemp("", "eru-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.tmp)
	start := time.Now().UTC()
	startLoad := b.sampleLoad()
	if err := b.sameToolchain(); err != nil {
		return err
	}
	if err := b.buildTools(); err != nil {
		return err
	}
	var stop func()
	if b.endpoint, b.client, stop, err = startEtcd(b.tmp); err != nil {
		return err
	}
	defer stop()

	fmt.Fprintf(w, "## Run of %s\n\n", start.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- command: `%s`\n", strings.Join(o.args, " "))
	for _, line := range b.machine() {
		fmt.Fprintf(w, "- %s\n", line)
	}
	fmt.Fprintf(w, "- load average at start: %s\n", startLoad)
	fmt.Fprintf(w, "- %d timed pairs per measure (subject, floor, subject, floor, …) after one untimed pair; every answer checked\n", o.pairs)

	var clusters []*cluster
	for _, n := range o.nodes {
		c, err := load(ctx, b, n)
		if err != nil {
			return fmt.Errorf("loading %d nodes: %w", n, err)
		}
		fmt.Fprintf(w, "- cluster: %s\n", c.describe())
		clusters = append(clusters, c)
		d, err := b.startDaemon(c)
		if err != nil {
			return err
		}
		defer d.stop()
	}
	pooled, err := loadCluster(ctx, b, o.nodes[0], benchPools)
	if err != nil {
		return fmt.Errorf("loading %d nodes sharing %d pools: %w", o.nodes[0], benchPools, err)
	}
	fmt.Fprintf(w, "- cluster: %s (no serve daemon: its measure is of the binary alone)\n", pooled.describe())
	fmt.Fprintf(w, "- each cluster's folder runs `storage serve` (its cache synced before any measure); a call through it is the front binary (cmd/forwarder) forwarding it over the unix socket, checked against the daemon's count of the calls it answered; the daemon's CPU time and memory are not counted in the call's\n")
	rssFloor, err := b.runner.run(command{argv: []string{b.trueBin}})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "- peak RSS is the process's own, read by wait4 in a small runner process; it reads no less than %.1f MiB (the runner's own)\n\n", mib(rssFloor))

	fmt.Fprint(w, tableHead)
	measures, err := b.measures(ctx, clusters, pooled)
	if err != nil {
		return err
	}
	for _, m := range measures {
		out, err := b.runMeasure(m, o.pairs)
		if err != nil {
			return err
		}
		out.row(w)
	}
	largest := clusters[len(clusters)-1]
	scraped, err := b.measureScrape(ctx, largest, o.pairs, b.rangeFloor(largest))
	if err != nil {
		return err
	}
	scraped.row(w)
	endLoad := b.sampleLoad()
	fmt.Fprintf(w, "\n- load average at end: %s; highest 1-minute load seen: %.2f on %d CPUs\n", endLoad, b.maxLoad, runtime.NumCPU())
	if b.maxLoad > float64(runtime.NumCPU()) {
		fmt.Fprintf(w, "- **taken under load** (load average above the number of CPUs): ratios hold better than absolute times, and both move\n")
	}
	fmt.Fprintf(w, "- took %s\n", time.Since(start).Round(time.Second))
	return nil
}

// sameToolchain refuses a storage binary built by another Go than the one
// that will build the hello-world floor: the floor of an exec'd Go plugin
// is a hello-world of the same toolchain.
func (b *bench) sameToolchain() error {
	info, err := buildinfo.ReadFile(b.storage)
	if err != nil {
		return fmt.Errorf("%s: reading its Go build information: %w", b.storage, err)
	}
	goVersion, err := goOutput("", b.goBin, "env", "GOVERSION")
	if err != nil {
		return err
	}
	if info.GoVersion != goVersion {
		return fmt.Errorf("%s was built by %s, the hello-world floor would be built by %s (-go): rebuild with the same toolchain", b.storage, info.GoVersion, goVersion)
	}
	b.goVersion = goVersion
	for _, st := range info.Settings {
		if st.Key == "CGO_ENABLED" || st.Key == "-tags" {
			b.pluginBuild = append(b.pluginBuild, st.Key+"="+st.Value)
		}
	}
	return nil
}

// buildTools builds the runner and the hello-world into the run's folder,
// and etcdctl (once, cached) at the etcd version the plugins use.
func (b *bench) buildTools() error {
	// Every plugin call runs itself unless its step says it may be
	// forwarded to the cluster's serve daemon.
	b.runner = &runner{path: filepath.Join(b.tmp, "runner"), env: append(pluginEnv(), "ERU_RESOURCE_NO_FORWARD=1")}
	// The floors are built as the plugins were: with cgo on (go's default
	// where a C compiler is found), a program linking net is dynamically
	// linked and every exec first runs the dynamic loader.
	cgo := b.cgoEnv()
	if err := goBuild(b.goBin, runnerSource, b.runner.path, cgo...); err != nil {
		return fmt.Errorf("building the runner: %w", err)
	}
	b.hello = filepath.Join(b.tmp, "hello")
	if err := goBuild(b.goBin, helloSource, b.hello, cgo...); err != nil {
		return fmt.Errorf("building the hello-world: %w", err)
	}
	b.sweep = filepath.Join(b.tmp, "sweep")
	if err := goBuild(b.goBin, sweepSource, b.sweep, cgo...); err != nil {
		return fmt.Errorf("building the sweep: %w", err)
	}
	if err := b.buildFront(); err != nil {
		return err
	}
	if err := b.buildLinked(); err != nil {
		return err
	}
	b.gatewayGet = filepath.Join(b.tmp, "gateway-get")
	if err := goBuild(b.goBin, gatewaySource, b.gatewayGet, cgo...); err != nil {
		return fmt.Errorf("building the gateway reader: %w", err)
	}
	var err error
	b.etcdctl, err = buildEtcdctl(b.goBin, "v"+version.Version, b.goVersion, cgo)
	return err
}

// cgoEnv is the plugins' CGO_ENABLED setting, for the go command that
// builds a floor.
func (b *bench) cgoEnv() []string {
	for _, st := range b.pluginBuild {
		if strings.HasPrefix(st, "CGO_ENABLED=") {
			return []string{st}
		}
	}
	return nil
}

// pluginEnv is this process's environment without the variables that would
// point the plugins at another config.
func pluginEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ERU_") && !strings.HasPrefix(kv, "ETCDCTL_") {
			env = append(env, kv)
		}
	}
	return env
}

// machine describes where the run is taken.
func (b *bench) machine() []string {
	model := runtime.GOARCH
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int64
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kib, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
		mem = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return []string{
		fmt.Sprintf("machine: %s, %d CPUs, %s RAM, Linux %s", model, runtime.NumCPU(), mem, strings.TrimSpace(string(kernel))),
		fmt.Sprintf("toolchain: %s built the plugins and builds the floors (hello-world, gateway reader, etcdctl), with `go build %s` and the plugins' CGO_ENABLED; the plugins' build settings: %s", b.goVersion, strings.Join(quoteAll(buildFlags), " "), strings.Join(b.pluginBuild, ", ")),
		fmt.Sprintf("etcd %s in a process of its own (embed), on loopback, data on %s; etcdctl %s built from go.etcd.io/etcd/etcdctl/v3", version.Version, os.TempDir(), version.Version),
	}
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		if strings.ContainsAny(v, " \t") {
			v = "'" + v + "'"
		}
		out[i] = v
	}
	return out
}

// sampleLoad reads /proc/loadavg, remembers the highest 1-minute figure
// and returns the three averages.
func (b *bench) sampleLoad() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	if one, err := strconv.ParseFloat(f[0], 64); err == nil && one > b.maxLoad {
		b.maxLoad = one
	}
	return strings.Join(f[:3], " ")
}

// measures is the table of what the bench times, one entry per figure
// (issue 13's targets beside them).
//
// With a front beside the binaries (make front), a forwarded single-node
// call through it is timed against the Go hello-world and against the same
// call without the daemon (issue 15's targets). The daemon's other figures
// (a capacity query through it, /metrics at the largest size, core's
// per-node get-metrics sweep) can join the same way: a step that starts
// nothing per run (the daemon is started once beside etcd) and a check.
func (b *bench) measures(ctx context.Context, clusters []*cluster, pooled *cluster) ([]measure, error) {
	small := clusters[0]
	trueStep := step{label: "`/bin/true`", cmd: fixed(command{argv: []string{b.trueBin}}), check: exactly("")}
	hello := step{label: "Go hello-world", cmd: fixed(command{argv: []string{b.hello}}), check: exactly("hello, world\n")}
	linked := step{label: "the plugin's linked code printing the name", cmd: fixed(command{argv: []string{b.linked}}), check: exactly("\"storage\"\n")}
	name := b.verb(small, "name", nil, exactly("\"storage\"\n"))
	nameFront := name
	nameFront.label = "`storage name` through the front"
	nameFront.cmd = b.viaFront(name.cmd)
	info := small.names[0] // used(0) == 0: no diffs
	write := small.names[min(3, small.n-1)]
	etcdGet := step{label: "`etcdctl get` of its record", cmd: fixed(b.etcdctlCmd(nil, "get", small.storageKey(info))), check: etcdctlRecord(small.storageKey(info), nodeIndex(info))}
	record, err := b.client.Get(ctx, small.storageKey(write))
	if err != nil {
		return nil, err
	}
	if len(record.Kvs) != 1 {
		return nil, fmt.Errorf("no record at %s", small.storageKey(write))
	}
	putValue := string(record.Kvs[0].Value)
	etcdPut := step{label: "`etcdctl put` of a record as large", cmd: fixed(b.etcdctlCmd(nil, "put", small.prefix+"/bench-scratch/"+write, putValue)), check: exactly("OK\n")}

	gatewayGet := step{label: "JSON gateway read of its record", cmd: fixed(command{argv: []string{b.gatewayGet, b.endpoint, small.storageKey(info)}, dir: b.tmp}),
		check: etcdctlRecord(small.storageKey(info), nodeIndex(info))}

	ms := []measure{
		{name: "Go hello-world (floor)", subject: hello, floor: trueStep},
		{name: "`etcdctl get` of one key (floor)", subject: etcdGet, floor: trueStep},
		{name: "read of one key over etcd's JSON gateway, standard library only", subject: gatewayGet, floor: etcdGet},
		{name: "`storage name` (no store)", subject: name, floor: hello, target: 1.5},
		{name: "the plugin's linked code, started, printing the name (floor)", subject: linked, floor: hello},
		{name: "`storage name` (no store), against its linked code", subject: name, floor: linked},
		// With the front installed (docs/serve.md), core execs the front,
		// which says the name itself.
		{name: "`storage name` through the front, as core runs it with the front installed", subject: nameFront, floor: hello, target: 1.5},
		{name: "`get-node-resource-info`, one node", floor: etcdGet, target: 0.7,
			subject: b.verb(small, "get-node-resource-info", map[string]any{"nodename": info, "workloads_resource": []any{}}, nodeInfoOf(nodeIndex(info)))},
		{name: "`set-node-resource-usage`, one write", floor: etcdPut, target: 1.0,
			subject: b.alternatingWrite(small, write), undoes: true},
	}
	req := map[string]any{"nodename": info, "workloads_resource": []any{}}
	cold := b.verb(small, "get-node-resource-info", req, nodeInfoOf(nodeIndex(info)))
	forwarded := cold
	forwarded.label = "`get-node-resource-info` through the front, forwarded"
	forwarded.cmd = withEnv(b.viaFront(cold.cmd), forwardedEnv)
	forwarded.readsStore = false // the daemon answers from its cache; its count checks the call
	cold.label = "the same call without a daemon"
	via := func() *daemonCalls {
		return &daemonCalls{addr: small.serveHTTP, verb: "get-node-resource-info", perRun: 1}
	}
	ms = append(ms,
		measure{name: "`get-node-resource-info` forwarded (serve)", subject: forwarded, floor: hello, target: 1.5, via: via()},
		measure{name: "`get-node-resource-info` forwarded (serve), against no daemon", subject: forwarded, floor: cold, target: 0.3, via: via()},
		// The least any exec'd call costs, against the same cold call: a
		// forwarded call cannot go under it.
		measure{name: "Go hello-world, against `get-node-resource-info` without a daemon (floor)", subject: hello, floor: cold})
	for _, c := range clusters {
		floor := b.rangeFloor(c)
		m := measure{name: fmt.Sprintf("capacity, %s nodes", thousands(c.n)), floor: floor,
			subject: b.verb(c, "get-nodes-deploy-capacity", map[string]any{"nodenames": c.names, "workload_resource": capacityRequest}, capacityOf(c.names))}
		switch c.n {
		case 1000:
			m.target = 1.5
		case 10000:
			m.target, m.rssTarget = 2, 40
		}
		ms = append(ms, m, measure{name: fmt.Sprintf("`get-metrics`, %s nodes", thousands(c.n)), floor: floor,
			subject: b.verb(c, "get-metrics", map[string]any{"nodes": refs(c.names)}, metricsOf(c.names))})
	}
	// The pools' records are read with the nodes, at their revision, and
	// their room dealt among the nodes (issue 14: ≤ 1.2× without pools).
	ms = append(ms, measure{
		name:    fmt.Sprintf("capacity, %s nodes sharing %d pools", thousands(pooled.n), pooled.pools),
		subject: b.verb(pooled, "get-nodes-deploy-capacity", map[string]any{"nodenames": pooled.names, "workload_resource": poolRequest}, capacityOf(pooled.names)),
		floor: step{label: "the same query without its pool volume",
			cmd: b.verb(pooled, "get-nodes-deploy-capacity", map[string]any{"nodenames": pooled.names, "workload_resource": capacityRequest}, nil).cmd, check: capacityOf(pooled.names)},
		target: 1.2,
	})
	for _, c := range clusters[1:] {
		query := map[string]any{"nodenames": small.names, "workload_resource": capacityRequest}
		ms = append(ms, measure{
			name:    fmt.Sprintf("capacity of %s nodes in a cluster of %s", thousands(small.n), thousands(c.n)),
			subject: b.verb(c, "get-nodes-deploy-capacity", query, capacityOf(small.names)),
			floor: step{label: fmt.Sprintf("the same query in a cluster of %s", thousands(small.n)),
				cmd: b.verb(small, "get-nodes-deploy-capacity", query, nil).cmd, check: capacityOf(small.names)},
			target: 1.2,
		})
	}
	for _, c := range clusters {
		ms = append(ms, b.serveMeasures(c)...)
	}
	return ms, nil
}

// verb is the step of one plugin call in cluster c's folder.
func (b *bench) verb(c *cluster, verb string, req any, want check) step {
	var in []byte
	if req != nil {
		in, _ = json.Marshal(req)
	}
	return step{label: verb, cmd: fixed(command{argv: []string{b.storage, verb}, dir: c.dir, stdin: in}), check: want, readsStore: verb != "name"}
}

// alternatingWrite adds 1 GiB to node's use of /data0 on even runs and
// takes it back on odd ones, so the node's state after a pair of runs is
// the state before them.
func (b *bench) alternatingWrite(c *cluster, node string) step {
	mk := func(incr bool) command {
		in, _ := json.Marshal(map[string]any{"nodename": node, "resource_request": map[string]any{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": incr})
		return command{argv: []string{b.storage, "set-node-resource-usage"}, dir: c.dir, stdin: in}
	}
	add, remove := mk(true), mk(false)
	return step{label: "set-node-resource-usage", check: alternatingUsage(nodeIndex(node)), cmd: func(i int) command {
		if i%2 == 0 {
			return add
		}
		return remove
	}}
}

// rangeFloor is etcdctl reading, in one transaction, exactly the keys a
// capacity query over the whole cluster needs: the storage records, the
// registrations, the sessions.
func (b *bench) rangeFloor(c *cluster) step {
	prefixes := []string{c.prefix + "/resource/storage/", c.prefix + "/nodes/", c.prefix + "/sessions/"}
	var in strings.Builder
	in.WriteString("\n")
	for _, p := range prefixes {
		fmt.Fprintf(&in, "get --prefix %s\n", p)
	}
	in.WriteString("\n\n")
	return step{
		label: "`etcdctl txn` of `get --prefix` of its records, registrations, sessions",
		cmd:   fixed(b.etcdctlCmd([]byte(in.String()), "txn")),
		check: etcdctlTxn(map[string]int{prefixes[0]: c.n, prefixes[1]: c.n, prefixes[2]: 0}),
	}
}

func (b *bench) etcdctlCmd(stdin []byte, args ...string) command {
	return command{argv: append([]string{b.etcdctl, "--endpoints=" + b.endpoint}, args...), dir: b.tmp, stdin: stdin}
}

func fixed(c command) func(int) command { return func(int) command { return c } }

func refs(names []string) []map[string]string {
	out := make([]map[string]string, len(names))
	for i, n := range names {
		out[i] = map[string]string{"podname": "pod", "nodename": n}
	}
	return out
}

// thousands prints n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

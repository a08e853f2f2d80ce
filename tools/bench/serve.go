package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The serve daemon's measures (docs/serve.md, issue 15): each cluster's
// folder also runs `storage serve`, started once beside etcd. The subject
// is the call as core makes it with the daemon installed: the small front
// binary (cmd/forwarder) forwarding it; the floor is the same call run by
// the full binary with ERU_RESOURCE_NO_FORWARD=1 (as every other measure
// runs), i.e. without the daemon. The daemon's own count of the calls it
// answered must grow by exactly the subject's calls, so a call that fell
// back to running itself fails the bench.

// forwardedEnv is the environment of a call that may go through the
// daemon: ERU_RESOURCE_NO_FORWARD unset (an entry without "=" unsets, see
// runner.run), as core runs a plugin. Not set to 0: the front's fallback
// appends ERU_RESOURCE_NO_FORWARD=1 to its environment before it execs the
// full binary, and a Go program reads the first of two entries, so with 0
// set the full binary would forward the call again and the daemon's count
// would not tell a front that forwarded from one that fell back.
var forwardedEnv = []string{"ERU_RESOURCE_NO_FORWARD"}

// sweepNodes is how many nodes core's get-metrics sweep asks for in the
// sweep measure (quickSweepNodes with -quick), and sweepParallel how many
// calls it keeps running at once: one, as a collector walking the nodes.
// (With the default flow control, concurrent get-metrics calls of one
// caller are refused while the metrics level lends its seats away: its
// limit response is reject, and its lower limit is 10% of its nominal
// seats.)
const (
	sweepNodes      = 1000
	quickSweepNodes = 100
	sweepParallel   = 1
)

// daemon is a `storage serve` running in a cluster's folder.
type daemon struct {
	cmd  *exec.Cmd
	http string // host:port of its /metrics
	log  string
}

// serveSection is the config section of the cluster's daemon.
func serveSection(addr string) string { return "serve:\n  http: " + addr + "\n" }

// freeAddr is a loopback address nobody listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startDaemon starts `storage serve` in c's folder and waits until its
// cache is synced.
func (b *bench) startDaemon(c *cluster) (*daemon, error) {
	d := &daemon{http: c.serveHTTP, log: filepath.Join(b.tmp, fmt.Sprintf("serve-%d.log", c.n))}
	logf, err := os.Create(d.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	d.cmd = exec.Command(b.storage, "serve")
	d.cmd.Dir, d.cmd.Env, d.cmd.Stdout, d.cmd.Stderr = c.dir, pluginEnv(), logf, logf
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + d.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if _, err := os.Stat(filepath.Join(c.dir, "eru-resources.sock")); err == nil {
					return d, nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.stop()
	return nil, fmt.Errorf("storage serve in %s not ready in 2 minutes; see %s", c.dir, d.log)
}

// stop ends the daemon with SIGTERM, as systemd would.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
}

// serveMeasures are the daemon's measures on cluster c: a capacity query
// over every node, and core's get-metrics sweep over b.sweepNodes nodes (one
// call per node, sweepParallel at a time), each through the daemon against
// the same without it.
func (b *bench) serveMeasures(c *cluster) []measure {
	capacity := b.verb(c, "get-nodes-deploy-capacity", map[string]any{"nodenames": c.names, "workload_resource": capacityRequest}, capacityOf(c.names))
	through := capacity
	through.label = "through the daemon"
	through.cmd = withEnv(b.viaFront(capacity.cmd), forwardedEnv)
	through.readsStore = false
	capacity.label = "the same query without it"
	ms := []measure{{name: fmt.Sprintf("capacity, %s nodes, through `storage serve`", thousands(c.n)), subject: through, floor: capacity,
		via: &daemonCalls{addr: c.serveHTTP, verb: "get-nodes-deploy-capacity", perRun: 1}}}
	if c.n == 10000 {
		ms[0].target = 0.2
	}
	// The daemon remembers a node's capacity for a request until the
	// node's record changes, so the measure above times repeated queries
	// (core asks for the same workload again and again in a deploy). Here
	// every run asks for a request the daemon has not seen: 100 GiB and i
	// bytes, which leaves every node's capacity as it is.
	fresh := func(i int) command {
		in, _ := json.Marshal(map[string]any{"nodenames": c.names, "workload_resource": map[string]any{
			"volumes": []string{fmt.Sprintf("AUTO:/data:rw:%d", volumeRequest+int64(i)+1)}}})
		return command{argv: []string{b.storage, "get-nodes-deploy-capacity"}, dir: c.dir, stdin: in}
	}
	ms = append(ms, measure{name: fmt.Sprintf("capacity, %s nodes, through `storage serve`, a request it has not seen", thousands(c.n)),
		subject: step{label: "through the daemon", cmd: withEnv(b.viaFront(fresh), forwardedEnv), check: capacityOf(c.names)},
		floor:   step{label: "the same query without it", cmd: fresh, check: capacityOf(c.names)},
		via:     &daemonCalls{addr: c.serveHTTP, verb: "get-nodes-deploy-capacity", perRun: 1}})
	swept := c.names[:min(b.sweepNodes, c.n)]
	var lines bytes.Buffer
	for _, n := range swept {
		in, _ := json.Marshal(map[string]any{"podname": "pod", "nodename": n})
		lines.Write(in)
		lines.WriteByte('\n')
	}
	sweep := command{argv: []string{b.sweep, "-p", fmt.Sprint(sweepParallel), b.storage, "get-metrics"}, dir: c.dir, stdin: lines.Bytes()}
	front := sweep
	front.argv = append(append([]string(nil), sweep.argv[:3]...), b.front, "get-metrics")
	ms = append(ms, measure{
		name:    fmt.Sprintf("`get-metrics` sweep, %s calls of one node, through `storage serve`", thousands(len(swept))),
		subject: step{label: "through the daemon", cmd: withEnv(fixed(front), forwardedEnv), check: sweepOf(swept)},
		floor:   step{label: "the same sweep without it", cmd: fixed(sweep), check: sweepOf(swept)},
		target:  0.2,
		via:     &daemonCalls{addr: c.serveHTTP, verb: "get-metrics", perRun: len(swept)},
	})
	// The same sweep exec'ing a Go hello-world per node: the least a sweep
	// of exec'd calls costs, so the sweep through the daemon cannot go under
	// its ratio.
	hellos := sweep
	hellos.argv = append(append([]string(nil), sweep.argv[:3]...), b.hello)
	ms = append(ms, measure{
		name:    fmt.Sprintf("a sweep of %s Go hello-world execs, against the `get-metrics` sweep without the daemon (floor)", thousands(len(swept))),
		subject: step{label: "a hello-world per node", cmd: fixed(hellos), check: exactly(strings.Repeat("hello, world\n", len(swept)))},
		floor:   step{label: "the same sweep without it", cmd: fixed(sweep), check: sweepOf(swept)},
	})
	return ms
}

// viaFront runs a step's commands through the front binary instead of the
// full one.
func (b *bench) viaFront(cmd func(int) command) func(int) command {
	return func(i int) command {
		c := cmd(i)
		c.argv = append([]string{b.front}, c.argv[1:]...)
		return c
	}
}

// daemonCalls names the calls a measure's subject makes through a daemon.
type daemonCalls struct {
	addr   string // the daemon's HTTP address
	verb   string
	perRun int
}

// answered is how many calls of the verb the daemon has answered (its
// eru_serve_requests_total{verb, result="ok"}).
func (v *daemonCalls) answered() (int, error) {
	body, err := scrape(v.addr)
	if err != nil {
		return 0, err
	}
	want := `eru_serve_requests_total{result="ok",verb="` + v.verb + `"} `
	for _, line := range strings.Split(string(body), "\n") {
		if n, ok := strings.CutPrefix(line, want); ok {
			var f float64
			if _, err := fmt.Sscan(n, &f); err != nil {
				return 0, fmt.Errorf("%s: %w", line, err)
			}
			return int(f), nil
		}
	}
	return 0, nil
}

// buildFront builds the front binary (cmd/forwarder) under the name
// storage, with the full binary as its libexec/storage, as docs/serve.md
// installs them.
func (b *bench) buildFront() error {
	dir := filepath.Join(b.tmp, "front")
	if err := os.MkdirAll(filepath.Join(dir, "libexec"), 0o755); err != nil {
		return err
	}
	b.front = filepath.Join(dir, "storage")
	if err := goCmd("", b.goBin, append(append([]string{"build"}, buildFlags...), "-o", b.front, "github.com/eru-extend/resources/cmd/forwarder")...); err != nil {
		return fmt.Errorf("building the front binary: %w", err)
	}
	return os.Symlink(b.storage, filepath.Join(dir, "libexec", "storage"))
}

// buildLinked builds tools/bench/linked, the floor of `storage name`: the
// plugin's code linked and started, printing the name. It is built from
// this tree with the plugins' build tags and cgo setting, by the toolchain that built them
// (sameToolchain), like the front; the bench runs from the tree that built
// -bin.
func (b *bench) buildLinked() error {
	b.linked = filepath.Join(b.tmp, "linked")
	args := append([]string{"build"}, buildFlags...)
	for _, st := range b.pluginBuild {
		if tags, ok := strings.CutPrefix(st, "-tags="); ok {
			args = append(args, "-tags", tags)
		}
	}
	if err := goCmdEnv("", b.goBin, b.cgoEnv(), append(args, "-o", b.linked, "github.com/eru-extend/resources/tools/bench/linked")...); err != nil {
		return fmt.Errorf("building the linked floor: %w", err)
	}
	return nil
}

// withEnv adds variables to a step's commands.
func withEnv(cmd func(int) command, env []string) func(int) command {
	return func(i int) command {
		c := cmd(i)
		c.env = append(append([]string(nil), c.env...), env...)
		return c
	}
}

// sweepOf wants one get-metrics answer per line, for each node in order.
func sweepOf(names []string) check {
	return func(i int, out []byte) error {
		lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
		if len(lines) != len(names) {
			return fmt.Errorf("%d answers, want %d", len(lines), len(names))
		}
		for k, line := range lines {
			if err := metricsOf(names[k:k+1])(i, line); err != nil {
				return fmt.Errorf("call %d: %w", k, err)
			}
		}
		return nil
	}
}

// sweepSource runs `-p P BINARY ARGS...` once per line of its stdin, that
// line as the call's stdin, P calls at a time, as core's metrics sweep runs
// a plugin per node; it prints the answers in the order of the lines and
// fails on the first call that fails or writes on stderr.
const sweepSource = `package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync"
)

func main() {
	p := flag.Int("p", 1, "calls at once")
	flag.Parse()
	argv := flag.Args()
	var lines [][]byte
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	outs := make([][]byte, len(lines))
	errs := make([]error, len(lines))
	next := make(chan int)
	var wg sync.WaitGroup
	for range *p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c := exec.Command(argv[0], argv[1:]...)
				c.Stdin = bytes.NewReader(lines[i])
				var out, errb bytes.Buffer
				c.Stdout, c.Stderr = &out, &errb
				if err := c.Run(); err != nil || errb.Len() > 0 {
					errs[i] = fmt.Errorf("call %d: %v: %s", i, err, errb.String())
				}
				outs[i] = out.Bytes()
			}
		}()
	}
	for i := range lines {
		next <- i
	}
	close(next)
	wg.Wait()
	w := bufio.NewWriter(os.Stdout)
	for i := range lines {
		if errs[i] != nil {
			fmt.Fprintln(os.Stderr, errs[i])
			os.Exit(1)
		}
		w.Write(outs[i])
	}
	w.Flush()
}
`

// scrapeOutcome is what the timed scrapes of /metrics gave.
type scrapeOutcome struct {
	name   string
	floor  []sample // the floor's runs, interleaved with the scrapes
	walls  []float64
	bytes  int
	ranges float64 // range requests etcd served during the timed scrapes
	label  string
}

// scrapeTarget is the most a scrape of every node may take (issue 15).
const scrapeTarget = 200 * time.Millisecond

// measureScrape times GET /metrics on c's daemon after each of pairs
// changes (a write under the prefix, so the daemon renders the nodes again
// rather than reusing its last rendering), interleaved with floor, and
// counts the range requests etcd (its own process) served during the
// scrapes: there must be none.
func (b *bench) measureScrape(ctx context.Context, c *cluster, pairs int, floor step) (scrapeOutcome, error) {
	o := scrapeOutcome{name: fmt.Sprintf("`/metrics`, %s nodes, rendered after a change", thousands(c.n)), label: floor.label}
	if b.progress != nil {
		fmt.Fprintf(b.progress, "bench: %s against %s, %d pairs\n", o.name, floor.label, pairs)
	}
	probe := b.verb(c, "get-node-resource-info", map[string]any{"nodename": c.names[0], "workloads_resource": []any{}}, nodeInfoOf(0))
	probe.cmd = withEnv(probe.cmd, forwardedEnv)
	probe.readsStore = false
	for i := -1; i < pairs; i++ {
		if _, err := b.client.Put(ctx, c.prefix+"/bench-scrape", fmt.Sprint(i)); err != nil {
			return o, err
		}
		// A forwarded read is linearizable: once it answers, the daemon's
		// cache holds the write, and the scrape renders it.
		if _, err := b.timed(probe, 0); err != nil {
			return o, fmt.Errorf("%s: %w", o.name, err)
		}
		before, err := etcdRanges(b.endpoint)
		if err != nil {
			return o, err
		}
		start := time.Now()
		body, err := scrape(c.serveHTTP)
		wall := time.Since(start)
		if err != nil {
			return o, fmt.Errorf("%s: %w", o.name, err)
		}
		after, err := etcdRanges(b.endpoint)
		if err != nil {
			return o, err
		}
		if err := scrapeOf(c, body); err != nil {
			return o, fmt.Errorf("%s: wrong answer: %w", o.name, err)
		}
		f, err := b.timed(floor, i+1)
		if err != nil {
			return o, fmt.Errorf("%s: floor %s: %w", o.name, floor.label, err)
		}
		if i >= 0 {
			o.walls = append(o.walls, float64(wall)/float64(time.Millisecond))
			o.floor = append(o.floor, f)
			o.ranges += after - before
			o.bytes = len(body)
		}
	}
	b.sampleLoad()
	return o, nil
}

func scrape(addr string) ([]byte, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return body, err
}

// scrapeOf wants every node's status and its storage gauges of used(i).
func scrapeOf(c *cluster, body []byte) error {
	statuses, used0 := 0, map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, `eru_node_status{nodename="`) && strings.HasSuffix(line, `status="READY"} 1`):
			statuses++
		case strings.HasPrefix(line, `storage_used{`):
			node := between(line, `nodename="`, `"`)
			used0[node] = line[strings.LastIndexByte(line, ' ')+1:]
		}
	}
	if statuses != c.n {
		return fmt.Errorf("%d nodes READY in eru_node_status, want %d", statuses, c.n)
	}
	if len(used0) != c.n {
		return fmt.Errorf("storage_used of %d nodes, want %d", len(used0), c.n)
	}
	for _, n := range c.names {
		if want := fmt.Sprint(used(nodeIndex(n))); used0[n] != want {
			return fmt.Errorf("node %s: storage_used %s, want %s", n, used0[n], want)
		}
	}
	return nil
}

func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return v
}

// etcdRanges is how many range requests the bench's etcd server has served
// (its etcd_mvcc_range_total), read from its /metrics on the client port:
// etcd runs in a process of its own (startEtcd), so this process's registry
// holds the counter of etcd's linked packages, never incremented.
func etcdRanges(endpoint string) (float64, error) {
	body, err := scrape(strings.TrimPrefix(endpoint, "http://"))
	if err != nil {
		return 0, fmt.Errorf("etcd's /metrics: %w", err)
	}
	found, t := false, 0.0
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, "etcd_mvcc_range_total")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", line, err)
		}
		found, t = true, t+v
	}
	if !found {
		return 0, fmt.Errorf("etcd_mvcc_range_total is not among etcd's metrics at %s", endpoint)
	}
	return t, nil
}

func (o scrapeOutcome) row(w io.Writer) {
	t, f := statOf(o.walls), statOf(series(o.floor, ms))
	ratios := make([]float64, len(o.walls))
	for i := range o.walls {
		ratios[i] = o.walls[i] / ms(o.floor[i])
	}
	r := statOf(ratios)
	verdict := fmt.Sprintf("≤ %d ms: met", scrapeTarget.Milliseconds())
	if t.median > float64(scrapeTarget.Milliseconds()) {
		verdict = fmt.Sprintf("≤ %d ms: missed", scrapeTarget.Milliseconds())
	}
	noRead := "no store read: met"
	if o.ranges != 0 {
		noRead = fmt.Sprintf("no store read: missed (%.0f etcd ranges)", o.ranges)
	}
	fmt.Fprintf(w, "| %s (%.1f MB of text; the daemon's own time, no process started) | %s | %s [%s–%s] ms | %s [%s–%s] ms | **%.2f×** [%.2f–%.2f] | – | – | – | %s; %s |\n",
		o.name, float64(o.bytes)/1e6, o.label, num(t.median), num(t.low), num(t.high), num(f.median), num(f.low), num(f.high),
		r.median, r.low, r.high, verdict, noRead)
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdDirEnv, set in the environment of this program, makes it the bench's
// etcd server instead (serveEtcd): etcd runs in a process of its own, as
// it does beside eru, so the bench's heap (three clusters' names and
// records) and its collections never slow etcd's answers.
const etcdDirEnv = "ERU_BENCH_ETCD_DIR"

// startEtcd starts an etcd server in a child process (this program again,
// with etcdDirEnv set), with its data under dir, on a free loopback port,
// and a client of it. The child ends when its stdin closes: at stop, or
// when this process dies.
func startEtcd(dir string) (endpoint string, client *clientv3.Client, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, err
	}
	child := exec.Command(self)
	child.Env = append(os.Environ(), etcdDirEnv+"="+dir)
	child.Stderr = os.Stderr
	in, err := child.StdinPipe()
	if err != nil {
		return "", nil, nil, err
	}
	out, err := child.StdoutPipe()
	if err != nil {
		return "", nil, nil, err
	}
	if err := child.Start(); err != nil {
		return "", nil, nil, fmt.Errorf("starting etcd's process: %w", err)
	}
	line := make(chan string, 1)
	read := make(chan struct{}) // closed once the child's stdout is read to its end
	go func() {
		defer close(read)
		s := bufio.NewScanner(out)
		s.Scan()
		line <- s.Text()
		_, _ = io.Copy(io.Discard, out)
	}()
	// Wait only once stdout is read to its end (os/exec's rule): the child
	// ends, closing it, when its stdin closes.
	end := func() { _ = in.Close(); <-read; _ = child.Wait() }
	select {
	case endpoint = <-line:
	case <-time.After(90 * time.Second):
		_ = child.Process.Kill()
		end()
		return "", nil, nil, fmt.Errorf("etcd did not start in 90s; see %s", filepath.Join(dir, "etcd.log"))
	}
	if !strings.HasPrefix(endpoint, "http://") {
		end()
		return "", nil, nil, fmt.Errorf("etcd's process did not start it (it printed %q); see %s", endpoint, filepath.Join(dir, "etcd.log"))
	}
	client, err = clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		end()
		return "", nil, nil, err
	}
	return endpoint, client, func() { _ = client.Close(); end() }, nil
}

// serveEtcd is the etcd process of startEtcd: it starts etcd with its data
// under dir, prints its client URL on a line of its own, and stops it once
// its stdin closes.
func serveEtcd(dir string) int {
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	// Room for a 100,000-node cluster's records and their revisions.
	cfg.QuotaBackendBytes = 8 << 30
	// The client port is chosen here, not by the listener: etcd's JSON
	// gateway calls the server at the address it listens on, which must
	// not be port 0.
	clientURL, err := freeLoopbackURL()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench etcd:", err)
		return 1
	}
	local, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*local}
	cfg.AdvertisePeerUrls = []url.URL{*local}
	cfg.InitialCluster = cfg.Name + "=" + local.String()
	server, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench etcd: starting etcd:", err)
		return 1
	}
	defer server.Close()
	select {
	case <-server.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "bench etcd: not ready in 60s; see", cfg.LogOutputs[0])
		return 1
	}
	fmt.Println("http://" + server.Clients[0].Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// freeLoopbackURL is an http URL on a loopback port free a moment ago.
func freeLoopbackURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, err
	}
	return url.Parse("http://" + addr)
}

// Sizes of the loaded nodes.
const (
	gib = int64(1) << 30
	tib = int64(1) << 40
)

// capacityRequest is the workload every capacity query asks for: 100 GiB
// volumes on any device.
var capacityRequest = map[string]any{"volumes": []string{"AUTO:/data:rw:100G"}}

// poolRequest is capacityRequest with a volume of poolVolumeGiB in the
// node's default pool besides.
var poolRequest = map[string]any{"volumes": []string{"AUTO:/data:rw:100G", fmt.Sprintf("POOL:/shared:rw:%dG", poolVolumeGiB)}}

const poolVolumeGiB = 10

const volumeRequest = 100 * gib

// seedResource is what add-node registers for the first node: two 1 TiB
// volume devices, a disk with IO quotas, a flat budget large enough never
// to bind the capacity query.
var seedResource = map[string]any{
	"volumes": []string{"/data0:1T", "/data1:1T"},
	"disks":   []string{"/dev/vda:/,/data0:1000:1000:1G:1G"},
	"storage": "4T",
}

// storageCapacity is the flat budget of the benchmark cluster: the 4 TiB asked plus the
// volumes' 2 TiB, which count in it.
const storageCapacity = 6 * tib

// cluster is a set of nodes loaded under a prefix of its own, and the
// plugin folder configured for it.
type cluster struct {
	n      int
	pools  int    // pools its nodes share (p0, p1, …), node i declaring p(i mod pools)
	prefix string // the etcd prefix
	dir    string // the plugin folder: the working directory of every call
	names  []string
	bytes  map[string][2]int // per key class ("resource/storage", "nodes"): keys, bytes
	// callTimeout is the etcd.call_timeout and etcd.dial_timeout the
	// plugins are given, when not their defaults.
	callTimeout string
	serveHTTP   string // the HTTP address of the folder's serve daemon
}

// defaultBudgetNodes is the largest cluster run with the plugins' default
// etcd.call_timeout (3 s for one verb's reads and writes) and
// etcd.dial_timeout (2 s, which also bounds a call's first read, made
// while the connection comes up): a larger one gets a minute for both, for
// on a loaded machine a whole-cluster read alone can take longer than 2 s
// (the cost model in BENCHMARKS.md).
const defaultBudgetNodes = 10000

// nodeName is the i-th node's name; names sort in index order.
func nodeName(i int) string { return fmt.Sprintf("node-%06d", i) }

// used is what node i holds of /data0 and of the flat budget: 0, 300 or
// 600 GiB, so that nodes answer different capacities.
func used(i int) int64 { return int64(i%3) * 300 * gib }

// wantCapacity is what node i can take of capacityRequest: whole 100 GiB
// volumes on the free space of each device (the flat budget is larger).
func wantCapacity(i int) int {
	return int((tib-used(i))/volumeRequest + tib/volumeRequest)
}

// storageKey is node's storage record key.
func (c *cluster) storageKey(node string) string { return c.prefix + "/resource/storage/" + node }

// load makes a cluster of n nodes: the first is added through the plugin
// (add-node, so every key it writes has the layout and format of the
// binary under test), the others are copies of its keys under their own
// names, with the usage of used(i), written in transactions of 100 keys.
func load(ctx context.Context, b *bench, n int) (*cluster, error) {
	return loadCluster(ctx, b, n, 0)
}

// poolCapacity is what each pool of a cluster with pools holds: room for
// every workload of the capacity query with poolRequest's pool volume on
// each of its nodes, and as much again, so that the pools never bind and
// the query answers what it answers without them.
func poolCapacity(n, pools int) string {
	perPool := (n + pools - 1) / pools
	return fmt.Sprintf("%dG", 2*perPool*wantCapacity(0)*poolVolumeGiB)
}

// loadCluster is load; with pools > 0, the first pools nodes are added
// declaring one pool each (p0, p1, …, at /mnt/p0, …), each pool is given
// poolCapacity, and node i is a copy of node i mod pools.
func loadCluster(ctx context.Context, b *bench, n, pools int) (*cluster, error) {
	c := &cluster{n: n, pools: pools, prefix: fmt.Sprintf("/bench-%d", n), dir: filepath.Join(b.tmp, fmt.Sprint(n)), names: make([]string, n)}
	if pools > 0 {
		c.prefix += "-pools"
		c.dir += "-pools"
	}
	for i := range c.names {
		c.names[i] = nodeName(i)
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	config := fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %q\n", b.endpoint, c.prefix)
	if n > defaultBudgetNodes {
		c.callTimeout = "60s"
		config += "  call_timeout: " + c.callTimeout + "\n  dial_timeout: " + c.callTimeout + "\n"
	}
	var err error
	if c.serveHTTP, err = freeAddr(); err != nil {
		return nil, err
	}
	config += serveSection(c.serveHTTP)
	for _, name := range []string{"storage.yaml", "compute.yaml"} {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(config), 0o644); err != nil {
			return nil, err
		}
	}
	seeds := c.names[:max(1, min(pools, n))]
	for k, seed := range seeds {
		resource := seedResource
		if pools > 0 {
			resource = maps.Clone(seedResource)
			resource["pools"] = []string{fmt.Sprintf("p%d:/mnt/p%d", k, k)}
		}
		in, _ := json.Marshal(map[string]any{"nodename": seed, "resource": resource})
		if err := b.plugin(c, in, "add-node"); err != nil {
			return nil, fmt.Errorf("add-node %s: %w", seed, err)
		}
		if pools > 0 {
			if err := b.plugin(c, nil, "pools", "set-capacity", fmt.Sprintf("p%d", k), poolCapacity(n, pools), "--if-version", "0"); err != nil {
				return nil, fmt.Errorf("pools set-capacity p%d: %w", k, err)
			}
		}
	}
	resp, err := b.client.Get(ctx, c.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	templates := make([][]*keyValue, len(seeds))
	for k, seed := range seeds {
		for _, kv := range resp.Kvs {
			if strings.HasSuffix(string(kv.Key), "/"+seed) {
				templates[k] = append(templates[k], &keyValue{key: string(kv.Key), value: kv.Value})
			}
		}
		if len(templates[k]) == 0 {
			return nil, fmt.Errorf("add-node %s wrote no key ending in its name under %s", seed, c.prefix)
		}
	}
	var batch []clientv3.Op
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := b.client.Txn(ctx).Then(batch...).Commit()
		batch = batch[:0]
		return err
	}
	for i, name := range c.names {
		seed := seeds[i%len(seeds)]
		for _, t := range templates[i%len(seeds)] {
			key := strings.TrimSuffix(t.key, seed) + name
			value := bytes.ReplaceAll(t.value, []byte(seed), []byte(name))
			if key == c.storageKey(name) {
				if value, err = withUsage(value, used(i)); err != nil {
					return nil, fmt.Errorf("%s: %w", key, err)
				}
			}
			batch = append(batch, clientv3.OpPut(key, string(value)))
			if len(batch) == 100 {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	c.bytes, err = keySizes(ctx, b.client, c.prefix)
	return c, err
}

// plugin runs the storage binary in c's folder and fails unless it exits
// 0 with nothing on stderr.
func (b *bench) plugin(c *cluster, stdin []byte, args ...string) error {
	s, err := b.runner.run(command{argv: append([]string{b.storage}, args...), dir: c.dir, stdin: stdin})
	if err == nil && (s.code != 0 || len(s.stderr) > 0) {
		err = fmt.Errorf("exit %d: %s", s.code, firstLine(string(s.stderr)))
	}
	return err
}

type keyValue struct {
	key   string
	value []byte
}

// withUsage sets a stored storage record's usage of /data0 and of the flat
// budget, keeping every other field as the plugin wrote it.
func withUsage(record []byte, u int64) ([]byte, error) {
	var rec map[string]any
	if err := json.Unmarshal(record, &rec); err != nil {
		return nil, err
	}
	usage, ok := rec["usage"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("record has no usage object: %s", record)
	}
	volumes, ok := usage["volumes"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("record's usage has no volumes: %s", record)
	}
	volumes["/data0"] = u
	usage["storage"] = u
	return json.Marshal(rec)
}

// keySizes counts the nodes' keys and their bytes under prefix by class:
// the path between the prefix and the node name ("resource/storage",
// "nodes").
func keySizes(ctx context.Context, client *clientv3.Client, prefix string) (map[string][2]int, error) {
	resp, err := client.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string][2]int{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), prefix+"/")
		i := strings.LastIndexByte(rest, '/')
		if i < 0 || nodeIndex(rest[i+1:]) < 0 {
			continue // not a node's key (a write's guard, a scratch key)
		}
		class := rest[:i]
		v := out[class]
		out[class] = [2]int{v[0] + 1, v[1] + len(kv.Key) + len(kv.Value)}
	}
	return out, nil
}

// describe says what the cluster holds, per class of key.
func (c *cluster) describe() string {
	classes := make([]string, 0, len(c.bytes))
	for k := range c.bytes {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	var parts []string
	total := 0
	for _, k := range classes {
		v := c.bytes[k]
		total += v[1]
		parts = append(parts, fmt.Sprintf("%s: %d keys, %d bytes each", k, v[0], v[1]/max(v[0], 1)))
	}
	timeout := ""
	if c.callTimeout != "" {
		timeout = "; plugins configured with etcd.call_timeout and etcd.dial_timeout " + c.callTimeout
	}
	shared := ""
	if c.pools > 0 {
		shared = fmt.Sprintf(" sharing %d pools of %s each (node i declares pool i mod %d)", c.pools, poolCapacity(c.n, c.pools), c.pools)
	}
	return fmt.Sprintf("%s nodes%s, %.1f MiB of keys and values (%s)%s", thousands(c.n), shared, float64(total)/(1<<20), strings.Join(parts, "; "), timeout)
}

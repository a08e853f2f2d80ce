// Command bench times the built plugin binaries as eru core runs them —
// whole processes, JSON on stdin — against a real etcd holding 1,000 and
// 10,000 node records, next to two floors measured in the same run: the exec
// of a trivial binary, and one etcdctl range read of the same keys. It
// prints a Markdown table of medians, peak RSS and the ratios to the floors.
//
//	go run ./tools/bench -bin ./bin -runs 15
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func main() {
	binDir := flag.String("bin", "bin", "folder holding the storage and compute binaries")
	runs := flag.Int("runs", 15, "runs of each measurement; the median is reported")
	etcdBin := flag.String("etcd", "etcd", "etcd server binary")
	etcdctl := flag.String("etcdctl", "etcdctl", "etcdctl binary")
	sizes := flag.String("nodes", "1000,10000", "node counts to load")
	flag.Parse()
	if err := run(*binDir, *etcdBin, *etcdctl, *sizes, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type result struct {
	name   string
	median time.Duration
	rssKB  int64
}

func run(binDir, etcdBin, etcdctl, sizes string, runs int) error {
	bin, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "eru-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	endpoint, stop, err := startEtcd(etcdBin, dir)
	if err != nil {
		return err
	}
	defer stop()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer client.Close()

	fmt.Printf("machine: %s, %d CPUs, %s; etcd %s on loopback; %d runs each, medians\n\n", cpuModel(), runtime.NumCPU(), runtime.Version(), etcdVersion(etcdBin), runs)
	trivial, err := measure(runs, func() *exec.Cmd { return exec.Command("/bin/true") }, nil)
	if err != nil {
		return err
	}
	fmt.Printf("floor: exec of /bin/true %s\n\n", fmtDur(trivial.median))

	for _, field := range strings.Split(sizes, ",") {
		var n int
		if _, err := fmt.Sscan(field, &n); err != nil {
			return fmt.Errorf("-nodes: %q", field)
		}
		prefix := fmt.Sprintf("/bench-%d", n)
		if err := load(client, prefix, n); err != nil {
			return err
		}
		pdir := filepath.Join(dir, fmt.Sprint(n))
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return err
		}
		config := fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %q\n", endpoint, prefix)
		for _, name := range []string{"storage.yaml", "compute.yaml"} {
			if err := os.WriteFile(filepath.Join(pdir, name), []byte(config), 0o644); err != nil {
				return err
			}
		}
		rangeRead, err := measure(runs, func() *exec.Cmd {
			return exec.Command(etcdctl, "--endpoints", endpoint, "get", "--prefix", prefix+"/resource/storage/")
		}, map[string]string{"ETCDCTL_API": "3"})
		if err != nil {
			return err
		}
		names := make([]string, n)
		for i := range names {
			names[i] = nodeName(i)
		}
		verb := func(name, verb string, req any) (result, error) {
			in, err := json.Marshal(req)
			if err != nil {
				return result{}, err
			}
			r, err := measureIn(runs, pdir, in, func() *exec.Cmd { return exec.Command(filepath.Join(bin, "storage"), verb) })
			r.name = name
			return r, err
		}
		var rows []result
		for _, c := range []struct {
			name, verb string
			req        any
		}{
			{"get-node-resource-info (1 node)", "get-node-resource-info", map[string]any{"nodename": names[0], "workloads_resource": []any{}}},
			{"calculate-deploy (1 node, 10 workloads)", "calculate-deploy", map[string]any{"nodename": names[1], "deploy_count": 10, "workload_resource_request": map[string]any{"volumes": []string{"AUTO:/data:rw:100G"}}}},
			{"set-node-resource-usage (1 node, write)", "set-node-resource-usage", map[string]any{"nodename": names[2], "resource_request": map[string]any{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true}},
			{fmt.Sprintf("get-nodes-deploy-capacity (%d nodes)", n), "get-nodes-deploy-capacity", map[string]any{"nodenames": names, "workload_resource": map[string]any{"volumes": []string{"AUTO:/data:rw:100G"}}}},
			{fmt.Sprintf("get-metrics (%d nodes)", n), "get-metrics", map[string]any{"nodes": refs(names)}},
		} {
			r, err := verb(c.name, c.verb, c.req)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			rows = append(rows, r)
		}
		fmt.Printf("### %d nodes (records: %s)\n\n", n, recordsSize(client, prefix))
		fmt.Printf("floor: etcdctl range read of the %d storage records %s, peak RSS %d MiB\n\n", n, fmtDur(rangeRead.median), rangeRead.rssKB>>10)
		fmt.Println("| verb | median | peak RSS | × exec floor | × etcdctl floor |")
		fmt.Println("|---|---|---|---|---|")
		for _, r := range rows {
			fmt.Printf("| %s | %s | %d MiB | %.1f | %.2f |\n", r.name, fmtDur(r.median), r.rssKB>>10,
				float64(r.median)/float64(trivial.median), float64(r.median)/float64(rangeRead.median))
		}
		fmt.Println()
	}
	return nil
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

func refs(names []string) []map[string]string {
	out := make([]map[string]string, len(names))
	for i, n := range names {
		out[i] = map[string]string{"podname": "pod", "nodename": n}
	}
	return out
}

// load writes n storage records shaped like the upstream comparison: two
// 1 TiB devices, a disk, a little usage; plus their registrations.
func load(client *clientv3.Client, prefix string, n int) error {
	ctx := context.Background()
	const tib = int64(1) << 40
	batch := []clientv3.Op{}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := client.Txn(ctx).Then(batch...).Commit()
		batch = batch[:0]
		return err
	}
	for i := range n {
		name := nodeName(i)
		used := int64(i%7) << 30
		rec := map[string]any{
			"capacity": map[string]any{
				"volumes": map[string]int64{"/data0": tib, "/data1": tib},
				"disks":   []map[string]any{{"device": "/dev/vda", "mounts": []string{"/", "/data0"}, "read_IOPS": 1000, "write_IOPS": 1000, "read_bps": 1 << 30, "write_bps": 1 << 30}},
				"storage": 4 * tib,
			},
			"usage": map[string]any{
				"volumes": map[string]int64{"/data0": used, "/data1": 0},
				"disks":   []map[string]any{{"device": "/dev/vda", "mounts": []string{"/", "/data0"}, "read_IOPS": 0, "write_IOPS": 0, "read_bps": 0, "write_bps": 0}},
				"storage": used,
			},
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		reg := fmt.Sprintf(`{"node_id":%q,"admission":"ADMITTED","drain":false,"isolated":false,"isolated_incarnation":0,"incarnation":0,"boot_id":"","registration_version":1,"created_at":%q,"updated_at":%q,"session_ever":false}`, name, now, now)
		batch = append(batch, clientv3.OpPut(prefix+"/resource/storage/"+name, string(data)), clientv3.OpPut(prefix+"/nodes/"+name, reg))
		if len(batch) >= 100 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func recordsSize(client *clientv3.Client, prefix string) string {
	resp, err := client.Get(context.Background(), prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return "?"
	}
	var total int
	for _, kv := range resp.Kvs {
		total += len(kv.Key) + len(kv.Value)
	}
	return fmt.Sprintf("%d keys, %.1f MiB", len(resp.Kvs), float64(total)/(1<<20))
}

func measure(runs int, mk func() *exec.Cmd, env map[string]string) (result, error) {
	return measureEnv(runs, "", nil, mk, env)
}

func measureIn(runs int, dir string, stdin []byte, mk func() *exec.Cmd) (result, error) {
	return measureEnv(runs, dir, stdin, mk, nil)
}

func measureEnv(runs int, dir string, stdin []byte, mk func() *exec.Cmd, env map[string]string) (result, error) {
	prepare := func(cmd *exec.Cmd) *bytes.Buffer {
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(stdin)
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		return &out
	}
	var times []time.Duration
	for range runs {
		cmd := mk()
		out := prepare(cmd)
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return result{}, fmt.Errorf("%s: %v: %s", cmd, err, firstLine(out.String()))
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	rss, err := peakRSS(mk, prepare)
	return result{median: times[len(times)/2], rssKB: rss}, err
}

// peakRSS runs the command once more under GNU time, which reports the
// peak resident set of the command alone. (A child started straight from
// this process inherits this process's high-water mark through vfork, so
// its own rusage would read too high.) It answers 0 without /usr/bin/time.
func peakRSS(mk func() *exec.Cmd, prepare func(*exec.Cmd) *bytes.Buffer) (int64, error) {
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		return 0, nil
	}
	report, err := os.CreateTemp("", "rss-")
	if err != nil {
		return 0, err
	}
	report.Close()
	defer os.Remove(report.Name())
	target := mk()
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", report.Name(), target.Path}, target.Args[1:]...)...)
	prepare(cmd)
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s: %v", target, err)
	}
	data, err := os.ReadFile(report.Name())
	if err != nil {
		return 0, err
	}
	var kb int64
	_, err = fmt.Sscan(string(data), &kb)
	return kb, err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

// startEtcd runs an etcd server on free loopback ports.
func startEtcd(bin, dir string) (string, func(), error) {
	client, peer := freePort(), freePort()
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	cmd := exec.Command(bin,
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL,
		"--quota-backend-bytes", fmt.Sprint(int64(4)<<30))
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting %s (install Debian's etcd-server): %w", bin, err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() }
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", client), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return endpoint, stop, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("etcd did not start; see %s", filepath.Join(dir, "etcd.log"))
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimPrefix(firstLine(string(out)), "etcd Version: ")
}

package serve_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/tests/testenv"
)

var measure = flag.Int("measure", 0, "runs of each call in TestMeasureForwardedCalls (0 skips it)")

// TestMeasureForwardedCalls prints, side by side in one run, the wall time
// of a forwarded single-node call, the same call run cold (no daemon) and
// the exec of a Go hello-world built by the same toolchain, on etcd:
//
//	go test ./tests/serve -run TestMeasure -measure 200 -v
//
// It asserts nothing about time (the machine may be loaded); it reports.
func TestMeasureForwardedCalls(t *testing.T) {
	if *measure == 0 {
		t.Skip("run with -measure N")
	}
	env := testenv.NewEtcd(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": []string{"/data0:1T"}, "storage": "2T"}}, nil)
	hello := buildHello(t)
	d := serveWithHTTP(t, env)

	stdin := []byte(`{"nodename":"n1","workloads_resource":[]}`)
	bin := testenv.Bin(t, "storage")
	run := func(path string, noForward bool, args ...string) time.Duration {
		c := exec.Command(path, args...)
		c.Dir = env.Dir
		c.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
		if noForward {
			c.Env = append(c.Env, "ERU_RESOURCE_NO_FORWARD=1")
		}
		c.Stdin = bytes.NewReader(stdin)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		start := time.Now()
		require.NoError(t, c.Run(), out.String())
		return time.Since(start)
	}
	front := thinFront(t) + "/storage"
	var helloT, fwdT, coldT, thinT, thinColdT []time.Duration
	for range 10 { // warm the page cache
		run(hello, false)
		run(bin, false, "get-node-resource-info")
		run(bin, true, "get-node-resource-info")
		run(front, false, "get-node-resource-info")
	}
	before := d.Forwarded(t)
	for range *measure {
		helloT = append(helloT, run(hello, false))
		fwdT = append(fwdT, run(bin, false, "get-node-resource-info"))
		coldT = append(coldT, run(bin, true, "get-node-resource-info"))
		thinT = append(thinT, run(front, false, "get-node-resource-info"))
		thinColdT = append(thinColdT, run(front, true, "get-node-resource-info"))
	}
	require.Equal(t, before+2*(*measure), d.Forwarded(t), "the forwarded runs went through the daemon")
	h, f, c, th, tc := median(helloT), median(fwdT), median(coldT), median(thinT), median(thinColdT)
	t.Logf("median of %d runs of get-node-resource-info on etcd: hello-world exec %s; full binary forwarded %s, cold %s; front (cmd/forwarder) forwarded %s, cold through the front %s",
		*measure, h, f, c, th, tc)
	sum := sumMetric(t, d, `eru_serve_request_duration_seconds_sum{verb="get-node-resource-info"}`)
	count := sumMetric(t, d, `eru_serve_request_duration_seconds_count{verb="get-node-resource-info"}`)
	t.Logf("inside the daemon: %s per call on average (the linearizable read included)", time.Duration(sum/count*float64(time.Second)).Round(time.Microsecond))
	t.Logf("full binary forwarded: %.2fx hello-world, %.2fx cold", float64(f)/float64(h), float64(f)/float64(c))
	t.Logf("front forwarded: %.2fx hello-world (goal <= 1.5), %.2fx cold (goal <= 0.3)", float64(th)/float64(h), float64(th)/float64(c))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// buildHello builds a Go hello-world with the same toolchain.
func buildHello(t *testing.T) string {
	dir := t.TempDir()
	src := "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello\\n\") }\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644))
	c := exec.Command("go", "build", "-o", "hello", ".")
	c.Dir = dir
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "hello")
}

// TestMeasureTenThousandNodes fills etcd with 10,000 nodes (copies of one
// node's records) and prints: a /metrics scrape, a capacity query over
// every node through the daemon and without it, and one node's get-metrics
// (core's sweep calls it once per node) through the daemon and without it.
func TestMeasureTenThousandNodes(t *testing.T) {
	if *measure == 0 {
		t.Skip("run with -measure N")
	}
	const nodes = 10000
	env := testenv.NewEtcd(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": []string{"/data0:1T"}, "storage": "2T"}}, nil)
	env.Call(t, "compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 16, "memory": "64G"}}, nil)
	client := env.Etcd.Client(t)
	ctx := context.Background()
	get := func(key string) string {
		resp, err := client.Get(ctx, env.Prefix+key)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, key)
		return string(resp.Kvs[0].Value)
	}
	stor, comp, reg := get("/resource/storage/n1"), get("/resource/compute/n1"), get("/nodes/n1")
	names := make([]string, nodes)
	for start := 0; start < nodes; start += 40 {
		var ops []clientv3.Op
		for i := start; i < min(start+40, nodes); i++ {
			n := fmt.Sprintf("m%05d", i)
			names[i] = n
			ops = append(ops,
				clientv3.OpPut(env.Prefix+"/resource/storage/"+n, stor),
				clientv3.OpPut(env.Prefix+"/resource/compute/"+n, comp),
				clientv3.OpPut(env.Prefix+"/nodes/"+n, strings.Replace(reg, `"node_id":"n1"`, `"node_id":"`+n+`"`, 1)))
		}
		_, err := client.Txn(ctx).Then(ops...).Commit()
		require.NoError(t, err)
	}
	d := serveWithHTTP(t, env)
	waitStatus(t, d, "/readyz", 200)

	var scrapes []time.Duration
	var body string
	for range 5 {
		start := time.Now()
		_, body = d.Get(t, "/metrics")
		scrapes = append(scrapes, time.Since(start))
	}
	require.Equal(t, nodes+1, strings.Count(body, `eru_node_status{nodename="`)/7)
	t.Logf("/metrics for %d nodes: first scrape (rendered) %s, median of 5 %s (an unchanged cache reuses its rendering), %d bytes",
		nodes, scrapes[0], median(scrapes), len(body))

	timed := func(noForward bool, verb string, stdin []byte) time.Duration {
		c := exec.Command(testenv.Bin(t, "storage"), verb)
		c.Dir = env.Dir
		c.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
		if noForward {
			c.Env = append(c.Env, "ERU_RESOURCE_NO_FORWARD=1")
		}
		c.Stdin = bytes.NewReader(stdin)
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		start := time.Now()
		require.NoError(t, c.Run(), errb.String())
		return time.Since(start)
	}
	capReq := mustJSON(t, obj{"nodenames": names, "workload_resource": obj{"volumes": []string{"AUTO:/data:rw:1G"}}})
	var fwd, cold []time.Duration
	for range 5 {
		fwd = append(fwd, timed(false, "get-nodes-deploy-capacity", capReq))
		cold = append(cold, timed(true, "get-nodes-deploy-capacity", capReq))
	}
	t.Logf("capacity query over %d nodes: forwarded %s, cold %s (%.2fx; goal <= 0.2)", nodes, median(fwd), median(cold), float64(median(fwd))/float64(median(cold)))
	fwd, cold = nil, nil
	for i := range *measure {
		req := mustJSON(t, obj{"podname": "p", "nodename": names[i%nodes]})
		fwd = append(fwd, timed(false, "get-metrics", req))
		cold = append(cold, timed(true, "get-metrics", req))
	}
	t.Logf("one node's get-metrics (the sweep's call): forwarded %s, cold %s (%.2fx; goal <= 0.2)", median(fwd), median(cold), float64(median(fwd))/float64(median(cold)))
}

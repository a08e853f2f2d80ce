package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/tests/testenv"
)

// countingProxy forwards TCP connections to an etcd server and counts the
// bytes clients send: what a plugin process sends during one call bounds
// the size of every request of that call, its transaction included.
type countingProxy struct {
	ln   net.Listener
	sent atomic.Int64
	wg   sync.WaitGroup
}

func newCountingProxy(t *testing.T, endpoint string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &countingProxy{ln: ln}
	target := strings.TrimPrefix(endpoint, "http://")
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.wg.Go(func() {
				// Counted as each chunk is forwarded, not when the
				// connection ends: the process may have exited (its
				// answer came back, so every byte it sent reached etcd)
				// before the proxy sees its connection close.
				_, _ = io.Copy(countingWriter{w: up, n: &p.sent}, c)
				_ = up.Close()
			})
			p.wg.Go(func() {
				_, _ = io.Copy(c, up)
				_ = c.Close()
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
	})
	return p
}

// countingWriter adds what it writes to n as it goes.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

func (p *countingProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

// written lists the keys (and the bytes of key and value) one etcd
// transaction put: every key under the prefix whose mod revision is the
// revision that transaction created, found from one key it wrote.
func written(t *testing.T, env *testenv.Env, oneKey string) (map[string]int, int64) {
	t.Helper()
	c := env.Etcd.Client(t)
	resp, err := c.Get(context.Background(), env.Prefix+oneKey)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	rev := resp.Kvs[0].ModRevision
	all, err := c.Get(context.Background(), env.Prefix+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	out := map[string]int{}
	for _, kv := range all.Kvs {
		if kv.ModRevision == rev {
			out[strings.TrimPrefix(string(kv.Key), env.Prefix)] = len(kv.Key) + len(kv.Value)
		}
	}
	return out, rev
}

// TestPoolRaceLargeUsageWrite is race 11: core records 500 workloads with
// two pool bindings each in one usage write. The write is one etcd
// transaction within etcd's limits (128 operations, 1.5 MiB), which the
// test server enforces: the keys it put, read back by their revision, are
// few, and the bytes the process sent for the whole call (measured at a
// proxy) stay under the request limit. Above the limits the write is
// refused with a clear error naming the limit, and nothing is written.
func TestPoolRaceLargeUsageWrite(t *testing.T) {
	t.Parallel()
	shared := testenv.SharedEtcd(t)
	proxy := newCountingProxy(t, shared.Endpoint)
	// Writes of records near etcd's size limit take a while on a loaded
	// machine: the calls get more than the production budget, which this
	// test does not measure.
	env := testenv.NewEtcd(t, testenv.WithEtcd(&testenv.Etcd{Endpoint: proxy.endpoint(), Dir: shared.Dir}), testenv.WithBudget(20*time.Second))
	addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a", "nfs1:/mnt/nfs1"}, "default-pool": "ceph-a"})
	env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "1P", "--if-version", "0")
	env.OpOK(t, "storage", nil, "pools", "set-capacity", "nfs1", "1P", "--if-version", "0")
	request := obj{"volumes": []string{"POOL@ceph-a:/a:rw:1G", "POOL@nfs1:/b:rw:2G"}}

	const workloads = 500
	d := deploy(t, env, "n1", workloads, request)
	t.Run("500 workloads with two pool bindings land in one transaction within etcd's limits", func(t *testing.T) {
		in, err := json.Marshal(obj{"nodename": "n1", "workloads_resource": d.WorkloadsResource, "delta": true, "incr": true})
		require.NoError(t, err)
		proxy.sent.Store(0)
		// The process's own bytes are measured: never forwarded to a daemon.
		res := env.ExecLocal(t, "storage", in, "set-node-resource-usage")
		sent := proxy.sent.Load()
		require.Equal(t, 0, res.Code, res.Stderr)

		puts, _ := written(t, env, "/resource/storage/n1")
		var putBytes int64
		for _, n := range puts {
			putBytes += int64(n)
		}
		require.Contains(t, puts, "/resource/storage/n1")
		require.Contains(t, puts, "/pools/ceph-a")
		require.Contains(t, puts, "/pools/nfs1")
		require.LessOrEqual(t, len(puts), 6, "the node record, two pool records, the registration, the write's guard: %v", keysOf(puts))
		require.LessOrEqual(t, len(puts), storetest.MaxTxnOps)
		require.Less(t, sent, int64(storetest.MaxRequestBytes), "what the process sent bounds its transaction")
		require.LessOrEqual(t, putBytes, sent)
		t.Logf("one transaction put %d keys (%d bytes of keys and values, %.2f of the 1.5 MiB limit); the process sent %d bytes in all (%.2f of it) for %d stdin bytes",
			len(puts), putBytes, float64(putBytes)/storetest.MaxRequestBytes, sent, float64(sent)/storetest.MaxRequestBytes, len(in))

		objs := poolObjects(t, env, "n1")
		require.Len(t, objs, 2*workloads)
		require.Equal(t, int64(workloads)*gib, poolGet(t, env, "ceph-a").Reserved)
		require.Equal(t, int64(workloads)*2*gib, poolGet(t, env, "nfs1").Reserved)
		exactPool(t, env, "ceph-a")
		exactPool(t, env, "nfs1")
	})

	t.Run("a write touching more pools than etcd takes compares is refused naming the limit, and writes nothing", func(t *testing.T) {
		var pools, bindings []string
		for i := range storetest.MaxTxnOps + 2 {
			id := fmt.Sprintf("p%03d", i)
			env.Put(t, "/pools/"+id, `{"pool_id":"`+id+`","capacity_bytes":1099511627776,"reserved_bytes":0,"version":1,"object_count":0,"cleanup_count":0,"declared_at":"2026-11-30T12:00:00Z","lost_at":null}`)
			pools = append(pools, id+":/mnt/"+id)
			bindings = append(bindings, fmt.Sprintf("POOL@%s:/d%03d:rw:1G", id, i))
		}
		before := env.Dump(t)
		line := env.Fail(t, "storage", "add-node", obj{"nodename": "wide", "resource": obj{"storage": "1T", "pools": pools, "default-pool": "p000"}})
		require.Contains(t, line, "resource_exhausted")
		require.Contains(t, line, "more operations than etcd takes in one transaction (a default etcd takes 128 operations")
		require.Equal(t, before, env.Dump(t))

		// Declared in two writes, the 130 pools are within the limits; one
		// workload drawing on all of them is not.
		half := len(pools) / 2
		addNode(t, env, "wide", obj{"storage": "1T", "pools": pools[:half], "default-pool": "p000"})
		env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "wide", "resource_request": obj{"pools": pools[half:]}, "delta": true, "incr": true}, nil)
		wl := deploy(t, env, "wide", 1, obj{"volumes": bindings}).WorkloadsResource
		before = env.Dump(t)
		line = env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "wide", "workloads_resource": wl, "delta": true, "incr": true})
		require.Contains(t, line, "resource_exhausted")
		require.Contains(t, line, "128 operations")
		require.Equal(t, before, env.Dump(t))
	})

	t.Run("a usage write whose node record outgrows etcd's request size is refused naming the limit, and writes nothing", func(t *testing.T) {
		// A node that already keeps 11,500 objects (1.5 MB of record, a
		// long pool id making each object larger), written as the plugin
		// would have stored them.
		bulk := "bulk" + strings.Repeat("-", 58) + "x"
		addNode(t, env, "bulky", obj{"storage": "1T", "pools": []string{bulk + ":/mnt/bulk"}})
		var rec map[string]any
		require.True(t, env.Record(t, "/resource/storage/bulky", &rec))
		const kept = 11500
		objs := map[string]any{}
		for i := range kept {
			objs[fmt.Sprintf("v-%016x", i)] = obj{"pool": bulk, "bytes": gib, "held": true}
		}
		rec["usage"].(map[string]any)["pool_objects"] = objs
		data, err := json.Marshal(rec)
		require.NoError(t, err)
		require.Less(t, len(data), storetest.MaxRequestBytes)
		env.Put(t, "/resource/storage/bulky", string(data))
		env.Put(t, "/pools/"+bulk, fmt.Sprintf(`{"pool_id":"`+bulk+`","capacity_bytes":%d,"reserved_bytes":%d,"version":1,"object_count":%d,"cleanup_count":0,"declared_at":"2026-11-30T12:00:00Z","lost_at":null}`, 1<<50, kept*gib, kept))
		exactPool(t, env, bulk)

		more := deploy(t, env, "bulky", 1000, obj{"volumes": []string{"POOL@" + bulk + ":/d:rw:1G"}}).WorkloadsResource
		before := env.Dump(t)
		line := env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "bulky", "workloads_resource": more, "delta": true, "incr": true})
		require.Contains(t, line, "resource_exhausted")
		require.Contains(t, line, "more bytes than etcd takes in one transaction")
		require.Contains(t, line, "1.5 MiB")
		require.Equal(t, before, env.Dump(t))
		exactPool(t, env, bulk)
	})
}

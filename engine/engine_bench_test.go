package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

const tib = int64(1) << 40

// seed writes n storage records (two 1 TiB devices, a disk, some usage)
// with their registrations into an embedded store.
func seed(b *testing.B, n int) (store.Store, []string) {
	return seedPools(b, n, 0)
}

// seedPools is seed with pools shared pools (p0, p1, …), node i declaring
// p(i mod pools), each pool with room for 1 PiB.
func seedPools(b *testing.B, n, pools int) (store.Store, []string) {
	b.Helper()
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{Prefix: "/eru", Create: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	ops, names := clusterOps(b, n, pools, 1<<50)
	require.NoError(b, s.Txn(context.Background(), nil, ops))
	return s, names
}

// clusterOps are the writes of seedPools: n nodes' records and
// registrations, and pools pool records holding poolBytes each.
func clusterOps(t testing.TB, n, pools int, poolBytes int64) ([]store.Op, []string) {
	names := make([]string, n)
	var ops []store.Op
	for i := range n {
		names[i] = fmt.Sprintf("node-%05d", i)
		used := int64(i%7) << 30
		node := storage.NewNode()
		node.Capacity.Volumes = map[string]int64{"/data0": tib, "/data1": tib}
		node.Capacity.Disks = []storage.Disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 1000, WriteIOPS: 1000, ReadBPS: 1 << 30, WriteBPS: 1 << 30}}
		node.Capacity.Storage = 4 * tib
		node.Usage.Volumes = map[string]int64{"/data0": used, "/data1": 0}
		node.Usage.Disks = []storage.Disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}}}
		node.Usage.Storage = used
		if pools > 0 {
			node.Capacity.Pools = map[string]pool.Declaration{fmt.Sprintf("p%d", i%pools): {Path: fmt.Sprintf("/mnt/p%d", i%pools)}}
		}
		rec, err := storage.Rules{}.Encode(node)
		require.NoError(t, err)
		reg, err := json.Marshal(nodes.NewRegistration(names[i], time.Now()))
		require.NoError(t, err)
		ops = append(ops, store.Op{Key: nodes.RecordPrefix("storage") + names[i], Value: rec}, store.Op{Key: nodes.RegistrationKey(names[i]), Value: reg})
	}
	for k := range pools {
		rec := pool.NewRecord(fmt.Sprintf("p%d", k), time.Now())
		rec.Capacity = new(poolBytes)
		data, err := rec.Encode()
		require.NoError(t, err)
		ops = append(ops, store.Op{Key: storage.PoolPrefix + rec.ID, Value: data})
	}
	return ops, names
}

func newEngine(s store.Store) *engine.Engine[*storage.Node, *storage.WorkloadRequest] {
	return &engine.Engine[*storage.Node, *storage.WorkloadRequest]{
		Res:       storage.Rules{},
		Open:      func(context.Context, bool) (store.Store, error) { return s, nil },
		Resources: []nodes.Resource{engine.Registered(storage.Rules{}), engine.Registered(overcommit.Rules{})},
		MaxDeploy: 10000,
	}
}

func raw(b testing.TB, v any) json.RawMessage {
	data, err := json.Marshal(v)
	require.NoError(b, err)
	return data
}

// BenchmarkDeployCapacity is get-nodes-deploy-capacity over many nodes on
// the embedded store: one read, each node decoded and scheduled.
func BenchmarkDeployCapacity(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("%d nodes", n), func(b *testing.B) {
			s, names := seed(b, n)
			e := newEngine(s)
			req := &types.Request{Nodenames: names, WorkloadResource: raw(b, map[string]any{"volumes": []string{"AUTO:/data:rw:100G"}})}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				out, err := e.Call(context.Background(), "get-nodes-deploy-capacity", req)
				require.NoError(b, err)
				require.Len(b, out.(types.DeployCapacity).Nodes, n)
			}
		})
	}
}

// BenchmarkDeployCapacityPools is the capacity query over 1,000 nodes
// sharing 10 pools, with a pool volume in the request (the pool records
// read with the nodes, their room dealt among them) and without (issue 14:
// the first within 1.2× the second).
func BenchmarkDeployCapacityPools(b *testing.B) {
	s, names := seedPools(b, 1000, 10)
	e := newEngine(s)
	for _, c := range []struct {
		name    string
		volumes []string
	}{
		{"1000 nodes sharing 10 pools, request without a pool volume", []string{"AUTO:/data:rw:100G"}},
		{"1000 nodes sharing 10 pools, request with a pool volume", []string{"AUTO:/data:rw:100G", "POOL:/shared:rw:10G"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := &types.Request{Nodenames: names, WorkloadResource: raw(b, map[string]any{"volumes": c.volumes})}
			b.ReportAllocs()
			for b.Loop() {
				out, err := e.Call(context.Background(), "get-nodes-deploy-capacity", req)
				require.NoError(b, err)
				require.Len(b, out.(types.DeployCapacity).Nodes, len(names))
			}
		})
	}
}

// BenchmarkMetrics is get-metrics for many nodes in one call.
func BenchmarkMetrics(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("%d nodes", n), func(b *testing.B) {
			s, names := seed(b, n)
			e := newEngine(s)
			refs := make([]types.NodeRef, n)
			for i, name := range names {
				refs[i] = types.NodeRef{Podname: "pod", Nodename: name}
			}
			req := &types.Request{Nodes: refs}
			b.ReportAllocs()
			for b.Loop() {
				_, err := e.Call(context.Background(), "get-metrics", req)
				require.NoError(b, err)
			}
		})
	}
}

// busyNode is a node with 16 devices, half of them in use, and a disk.
func busyNode(b *testing.B) (store.Store, *storage.Node) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "busy.db"), boltstore.Options{Prefix: "/eru", Create: true})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	node := storage.NewNode()
	for i := range 16 {
		dev := fmt.Sprintf("/data%d", i)
		node.Capacity.Volumes[dev] = tib
		if i%2 == 0 {
			node.Usage.Volumes[dev] = int64(i+1) << 35
			node.Usage.Storage += int64(i+1) << 35
		} else {
			node.Usage.Volumes[dev] = 0
		}
	}
	node.Capacity.Disks = []storage.Disk{{Device: "/dev/vda", Mounts: []string{"/"}, ReadIOPS: 100000, WriteIOPS: 100000, ReadBPS: 1 << 40, WriteBPS: 1 << 40}}
	node.Usage.Disks = []storage.Disk{{Device: "/dev/vda", Mounts: []string{"/"}}}
	node.Capacity.Storage = 64 * tib
	rec, err := storage.Rules{}.Encode(node)
	require.NoError(b, err)
	require.NoError(b, s.Txn(context.Background(), nil, []store.Op{{Key: nodes.RecordPrefix("storage") + "busy", Value: rec}}))
	return s, node
}

// BenchmarkCalculateDeployBusyNode plans 100 workloads of mixed bindings on
// a busy node.
func BenchmarkCalculateDeployBusyNode(b *testing.B) {
	s, _ := busyNode(b)
	e := newEngine(s)
	req := &types.Request{Nodename: "busy", DeployCount: 100, WorkloadResourceRequest: raw(b, map[string]any{
		"volumes": []string{"AUTO:/a:rw:10G:10:10:0:0", "AUTO:/b:rw:20G", "AUTO:/u:rw:0", "/var/log:/log:rw:0:5:5:0:0"},
	})}
	b.ReportAllocs()
	for b.Loop() {
		_, err := e.Call(context.Background(), "calculate-deploy", req)
		require.NoError(b, err)
	}
}

// BenchmarkCalculateReallocBusyNode grows one binding of a workload placed
// on the busy node and adds a new one.
func BenchmarkCalculateReallocBusyNode(b *testing.B) {
	s, _ := busyNode(b)
	e := newEngine(s)
	out, err := e.Call(context.Background(), "calculate-deploy", &types.Request{Nodename: "busy", DeployCount: 1, WorkloadResourceRequest: raw(b, map[string]any{
		"volumes": []string{"AUTO:/a:rw:10G", "AUTO:/m:mrw:100G"},
	})})
	require.NoError(b, err)
	workload := raw(b, out.(*types.Deploy).WorkloadsResource[0])
	req := &types.Request{Nodename: "busy", WorkloadResource: workload, WorkloadResourceRequest: raw(b, map[string]any{
		"volumes": []string{"AUTO:/a:rw:5G", "AUTO:/new:rw:50G"},
	})}
	b.ReportAllocs()
	for b.Loop() {
		_, err := e.Call(context.Background(), "calculate-realloc", req)
		require.NoError(b, err)
	}
}

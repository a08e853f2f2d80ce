package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

// TestAManyNodeQueryReadInPagesAnswersAsOneRead loads the same nodes,
// sharing ten pools, into etcd (which reads a many-node query in pages,
// the pool records in the first) and the embedded store (which reads it at
// once), and holds every many-node verb to the same answer on both.
func TestAManyNodeQueryReadInPagesAnswersAsOneRead(t *testing.T) {
	n := 1300 // more than two pages of 512 names
	if testing.Short() {
		n = 600
	}
	ctx := context.Background()
	// Each pool holds 80 workloads of 10 GiB: fewer than its nodes take.
	ops, names := clusterOps(t, n, 10, 80*10<<30)
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "pages.db"), boltstore.Options{Prefix: "/eru", Create: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bolt.Close() })
	require.NoError(t, bolt.Txn(ctx, nil, ops))
	e := storetest.SharedEtcd(t)
	etcd, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: fmt.Sprintf("/pages-%d", time.Now().UnixNano()), DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = etcd.Close() })
	for start := 0; start < len(ops); start += 100 {
		require.NoError(t, etcd.Txn(ctx, nil, ops[start:min(start+100, len(ops))]))
	}
	var _ store.NameReader = etcd
	// Out of order, with a node nobody knows and one named twice.
	asked := append([]string{"unknown", names[7]}, names...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(asked), func(i, j int) { asked[i], asked[j] = asked[j], asked[i] })
	refs := make([]types.NodeRef, len(asked))
	for i, name := range asked {
		refs[i] = types.NodeRef{Podname: "pod", Nodename: name}
	}
	for _, tc := range []struct {
		name, verb string
		req        *types.Request
	}{
		{"a capacity query", "get-nodes-deploy-capacity", &types.Request{Nodenames: asked, WorkloadResource: raw(t, map[string]any{"volumes": []string{"AUTO:/data:rw:100G"}})}},
		{"a capacity query dealing the pools' room", "get-nodes-deploy-capacity", &types.Request{Nodenames: asked, WorkloadResource: raw(t, map[string]any{"volumes": []string{"AUTO:/data:rw:100G", "POOL:/shared:rw:10G"}})}},
		{"a metrics sweep", "get-metrics", &types.Request{Nodes: refs}},
		{"a most-idle pick", "get-most-idle-node", &types.Request{Nodenames: asked}},
	} {
		t.Run(tc.name+" answers the same", func(t *testing.T) {
			want, err := newEngine(bolt).Call(ctx, tc.verb, tc.req)
			require.NoError(t, err)
			got, err := newEngine(etcd).Call(ctx, tc.verb, tc.req)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
	t.Run("a daemon whose cache cannot answer reads the store in pages instead", func(t *testing.T) {
		for _, tc := range []struct {
			name, verb string
			req        *types.Request
		}{
			{"capacity", "get-nodes-deploy-capacity", &types.Request{Nodenames: asked, WorkloadResource: raw(t, map[string]any{"volumes": []string{"AUTO:/data:rw:100G", "POOL:/shared:rw:10G"}})}},
			{"metrics", "get-metrics", &types.Request{Nodes: refs}},
		} {
			want, err := newEngine(bolt).Call(ctx, tc.verb, tc.req)
			require.NoError(t, err)
			behind := newEngine(etcd)
			reader := &notCached{}
			behind.Snapshots = reader
			got, err := behind.Call(ctx, tc.verb, tc.req)
			require.NoError(t, err, tc.name)
			require.Equal(t, want, got, tc.name)
			require.Equal(t, 1, reader.asked, "%s: the engine asked its snapshot reader once, then read the store", tc.name)
		}
	})
	t.Run("the pools' room is dealt whole", func(t *testing.T) {
		out, err := newEngine(etcd).Call(ctx, "get-nodes-deploy-capacity", &types.Request{Nodenames: asked, WorkloadResource: raw(t, map[string]any{"volumes": []string{"POOL:/shared:rw:10G"}})})
		require.NoError(t, err)
		require.Equal(t, 10*80, out.(types.DeployCapacity).Total)
	})
}

// notCached is a daemon's cache that cannot answer now (its watch behind
// etcd): every read is engine.ErrNotCached.
type notCached struct{ asked int }

func (n *notCached) ReadSnapshot(context.Context, []string, []string) (engine.Snapshot, error) {
	n.asked++
	return nil, engine.ErrNotCached
}

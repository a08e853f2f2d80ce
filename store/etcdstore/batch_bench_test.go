package etcdstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
)

// BenchmarkReadNodes reads 1,000 nodes' three keys (record, registration,
// absent session): key by key (ReadKeys given no prefixes to read whole),
// and as the three prefixes.
func BenchmarkReadNodes(b *testing.B) {
	e := storetest.SharedEtcd(b)
	ctx := context.Background()
	s, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: fmt.Sprintf("/bench-%d", time.Now().UnixNano()), DialTimeout: 5 * time.Second})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	const n = 1000
	value := make([]byte, 400)
	var keys []string
	for start := 0; start < n; start += 50 {
		var ops []store.Op
		for i := start; i < start+50; i++ {
			ops = append(ops, store.Op{Key: fmt.Sprintf("/rec/node-%05d", i), Value: value}, store.Op{Key: fmt.Sprintf("/reg/node-%05d", i), Value: value[:250]})
		}
		require.NoError(b, s.Txn(ctx, nil, ops))
	}
	for i := range n {
		keys = append(keys, fmt.Sprintf("/rec/node-%05d", i), fmt.Sprintf("/reg/node-%05d", i), fmt.Sprintf("/ses/node-%05d", i))
	}
	b.Run("point reads", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			snap, err := s.ReadKeys(ctx, keys, nil)
			require.NoError(b, err)
			require.Len(b, snap.Items, 2*n)
		}
	})
	b.Run("prefixes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			snap, err := s.Read(ctx, nil, []string{"/rec/", "/reg/", "/ses/"})
			require.NoError(b, err)
			require.Len(b, snap.Items, 2*n)
		}
	})
}

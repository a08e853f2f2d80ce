package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/serve/cache"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
)

// BenchmarkCacheList is the cache's list of 10,000 nodes (a storage record
// and a registration each) as at a start or after a compaction, with every
// value decoded as it arrives and without decoding:
//
//	go test ./serve/cache -run XXX -bench CacheList -benchtime 10x
func BenchmarkCacheList(b *testing.B) {
	const n = 10000
	e := storetest.SharedEtcd(b)
	prefix := fmt.Sprintf("/cache-bench-%d", prefixes.Add(1))
	client := e.Client(b)
	ctx := context.Background()
	node := storage.NewNode()
	node.Capacity.Volumes = map[string]int64{"/data0": 1 << 40, "/data1": 1 << 40}
	node.Capacity.Storage = 4 << 40
	node.Usage.Volumes = map[string]int64{"/data0": 1 << 30, "/data1": 0}
	node.Usage.Storage = 1 << 30
	rec, err := storage.Rules{}.Encode(node)
	require.NoError(b, err)
	for start := 0; start < n; start += 50 {
		var ops []clientv3.Op
		for i := start; i < min(start+50, n); i++ {
			name := fmt.Sprintf("n%05d", i)
			reg, err := json.Marshal(nodes.NewRegistration(name, time.Now()))
			require.NoError(b, err)
			ops = append(ops, clientv3.OpPut(prefix+nodes.RecordPrefix("storage")+name, string(rec)), clientv3.OpPut(prefix+nodes.RegistrationKey(name), string(reg)))
		}
		_, err := client.Txn(ctx).Then(ops...).Commit()
		require.NoError(b, err)
	}
	decode := cmd.Decoders().Decode
	for _, side := range []struct {
		name   string
		decode cache.Decode
	}{{"decoded", decode}, {"raw", nil}} {
		b.Run(side.name, func(b *testing.B) {
			s, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: prefix, DialTimeout: 5 * time.Second})
			require.NoError(b, err)
			defer s.Close()
			c, err := cache.New(s, prefix, 5*time.Second, side.decode)
			require.NoError(b, err)
			defer c.Close()
			require.NoError(b, c.WaitReady(ctx))
			require.Equal(b, 2*n, c.Stats().Keys)
			b.ReportAllocs()
			for b.Loop() {
				require.NoError(b, c.RelistFresh(ctx))
			}
			require.Equal(b, 2*n, c.Stats().Keys)
		})
	}
}

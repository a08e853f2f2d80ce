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
	"github.com/eru-extend/resources/types"
)

func TestReadKeys(t *testing.T) {
	e := storetest.SharedEtcd(t)
	ctx := context.Background()
	s, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: fmt.Sprintf("/batch-%d", time.Now().UnixNano()), DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	const stored = 2000
	for start := 0; start < stored; start += 100 {
		var ops []store.Op
		for i := start; i < start+100; i++ {
			ops = append(ops, store.Op{Key: fmt.Sprintf("/k/%04d", i), Value: fmt.Appendf(nil, "v%d", i)})
		}
		require.NoError(t, s.Txn(ctx, nil, ops))
	}
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/shared", Value: []byte("s")}}))
	within := []string{"/k/", "/absent/"}
	for _, tc := range []struct {
		name    string
		present int // every other key from 0, plus half as many absent ones and a key outside within last
		whole   bool
	}{
		{"a read that fits one transaction is Read", 40, false},
		{"a read of few of the keys under the prefixes reads them key by key", 300, false},
		{"a read of most of the keys under the prefixes reads the prefixes whole", stored / 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keys []string
			for i := 0; i < tc.present; i++ {
				keys = append(keys, fmt.Sprintf("/k/%04d", 2*i))
				if i%2 == 0 {
					keys = append(keys, fmt.Sprintf("/absent/%d", i))
				}
			}
			keys = append(keys, "/shared")
			got, err := s.ReadKeys(ctx, keys, within)
			require.NoError(t, err)
			want, err := s.Read(ctx, keys, nil)
			require.NoError(t, err)
			require.Len(t, want.Items, tc.present+1)
			require.Equal(t, want.Revision, got.Revision)
			for _, k := range keys {
				require.Equal(t, want.Items[k], got.Items[k], k)
			}
			for k := range got.Items {
				require.True(t, k == "/shared" || k[:3] == "/k/", k)
			}
			if tc.whole {
				require.Len(t, got.Items, stored+1, "every key under the prefixes, and the one outside")
			} else {
				require.Len(t, got.Items, len(want.Items), "the keys asked for and no other")
			}
		})
	}
	t.Run("every key is read at the revision of the first transaction", func(t *testing.T) {
		keys := make([]string, 0, stored/4)
		for i := range stored / 4 {
			keys = append(keys, fmt.Sprintf("/k/%04d", 4*i))
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 30 {
				_ = s.Txn(ctx, nil, []store.Op{{Key: fmt.Sprintf("/k/%04d", stored-4-4*i), Value: []byte("changed")}})
			}
		}()
		for range 5 {
			snap, err := s.ReadKeys(ctx, keys, within)
			require.NoError(t, err)
			require.Len(t, snap.Items, len(keys))
			for k, it := range snap.Items {
				require.LessOrEqual(t, it.ModRevision, snap.Revision, k)
			}
		}
		<-done
	})
	t.Run("the store package's ReadKeys uses it", func(t *testing.T) {
		var st store.Store = s
		_, ok := st.(store.KeyReader)
		require.True(t, ok)
		snap, err := store.ReadKeys(ctx, st, []string{"/k/0001"}, within)
		require.NoError(t, err)
		require.Equal(t, "v1", string(snap.Items["/k/0001"].Value))
	})
}

func TestReadKeysOfADeadEtcdFailsFastNamingTheEndpoint(t *testing.T) {
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{
		Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/x", DialTimeout: 500 * time.Millisecond,
	})
	require.NoError(t, err)
	defer s.Close()
	keys := make([]string, 3*etcdstore.MaxTxnOps)
	for i := range keys {
		keys[i] = fmt.Sprintf("/k/%d", i)
	}
	start := time.Now()
	_, err = s.ReadKeys(context.Background(), keys, []string{"/k/"})
	require.Error(t, err)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, types.Unavailable, types.ClassOf(err))
	require.Contains(t, err.Error(), "etcd http://127.0.0.1:1: unreachable")
}

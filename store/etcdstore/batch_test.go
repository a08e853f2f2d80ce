package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

// loadNames stores n names' keys under /k/ and /j/ (names "%04d"), and
// /shared, in s.
func loadNames(t testing.TB, s *etcdstore.Store, n int) {
	ctx := context.Background()
	for start := 0; start < n; start += 50 {
		var ops []store.Op
		for i := start; i < min(start+50, n); i++ {
			ops = append(ops, store.Op{Key: fmt.Sprintf("/k/%04d", i), Value: fmt.Appendf(nil, "k%d", i)}, store.Op{Key: fmt.Sprintf("/j/%04d", i), Value: fmt.Appendf(nil, "j%d", i)})
		}
		require.NoError(t, s.Txn(ctx, nil, ops))
	}
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/shared", Value: []byte("s")}}))
}

func openEtcd(t testing.TB, dial time.Duration) *etcdstore.Store {
	e := storetest.SharedEtcd(t)
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: fmt.Sprintf("/batch-%d", time.Now().UnixNano()), DialTimeout: dial})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// every is the names of every step-th index in [from, to).
func every(from, to, step int) []string {
	var out []string
	for i := from; i < to; i += step {
		out = append(out, fmt.Sprintf("%04d", i))
	}
	return out
}

func TestReadNames(t *testing.T) {
	t.Parallel() // its own prefix or its own server
	ctx := context.Background()
	s := openEtcd(t, 2*time.Second)
	const stored = 2000
	loadNames(t, s, stored)
	under := []string{"/k/", "/j/", "/absent/"}
	for _, tc := range []struct {
		name  string
		names []string
		// pages: how many there are; extra: how many also hold keys
		// between the names they read (the spans read whole).
		pages, extra int
	}{
		{"a read that fits one transaction is one page of exactly its keys", every(0, 80, 2), 1, 0},
		{"names far apart in the store are read key by key", every(0, stored, 8), 1, 0},
		{"names close together are read as the spans between them", every(0, stored, 2), 2, 2},
		{"a run of names is read as its span", every(300, 1400, 1), 3, 0},
		{"names dense in one part and sparse in another are read each way where it costs less", append(every(0, 1024, 2), every(1024, stored, 9)...), 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rev int64
			pages, extra := 0, 0
			asked := map[string]bool{}
			for _, n := range tc.names {
				for _, p := range under {
					asked[p+n] = true
				}
			}
			err := s.ReadNames(ctx, store.NameRead{Keys: []string{"/shared"}, Names: tc.names, Under: under}, func(snap *store.Snapshot) error {
				rev = snap.Revision
				require.Equal(t, "s", string(snap.Items["/shared"].Value))
				return nil
			}, func(snap *store.Snapshot, idx []int) error {
				pages++
				require.Equal(t, rev, snap.Revision)
				for _, i := range idx {
					n := tc.names[i]
					var num int
					_, err := fmt.Sscanf(n, "%d", &num)
					require.NoError(t, err)
					require.Equal(t, fmt.Sprintf("k%d", num), string(snap.Items["/k/"+n].Value))
					require.Equal(t, fmt.Sprintf("j%d", num), string(snap.Items["/j/"+n].Value))
					_, ok := snap.Items["/absent/"+n]
					require.False(t, ok)
				}
				more := false
				for k := range snap.Items {
					if !asked[k] && k != "/shared" {
						more = true
						require.True(t, strings.HasPrefix(k, "/k/") || strings.HasPrefix(k, "/j/"), k)
					}
				}
				if more {
					extra++
				}
				return nil
			})
			require.NoError(t, err)
			require.Equal(t, tc.pages, pages)
			require.Equal(t, tc.extra, extra)
		})
	}
	t.Run("every key is read at the revision of the first transaction while writers change them", func(t *testing.T) {
		names := every(0, stored, 3)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 60 {
				_ = s.Txn(ctx, nil, []store.Op{{Key: fmt.Sprintf("/k/%04d", stored-1-3*i), Value: fmt.Appendf(nil, "changed %d", i)}})
			}
		}()
		for range 5 {
			var rev int64
			err := s.ReadNames(ctx, store.NameRead{Names: names, Under: under}, func(snap *store.Snapshot) error {
				rev = snap.Revision
				return nil
			}, func(snap *store.Snapshot, idx []int) error {
				for _, i := range idx {
					key := "/k/" + names[i]
					then, err := storetest.SharedEtcd(t).Client(t).Get(ctx, s.Prefix()+key, clientv3.WithRev(rev))
					require.NoError(t, err)
					require.Len(t, then.Kvs, 1)
					require.Equal(t, string(then.Kvs[0].Value), string(snap.Items[key].Value), key)
				}
				return nil
			})
			require.NoError(t, err)
		}
		<-done
	})
	t.Run("an error from the head ends the read before any page", func(t *testing.T) {
		stop := errors.New("stop")
		err := s.ReadNames(ctx, store.NameRead{Names: every(0, stored, 1), Under: under}, func(*store.Snapshot) error { return stop }, func(*store.Snapshot, []int) error {
			t.Fatal("a page after the head failed")
			return nil
		})
		require.ErrorIs(t, err, stop)
	})
	t.Run("the store package's ReadNames uses it", func(t *testing.T) {
		var st store.Store = s
		_, ok := st.(store.NameReader)
		require.True(t, ok)
	})
}

func TestReadNamesOfADeadEtcdFailsFastNamingTheEndpoint(t *testing.T) {
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{
		Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/x", DialTimeout: 500 * time.Millisecond,
	})
	require.NoError(t, err)
	defer s.Close()
	start := time.Now()
	err = s.ReadNames(context.Background(), store.NameRead{Names: every(0, 3*etcdstore.MaxTxnOps, 1), Under: []string{"/k/"}}, func(*store.Snapshot) error { return nil }, func(*store.Snapshot, []int) error { return nil })
	require.Error(t, err)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, types.Unavailable, types.ClassOf(err))
	require.Contains(t, err.Error(), "etcd http://127.0.0.1:1: unreachable")
}

func TestReadNamesPastItsDeadlineFailsAndNeverHangs(t *testing.T) {
	s := openEtcd(t, 2*time.Second)
	loadNames(t, s, 2000)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	pages := 0
	err := s.ReadNames(ctx, store.NameRead{Names: every(0, 2000, 1), Under: []string{"/k/", "/j/"}}, func(*store.Snapshot) error { return nil }, func(*store.Snapshot, []int) error {
		pages++
		// The engine decoding a page slower than the call's time: the
		// readers of the other pages give up meanwhile.
		time.Sleep(time.Second)
		return nil
	})
	require.Error(t, err)
	require.Equal(t, types.Unavailable, types.ClassOf(err), err.Error())
	require.Equal(t, 1, pages)
	require.Less(t, time.Since(start), 3*time.Second)
}

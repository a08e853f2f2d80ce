package cache_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/serve/cache"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
)

var prefixes atomic.Int64

func newCache(t *testing.T) (*cache.Cache, *etcdstore.Store, string) {
	t.Helper()
	prefix := fmt.Sprintf("/cache-test-%d", prefixes.Add(1))
	c, s := openCache(t, storetest.SharedEtcd(t).Endpoint, prefix, 5*time.Second)
	return c, s, prefix
}

// openCache opens a store and a cache (waiting wait) of prefix on the etcd
// at endpoint, closed when the test ends, and waits until the cache is
// synced.
func openCache(t *testing.T, endpoint, prefix string, wait time.Duration) (*cache.Cache, *etcdstore.Store) {
	t.Helper()
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{endpoint}, Prefix: prefix, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	c, err := cache.New(s, prefix, wait, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Close())
		require.NoError(t, s.Close())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.WaitReady(ctx))
	return c, s
}

func TestTheCache(t *testing.T) {
	ctx := context.Background()
	t.Run("a read after a write sees it, answered from memory", func(t *testing.T) {
		c, s, _ := newCache(t)
		for i := range 50 {
			v := []byte(fmt.Sprint(i))
			require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: v}}))
			got, ok, err := store.Get(ctx, c, "/k")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, v, got)
		}
		st := c.Stats()
		require.Equal(t, int64(50), st.Cached)
		require.Equal(t, int64(0), st.Direct)
	})
	t.Run("a revision moved by keys outside the prefix is reached by a progress notification", func(t *testing.T) {
		c, _, prefix := newCache(t)
		client := storetest.SharedEtcd(t).Client(t)
		for range 5 {
			_, err := client.Put(ctx, prefix+"-elsewhere/x", "1")
			require.NoError(t, err)
			_, err = store.Range(ctx, c, "/")
			require.NoError(t, err)
		}
		st := c.Stats()
		require.Equal(t, int64(5), st.Cached, "answered from the cache, not from etcd")
		require.Positive(t, st.ProgressReqs)
	})
	t.Run("while keys outside the prefix keep changing, a read sends its progress request along with its revision request and sees every write", func(t *testing.T) {
		c, s, prefix := newCache(t)
		client := storetest.SharedEtcd(t).Client(t)
		for i := range 20 {
			_, err := client.Put(ctx, prefix+"-elsewhere/x", fmt.Sprint(i))
			require.NoError(t, err)
			v := []byte(fmt.Sprint(i))
			require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: v}}))
			_, err = client.Put(ctx, prefix+"-elsewhere/y", fmt.Sprint(i))
			require.NoError(t, err)
			got, ok, err := store.Get(ctx, c, "/k")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, string(v), string(got), "read %d sees the write before it", i)
		}
		st := c.Stats()
		require.Equal(t, int64(20), st.Cached, "answered from the cache, not from etcd")
		require.Positive(t, st.ProgressAlong, "once a notification moved the revision, reads ask along")
	})
	t.Run("reads are whole snapshots with etcd's mod revisions, and writes compare them", func(t *testing.T) {
		c, s, _ := newCache(t)
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/a", Value: []byte("1")}, {Key: "/b", Value: []byte("1")}}))
		snap, err := c.Read(ctx, []string{"/a", "/missing"}, []string{"/b"})
		require.NoError(t, err)
		require.Len(t, snap.Items, 2)
		direct, err := s.Read(ctx, []string{"/a", "/b"}, nil)
		require.NoError(t, err)
		require.Equal(t, direct.Items["/a"].ModRevision, snap.Items["/a"].ModRevision)
		err = store.Update(ctx, c, []string{"/a"}, func(tx *store.Tx) error {
			tx.Put("/a", []byte("2"))
			return nil
		})
		require.NoError(t, err)
		stale := []store.Cond{{Key: "/a", ModRevision: snap.Items["/a"].ModRevision}}
		require.ErrorIs(t, c.Txn(ctx, stale, []store.Op{{Key: "/a", Value: []byte("3")}}), store.ErrConflict)
		got, _, err := store.Get(ctx, c, "/a")
		require.NoError(t, err)
		require.Equal(t, "2", string(got))
	})
	t.Run("deletes and expiring keys leave the cache", func(t *testing.T) {
		c, s, _ := newCache(t)
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/d", Value: []byte("1")}, {Key: "/ttl", Value: []byte("1"), TTL: time.Second}}))
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/d", Delete: true}}))
		_, ok, err := store.Get(ctx, c, "/d")
		require.NoError(t, err)
		require.False(t, ok)
		require.Eventually(t, func() bool {
			_, ok, err := store.Get(ctx, c, "/ttl")
			return err == nil && !ok
		}, 10*time.Second, 100*time.Millisecond)
	})
	t.Run("the stale view answers from memory without etcd and refuses writes", func(t *testing.T) {
		c, s, _ := newCache(t)
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/s", Value: []byte("1")}}))
		_, _, err := store.Get(ctx, c, "/s") // waits until the watch has it
		require.NoError(t, err)
		before := c.Stats()
		got, ok, err := store.Get(ctx, c.Stale(), "/s")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "1", string(got))
		require.Equal(t, before.Cached, c.Stats().Cached, "no linearizable read was made")
		require.ErrorIs(t, c.Stale().Txn(ctx, nil, []store.Op{{Key: "/s", Value: []byte("2")}}), store.ErrReadOnly)
	})
}

func TestACallsReadsTakeTheRevisionAskedAhead(t *testing.T) {
	ctx := context.Background()
	t.Run("the first read takes the revision asked when the call arrived and sees every write acknowledged before", func(t *testing.T) {
		c, s, _ := newCache(t)
		for i := range 20 {
			v := []byte(fmt.Sprint(i))
			require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: v}}))
			before := c.Stats()
			a := c.Ahead()
			got, ok, err := store.Get(ctx, a, "/k")
			a.Done()
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, string(v), string(got))
			after := c.Stats()
			require.Equal(t, before.Cached+1, after.Cached, "answered from memory")
			require.Equal(t, before.EtcdReads+1, after.EtcdReads, "one request to etcd: the revision asked ahead")
		}
	})
	t.Run("a later read of the same call asks etcd again, so it sees the call's own write", func(t *testing.T) {
		c, s, _ := newCache(t)
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/w", Value: []byte("1")}}))
		a := c.Ahead()
		defer a.Done()
		view, err := a.ReadSnapshot(ctx, []string{"/w"}, nil)
		require.NoError(t, err)
		got, _ := view.Get("/w")
		require.Equal(t, "1", string(got))
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/w", Value: []byte("2")}}))
		before := c.Stats()
		view, err = a.ReadSnapshot(ctx, []string{"/w"}, nil)
		require.NoError(t, err)
		got, _ = view.Get("/w")
		require.Equal(t, "2", string(got))
		require.Equal(t, before.EtcdReads+1, c.Stats().EtcdReads, "the second read asked etcd for its revision itself")
	})
	t.Run("a read whose context ends while the revision is on its way goes to etcd and reports it", func(t *testing.T) {
		c, _, _ := newCache(t)
		a := c.Ahead()
		defer a.Done()
		done, cancel := context.WithCancel(ctx)
		cancel()
		before := c.Stats()
		_, err := a.Read(done, []string{"/x"}, nil)
		require.ErrorContains(t, err, "no answer in time", "etcd's failure, as the store reports it")
		require.Equal(t, before.Direct+1, c.Stats().Direct)
		require.Equal(t, before.Cached, c.Stats().Cached)
	})
}

func TestAViewStaysAtItsRevisionWhileTheWatchGoesOn(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		keys     []string
		prefixes []string
	}{
		{"a read of a few keys among many (copied)", []string{"/a", "/b", "/c"}, nil},
		{"a read of most keys (the cache's map, shared)", []string{"/a", "/b", "/c", "/k0", "/k1", "/k2", "/k3", "/k4", "/k5", "/k6"}, nil},
		{"a read of a prefix (shared)", []string{"/a"}, []string{"/"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cache, s, _ := newCache(t)
			ops := []store.Op{{Key: "/a", Value: []byte("1")}, {Key: "/b", Value: []byte("1")}}
			for i := range 20 {
				ops = append(ops, store.Op{Key: fmt.Sprintf("/k%d", i), Value: []byte("1")})
			}
			require.NoError(t, s.Txn(ctx, nil, ops))
			view, err := cache.ReadSnapshot(ctx, c.keys, c.prefixes)
			require.NoError(t, err)
			require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/a", Value: []byte("2")}, {Key: "/b", Delete: true}, {Key: "/c", Value: []byte("new")}}))
			later, err := cache.ReadSnapshot(ctx, c.keys, c.prefixes) // the watch has applied the write
			require.NoError(t, err)
			got, _ := later.Get("/a")
			require.Equal(t, "2", string(got), "a later read sees the write")
			_, ok := later.Get("/b")
			require.False(t, ok)
			got, _ = later.Get("/c")
			require.Equal(t, "new", string(got))
			got, _ = view.Get("/a")
			require.Equal(t, "1", string(got), "the earlier view keeps its revision")
			_, ok = view.Get("/b")
			require.True(t, ok, "a key deleted since is still in the earlier view")
			_, ok = view.Get("/c")
			require.False(t, ok, "a key created since is not in the earlier view")
			require.Less(t, view.Revision, later.Revision)
		})
	}
}

func TestARevisionOlderThanAWriteAppliedSinceIsNoReasonToList(t *testing.T) {
	ctx := context.Background()
	c, s, _ := newCache(t)
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("1")}}))
	_, _, err := store.Get(ctx, c, "/k") // the watch has applied it
	require.NoError(t, err)
	a := c.Ahead()
	defer a.Done()
	time.Sleep(200 * time.Millisecond) // etcd has answered the revision asked ahead
	// Another writer's write, acknowledged after the call began: the watch
	// applies it before the call reads, past the revision asked ahead.
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("2")}}))
	require.Eventually(t, func() bool {
		v, err := c.StaleView([]string{"/k"}, nil)
		require.NoError(t, err)
		got, _ := v.Get("/k")
		return string(got) == "2"
	}, 5*time.Second, time.Millisecond, "the watch has applied the write")
	before := c.Stats()
	got, ok, err := store.Get(ctx, a, "/k")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "2", string(got))
	after := c.Stats()
	require.True(t, after.Ready, "etcd did not go back: the cache stays synced")
	require.Equal(t, before.Cached+1, after.Cached, "answered from memory")
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, before.Restarts, c.Stats().Restarts, "no re-list")
}

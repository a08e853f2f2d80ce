package cache_test

import (
	"context"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/eru-extend/resources/serve/cache"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
)

// ownEtcd is an etcd of the test's own on fixed loopback ports, so that it
// can stop and start again (on its data, or on none) at the same address.
type ownEtcd struct {
	t       *testing.T
	server  *storetest.Etcd
	tune    func(*embed.Config)
	running bool
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func newOwnEtcd(t *testing.T) *ownEtcd {
	t.Helper()
	client, peer := freeAddr(t), freeAddr(t)
	e := &ownEtcd{t: t, tune: func(cfg *embed.Config) {
		c, _ := url.Parse("http://" + client)
		p, _ := url.Parse("http://" + peer)
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*c}, []url.URL{*c}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*p}, []url.URL{*p}
		cfg.InitialCluster = cfg.Name + "=" + p.String()
		cfg.TickMs, cfg.ElectionMs = 10, 100 // a lone member elects itself at once
	}}
	e.start(t.TempDir())
	t.Cleanup(func() {
		if e.running {
			e.server.Stop()
		}
	})
	return e
}

func (e *ownEtcd) start(dir string) {
	var err error
	e.server, err = storetest.StartEtcd(dir, e.tune)
	require.NoError(e.t, err)
	e.running = true
}

func (e *ownEtcd) stop() {
	e.server.Stop()
	e.running = false
}

// cacheOf opens a store and a cache (waiting wait) on the etcd.
func cacheOf(t *testing.T, e *ownEtcd, wait time.Duration) (*cache.Cache, *etcdstore.Store) {
	t.Helper()
	return openCache(t, e.server.Endpoint, "/p", wait)
}

// within runs f and fails the test when it has not returned by limit.
func within(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s still blocked after %s", what, limit)
	}
}

func TestTheCacheAcrossEtcdRestarts(t *testing.T) {
	ctx := context.Background()
	t.Run("with etcd down, a read and a readiness probe fail within their time, even while notifications move the revision", func(t *testing.T) {
		e := newOwnEtcd(t)
		c, s := cacheOf(t, e, 300*time.Millisecond)
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("1")}}))
		// A key outside the prefix: a progress notification moves the
		// revision, and reads then send their progress requests along.
		client := e.server.Client(t)
		_, err := client.Put(ctx, "/core/x", "1")
		require.NoError(t, err)
		for range 2 { // the first read's notification moves the revision; the second sends its request along
			_, _, err = store.Get(ctx, c, "/k")
			require.NoError(t, err)
		}
		require.Positive(t, c.Stats().ProgressAlong)
		e.stop()
		within(t, 10*time.Second, "a read with a 3 s deadline", func() {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, _, err := store.Get(rctx, c, "/k")
			require.Error(t, err)
		})
		within(t, 5*time.Second, "a 1 s readiness probe", func() {
			require.Error(t, c.Reachable(ctx, time.Second))
		})
	})
	t.Run("right after etcd restarts, a read answers what a direct read answers", func(t *testing.T) {
		e := newOwnEtcd(t)
		c, s := cacheOf(t, e, 300*time.Millisecond)
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("before")}}))
		e.stop()
		time.Sleep(500 * time.Millisecond)
		e.start(e.server.Dir)
		require.Eventually(t, func() bool {
			return s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("after")}}) == nil
		}, 10*time.Second, 10*time.Millisecond)
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		got, ok, err := store.Get(rctx, c, "/k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "after", string(got))
	})
	t.Run("an etcd whose revision went back (wiped) is read, never the copy of the one before", func(t *testing.T) {
		e := newOwnEtcd(t)
		c, s := cacheOf(t, e, 300*time.Millisecond)
		for range 20 {
			require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("before")}, {Key: "/gone", Value: []byte("x")}}))
		}
		_, _, err := store.Get(ctx, c, "/k")
		require.NoError(t, err)
		e.stop()
		e.start(e.t.TempDir()) // the same address, no data
		require.Eventually(t, func() bool {
			return s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("after")}}) == nil
		}, 10*time.Second, 10*time.Millisecond)
		for range 5 {
			got, ok, err := store.Get(ctx, c, "/k")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, "after", string(got))
			_, ok, err = store.Get(ctx, c, "/gone")
			require.NoError(t, err)
			require.False(t, ok, "a key the new etcd never had")
		}
		require.Eventually(t, c.Ready, 10*time.Second, 10*time.Millisecond, "the cache lists the new etcd")
		got, _, err := store.Get(ctx, c, "/k")
		require.NoError(t, err)
		require.Equal(t, "after", string(got))
	})
}

func TestAfterEtcdWentBackTheListKeepsNoValueOfTheEtcdBefore(t *testing.T) {
	ctx := context.Background()
	e := newOwnEtcd(t)
	// A wait long enough for the cache's connection to come back after
	// etcd restarts: the first read learns the revision went back.
	c, s := cacheOf(t, e, 5*time.Second)
	for range 10 {
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/filler", Value: []byte("x")}}))
	}
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("before")}}))
	got, _, err := store.Get(ctx, c, "/k")
	require.NoError(t, err)
	require.Equal(t, "before", string(got))
	modRev := c.Stats().Applied // /k's modification revision in the etcd before
	e.stop()
	e.start(e.t.TempDir()) // the same address, no data: its history is another
	require.Eventually(t, func() bool {
		return s.Txn(ctx, nil, []store.Op{{Key: "/other", Value: []byte("y")}}) == nil
	}, 10*time.Second, 10*time.Millisecond)
	client := e.server.Client(t)
	for {
		resp, err := client.Get(ctx, "/none")
		require.NoError(t, err)
		if resp.Header.Revision >= modRev-1 {
			require.Equal(t, modRev-1, resp.Header.Revision)
			break
		}
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/other", Value: []byte("y")}}))
	}
	// A read sees the revision went back and the cache lists again; before
	// it does, /k is written at the revision it had in the etcd before.
	_, ok, err := store.Get(ctx, c, "/k")
	require.NoError(t, err)
	require.False(t, ok)
	require.False(t, c.Ready(), "the cache lists again")
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("after")}}))
	direct, err := s.Read(ctx, []string{"/k"}, nil)
	require.NoError(t, err)
	require.Equal(t, modRev, direct.Items["/k"].ModRevision, "the same key at the same revision, another value")
	require.Eventually(t, c.Ready, 10*time.Second, 10*time.Millisecond, "the cache lists the new etcd")
	before := c.Stats()
	got, _, err = store.Get(ctx, c, "/k")
	require.NoError(t, err)
	require.Equal(t, "after", string(got), "not the value of the etcd before")
	require.Equal(t, before.Cached+1, c.Stats().Cached, "answered from memory")
}

func TestARelistAskedRightAfterAListIsNotLost(t *testing.T) {
	ctx := context.Background()
	var once atomic.Bool
	// A read that found etcd's revision gone back asks for a list just as
	// the cache has listed, before its watch has started.
	e := newOwnEtcd(t)
	s, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{e.server.Endpoint}, Prefix: "/p", DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	c, err := cache.NewListed(s, "/p", 300*time.Millisecond, func(c *cache.Cache) {
		if once.CompareAndSwap(false, true) {
			c.Relist()
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Close())
		require.NoError(t, s.Close())
	})
	require.Eventually(t, once.Load, 10*time.Second, 10*time.Millisecond, "the cache has listed")
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("1")}}))
	require.Eventually(t, c.Ready, 5*time.Second, 10*time.Millisecond, "the cache lists again and is synced")
	before := c.Stats()
	got, _, err := store.Get(ctx, c, "/k")
	require.NoError(t, err)
	require.Equal(t, "1", string(got))
	require.Equal(t, before.Cached+1, c.Stats().Cached, "answered from memory")
}

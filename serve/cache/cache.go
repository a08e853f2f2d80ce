// Package cache is the serve daemon's watch-fed cache of the etcd key space:
// a store.Store whose reads are answered from memory yet are linearizable,
// and whose writes are the underlying store's compare-and-swap transactions.
//
// One range read of the prefix fills it; one watch from that revision keeps
// it current. A read first asks etcd for its current revision (the header
// of a one-key read), then waits until the watch has applied that revision
// (asking etcd for a progress notification when no event would get it
// there) — so it sees every write acknowledged before it began, made
// through this daemon or not. A read that cannot be served that way within
// the configured wait goes to etcd. A compacted or broken watch re-lists and
// resumes; until then every read goes to etcd, never to a cache with a gap.
package cache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cornelk/hashmap"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/store"
)

// Underlying is the store the cache fronts: etcd, with its client.
type Underlying interface {
	store.Store
	store.Rereader
	Client() *clientv3.Client
}

// entry is one cached key.
type entry struct {
	value  []byte
	modRev int64
}

// Stats are the cache's counters, for metrics.
type Stats struct {
	Applied      int64 // the revision the cache has applied
	Restarts     int64 // watch restarts (compaction, cancellation, errors)
	Direct       int64 // reads that went to etcd
	Cached       int64 // reads answered from the cache
	Ready        bool
	Keys         int
	LastEtcdRev  int64 // the last current revision etcd told a read
	ProgressReqs int64
}

// Cache is a store.Store served from a watch of the prefix.
type Cache struct {
	under  Underlying
	client *clientv3.Client
	prefix string // etcd prefix, without the trailing slash
	wait   time.Duration

	// mu orders the watch's batches against readers: a reader holds it for
	// reading while it copies keys, so it sees whole transactions only.
	mu      sync.RWMutex
	kv      *hashmap.Map[string, *entry]
	applied atomic.Int64
	ready   atomic.Bool
	changed chan struct{} // closed and replaced whenever applied moves; under mu

	lastProgress atomic.Int64 // unix nanos of the last progress request sent

	restarts, direct, cached, progressReqs, lastEtcdRev atomic.Int64

	// streamCtx carries the metadata of the watch's stream (leader
	// required), so that progress requests reach that stream.
	streamCtx context.Context

	cancel context.CancelFunc
	done   chan struct{}
}

// New starts a cache of everything under prefix (the configured etcd
// prefix, e.g. "/eru-resources"). wait bounds how long a read waits for the
// watch before it reads etcd directly. Close stops the watch; it does not
// close under.
func New(under Underlying, prefix string, wait time.Duration) *Cache {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		under:   under,
		client:  under.Client(),
		prefix:  strings.TrimSuffix(prefix, "/"),
		wait:    wait,
		kv:      hashmap.New[string, *entry](),
		changed: make(chan struct{}),
		cancel:  cancel,
		done:    make(chan struct{}),
		// A watch on a member cut off from the leader fails instead of
		// waiting silently.
		streamCtx: clientv3.WithRequireLeader(context.Background()),
	}
	go c.run(ctx)
	return c
}

// Close stops the watch and waits for it to end.
func (c *Cache) Close() error {
	c.cancel()
	<-c.done
	return nil
}

// Ready reports whether the cache holds a complete, gap-free copy.
func (c *Cache) Ready() bool { return c.ready.Load() }

// Stats reports the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	keys := c.kv.Len()
	c.mu.RUnlock()
	return Stats{
		Applied: c.applied.Load(), Restarts: c.restarts.Load(), Direct: c.direct.Load(), Cached: c.cached.Load(),
		Ready: c.ready.Load(), Keys: keys, LastEtcdRev: c.lastEtcdRev.Load(), ProgressReqs: c.progressReqs.Load(),
	}
}

// WaitReady waits until the cache is ready or ctx ends.
func (c *Cache) WaitReady(ctx context.Context) error {
	for !c.ready.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// run lists and watches until Close, re-listing whenever the watch cannot
// go on without a gap.
func (c *Cache) run(ctx context.Context) {
	defer close(c.done)
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			c.restarts.Add(1)
			select { // do not spin against an etcd that is down
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		rev, err := c.list(ctx)
		if err != nil {
			continue
		}
		c.watch(ctx, rev)
	}
}

// list reads the whole prefix and replaces the cache with it.
func (c *Cache) list(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.client.Get(lctx, c.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	kv := hashmap.NewSized[string, *entry](uintptr(max(len(resp.Kvs)*2, 64)))
	for _, it := range resp.Kvs {
		kv.Set(strings.TrimPrefix(string(it.Key), c.prefix), &entry{value: it.Value, modRev: it.ModRevision})
	}
	c.mu.Lock()
	c.kv = kv
	c.advance(resp.Header.Revision, true)
	c.ready.Store(true)
	c.mu.Unlock()
	return resp.Header.Revision, nil
}

// advance records that the cache has applied rev; with reset it may move
// backwards (a re-list). Callers hold mu.
func (c *Cache) advance(rev int64, reset bool) {
	if !reset && rev <= c.applied.Load() {
		return
	}
	c.applied.Store(rev)
	close(c.changed)
	c.changed = make(chan struct{})
}

// watch applies the watch from rev+1 until it breaks.
func (c *Cache) watch(ctx context.Context, rev int64) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := c.client.Watch(wctx, c.prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range ch {
		if resp.CompactRevision != 0 || resp.Canceled || resp.Err() != nil {
			c.ready.Store(false)
			return
		}
		c.mu.Lock()
		if resp.IsProgressNotify() {
			// Sent only once every event up to the header has been sent.
			c.advance(resp.Header.Revision, false)
			c.mu.Unlock()
			continue
		}
		last := int64(0)
		for _, ev := range resp.Events {
			key := strings.TrimPrefix(string(ev.Kv.Key), c.prefix)
			if ev.Type == clientv3.EventTypeDelete {
				c.kv.Del(key)
			} else {
				c.kv.Set(key, &entry{value: ev.Kv.Value, modRev: ev.Kv.ModRevision})
			}
			last = ev.Kv.ModRevision
		}
		// A batch's header may be ahead of events still to come; the
		// events' own revision is what has been applied.
		c.advance(last, false)
		c.mu.Unlock()
	}
	c.ready.Store(false)
}

// currentRevision asks etcd for its current revision with one small
// linearizable read.
func (c *Cache) currentRevision(ctx context.Context) (int64, error) {
	resp, err := c.client.Get(ctx, c.prefix+"/", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// await waits until the cache has applied rev, asking etcd for progress
// notifications while it waits; false when the wait ran out.
func (c *Cache) await(ctx context.Context, rev int64, asked time.Time) bool {
	deadline := time.NewTimer(c.wait)
	defer deadline.Stop()
	for {
		c.mu.RLock()
		applied, changed := c.applied.Load(), c.changed
		c.mu.RUnlock()
		if !c.ready.Load() {
			return false
		}
		if applied >= rev {
			return true
		}
		// A progress request sent after rev was learnt brings a header at
		// or past it; one sent before may not, so send another.
		if c.lastProgress.Load() < asked.UnixNano() {
			c.lastProgress.Store(time.Now().UnixNano())
			c.progressReqs.Add(1)
			_ = c.client.RequestProgress(c.streamCtx)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-time.After(50 * time.Millisecond):
			asked = time.Now() // ask again: a request may have found the watch busy
		}
	}
}

// Read implements store.Store: linearizable, from memory when the watch is
// current, else from etcd.
func (c *Cache) Read(ctx context.Context, keys []string, prefixes []string) (*store.Snapshot, error) {
	if !c.ready.Load() {
		c.direct.Add(1)
		return c.under.Read(ctx, keys, prefixes)
	}
	rev, err := c.currentRevision(ctx)
	asked := time.Now()
	if err != nil {
		c.direct.Add(1)
		return c.under.Read(ctx, keys, prefixes) // reports etcd's failure as the store does
	}
	c.lastEtcdRev.Store(rev)
	if !c.await(ctx, rev, asked) {
		c.direct.Add(1)
		return c.under.Read(ctx, keys, prefixes)
	}
	c.cached.Add(1)
	return c.snapshot(keys, prefixes), nil
}

// Stale is a view of the cache that answers reads from memory as they are,
// without asking etcd: for metrics, which need no linearizability and must
// cost no store read. Writes are refused.
func (c *Cache) Stale() store.Store { return stale{c} }

type stale struct{ c *Cache }

func (s stale) Read(_ context.Context, keys []string, prefixes []string) (*store.Snapshot, error) {
	if !s.c.ready.Load() {
		return nil, errors.New("cache: not synced with etcd")
	}
	return s.c.snapshot(keys, prefixes), nil
}

func (s stale) Txn(context.Context, []store.Cond, []store.Op) error { return store.ErrReadOnly }
func (s stale) Close() error                                        { return nil }

// snapshot copies keys and prefixes out of the cache at one revision.
func (c *Cache) snapshot(keys []string, prefixes []string) *store.Snapshot {
	c.mu.RLock()
	defer c.mu.RUnlock()
	snap := &store.Snapshot{Revision: c.applied.Load(), Items: make(map[string]store.Item, len(keys))}
	for _, k := range keys {
		if e, ok := c.kv.Get(k); ok {
			snap.Items[k] = store.Item{Key: k, Value: e.value, ModRevision: e.modRev}
		}
	}
	if len(prefixes) > 0 {
		c.kv.Range(func(k string, e *entry) bool {
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					snap.Items[k] = store.Item{Key: k, Value: e.value, ModRevision: e.modRev}
					break
				}
			}
			return true
		})
	}
	return snap
}

// Txn implements store.Store: the underlying compare-and-swap transaction.
func (c *Cache) Txn(ctx context.Context, conds []store.Cond, ops []store.Op) error {
	return c.under.Txn(ctx, conds, ops)
}

// TxnOrRead implements store.Rereader.
func (c *Cache) TxnOrRead(ctx context.Context, conds []store.Cond, ops []store.Op, keys []string) (*store.Snapshot, error) {
	return c.under.TxnOrRead(ctx, conds, ops, keys)
}

// Reachable reports whether etcd answers a linearizable read within d.
func (c *Cache) Reachable(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if _, err := c.currentRevision(ctx); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}

// Lag is how many revisions the cache was behind etcd at the last read.
func (c *Cache) Lag() int64 { return max(0, c.lastEtcdRev.Load()-c.applied.Load()) }

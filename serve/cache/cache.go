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
//
// With a Decode function, each value is also decoded once, when the list or
// the watch delivers it, and kept beside its bytes: a key's decoding is that
// of its current modification revision, shared by every read (ReadSnapshot)
// until the key changes again.
package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/etcdwatch"
)

// Underlying is the store the cache fronts: etcd, and the configuration
// the cache makes its own watching client of.
type Underlying interface {
	store.Store
	store.Rereader
	Config() etcdstore.Config
}

// entry is one cached key at one modification revision; it never changes
// (a new revision is a new entry).
type entry struct {
	value   []byte
	modRev  int64
	decoded any // what Decode made of value; nil when it decodes nothing or failed
}

// Decode decodes the value of key ahead of reads; nil for a key it does not
// decode, or a value it cannot (the reader then decodes the bytes itself and
// reports the error). It must be safe for concurrent use.
type Decode func(key string, value []byte) any

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
	// ProgressAlong counts the progress requests sent together with a
	// read's revision request (of ProgressReqs).
	ProgressAlong int64
	// EtcdReads counts every read request the cache sent etcd: lists,
	// revision checks and direct reads (not the watch's own stream).
	EtcdReads int64
}

// Cache is a store.Store served from a watch of the prefix.
type Cache struct {
	under  Underlying
	client *clientv3.Client
	etcdKV pb.KVClient // etcd's KV service on client's connection
	// revisionKey is the one key whose count asks etcd for its revision.
	revisionKey []byte
	prefix      string // etcd prefix, without the trailing slash
	wait        time.Duration
	decode      Decode       // nil: values are not decoded
	listed      func(*Cache) // run between a list and its watch (tests only)

	// mu orders the watch's batches against readers: a reader holds it for
	// reading while it copies keys, so it sees whole transactions only. As
	// every access takes it, kv is a plain map (a lock-free map would buy
	// nothing; see docs/serve.md for why not cornelk/hashmap).
	mu sync.RWMutex
	kv map[string]*entry
	// shared is set when a View holds kv: the watch then applies its next
	// batch to a copy (set under mu read-locked, swapped under mu locked).
	shared  atomic.Bool
	applied atomic.Int64
	ready   atomic.Bool
	changed chan struct{} // closed and replaced whenever applied moves; under mu

	lastProgress atomic.Int64 // unix nanos of the last progress request sent
	// progressMoved is when a progress notification last moved the applied
	// revision: keys outside the prefix are being written, and a read's
	// revision will be past the watch's last event (see currentRevision).
	progressMoved atomic.Int64

	restarts, direct, cached, progressReqs, progressAlong, lastEtcdRev, etcdReads atomic.Int64

	// streamCtx carries the metadata of the watch's stream (leader
	// required), so that progress requests reach that stream.
	streamCtx context.Context
	// stopWatch ends the running watch (under mu), so that the cache
	// lists again.
	stopWatch context.CancelFunc

	cancel context.CancelFunc
	done   chan struct{}
}

// New starts a cache of everything under prefix (the configured etcd
// prefix, e.g. "/eru-resources"), watching with a clientv3 client of under's
// configuration. wait bounds how long a read waits for the watch before it
// reads etcd directly. Close stops the watch and closes the client; it does
// not close under. decode, when not nil, decodes each value as it arrives.
func New(under Underlying, prefix string, wait time.Duration, decode Decode) (*Cache, error) {
	return newCache(under, prefix, wait, decode, nil)
}

// newCache is New with a function run between each list and its watch
// (tests only).
func newCache(under Underlying, prefix string, wait time.Duration, decode Decode, listed func(*Cache)) (*Cache, error) {
	client, err := etcdwatch.Dial(under.Config())
	if err != nil {
		return nil, fmt.Errorf("etcd watch client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		under:   under,
		client:  client,
		etcdKV:  pb.NewKVClient(client.ActiveConnection()),
		prefix:  strings.TrimSuffix(prefix, "/"),
		wait:    wait,
		decode:  decode,
		listed:  listed,
		kv:      map[string]*entry{},
		changed: make(chan struct{}),
		cancel:  cancel,
		done:    make(chan struct{}),
		// A watch on a member cut off from the leader fails instead of
		// waiting silently.
		streamCtx: clientv3.WithRequireLeader(context.Background()),
	}
	c.revisionKey = []byte(c.prefix + "/")
	go c.run(ctx)
	return c, nil
}

// Close stops the watch, waits for it to end and closes the client.
func (c *Cache) Close() error {
	c.cancel()
	<-c.done
	return c.client.Close()
}

// Ready reports whether the cache holds a complete, gap-free copy.
func (c *Cache) Ready() bool { return c.ready.Load() }

// Stats reports the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	keys := len(c.kv)
	c.mu.RUnlock()
	return Stats{
		Applied: c.applied.Load(), Restarts: c.restarts.Load(), Direct: c.direct.Load(), Cached: c.cached.Load(),
		Ready: c.ready.Load(), Keys: keys, LastEtcdRev: c.lastEtcdRev.Load(), ProgressReqs: c.progressReqs.Load(), ProgressAlong: c.progressAlong.Load(),
		EtcdReads: c.etcdReads.Load(),
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
		if c.listed != nil {
			c.listed(c)
		}
		c.watch(ctx, rev)
	}
}

// list reads the whole prefix and replaces the cache with it. A key still
// at the revision and value the cache held keeps its decoding; the others
// are decoded over every CPU.
func (c *Cache) list(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c.etcdReads.Add(1)
	resp, err := c.client.Get(lctx, c.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	entries := make([]*entry, len(resp.Kvs))
	keys := make([]string, len(resp.Kvs))
	old := c.current()
	parallel(len(resp.Kvs), func(i int) {
		it := resp.Kvs[i]
		keys[i] = strings.TrimPrefix(string(it.Key), c.prefix)
		// The same revision of a key in another etcd's history (one that
		// went back: wiped, or restored) may hold another value.
		if e, ok := old[keys[i]]; ok && e.modRev == it.ModRevision && bytes.Equal(e.value, it.Value) {
			entries[i] = e
			return
		}
		entries[i] = c.entry(keys[i], it.Value, it.ModRevision)
	})
	kv := make(map[string]*entry, len(entries))
	for i, e := range entries {
		kv[keys[i]] = e
	}
	c.mu.Lock()
	c.kv = kv
	c.shared.Store(false) // no View holds the new map yet
	c.advance(resp.Header.Revision, true)
	c.ready.Store(true)
	c.mu.Unlock()
	return resp.Header.Revision, nil
}

// current is the map the cache serves; only the watch's goroutine, which
// alone changes it, may read it without the lock.
func (c *Cache) current() map[string]*entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.kv
}

// entry makes the cached entry of key at a revision, decoded.
func (c *Cache) entry(key string, value []byte, modRev int64) *entry {
	e := &entry{value: value, modRev: modRev}
	if c.decode != nil {
		e.decoded = c.decode(key, value)
	}
	return e
}

// parallel calls fn(i) for every i below n, over the CPUs when n is large.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/256)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
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

// relist marks the cache unsynced and ends its watch, which lists again.
func (c *Cache) relist() {
	c.mu.Lock()
	c.ready.Store(false) // under mu: see watch
	stop := c.stopWatch
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// watch applies the watch from rev+1 until it breaks.
func (c *Cache) watch(ctx context.Context, rev int64) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	c.mu.Lock()
	if !c.ready.Load() {
		// A relist was asked for since the list, before this watch could
		// be stopped: list again rather than watch on unsynced for good.
		c.mu.Unlock()
		return
	}
	c.stopWatch = cancel
	c.mu.Unlock()
	ch := c.client.Watch(wctx, c.prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range ch {
		if resp.CompactRevision != 0 || resp.Canceled || resp.Err() != nil {
			c.ready.Store(false)
			return
		}
		if resp.IsProgressNotify() {
			if resp.Header.Revision < c.applied.Load() {
				c.ready.Store(false) // another etcd: see linearizableAt
				return
			}
			// Sent only once every event up to the header has been sent.
			c.mu.Lock()
			if resp.Header.Revision > c.applied.Load() {
				c.progressMoved.Store(time.Now().UnixNano())
			}
			c.advance(resp.Header.Revision, false)
			c.mu.Unlock()
			continue
		}
		// Decode before taking the lock: readers wait for the batch only
		// while it is applied.
		keys := make([]string, len(resp.Events))
		entries := make([]*entry, len(resp.Events))
		for i, ev := range resp.Events {
			keys[i] = strings.TrimPrefix(string(ev.Kv.Key), c.prefix)
			if ev.Type != clientv3.EventTypeDelete {
				entries[i] = c.entry(keys[i], ev.Kv.Value, ev.Kv.ModRevision)
			}
		}
		c.mu.Lock()
		if c.shared.Swap(false) {
			// A View holds the map: it must not change under it.
			c.kv = maps.Clone(c.kv)
		}
		last := int64(0)
		for i, ev := range resp.Events {
			if entries[i] == nil {
				delete(c.kv, keys[i])
			} else {
				c.kv[keys[i]] = entries[i]
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
// linearizable read: the count of one key, sent as etcd's own range
// request on the client's connection, without clientv3's OpGet building
// and KV wrapper (the connection's interceptors still apply; a read whose
// revision cannot be had goes to etcd through the store).
func (c *Cache) currentRevision(ctx context.Context) (int64, error) {
	// While keys outside the prefix are being written (core's own, on a
	// shared etcd), etcd's revision is past the watch's last event at
	// almost every read, and the read would wait for a progress
	// notification asked for once the revision is known: a second round
	// trip. The request goes out with the revision's instead, and its
	// answer usually arrives with it. (A notification's header is a
	// revision all of whose events were sent; await still asks again
	// when this one is not far enough.)
	if now := time.Now().UnixNano(); now-c.progressMoved.Load() < int64(progressAlongFor) {
		c.lastProgress.Store(now)
		c.progressReqs.Add(1)
		c.progressAlong.Add(1)
		c.requestProgress(ctx)
	}
	// Bounded by the wait as well as the call: a connection still coming
	// back after etcd restarted would otherwise hold the read for the
	// whole call, with no time left for the direct read it then makes
	// (through the store's own connection).
	rctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	c.etcdReads.Add(1)
	resp, err := c.etcdKV.Range(rctx, &pb.RangeRequest{Key: c.revisionKey, CountOnly: true}, grpc.WaitForReady(true))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// requestProgress asks the watch's stream for a progress notification,
// waiting at most the cache's wait and ctx: while etcd is down the watch's
// goroutine is busy reconnecting and takes no request, and the caller (a
// read, a readiness probe) must not wait for etcd to come back. The
// context keeps the stream's metadata, so the request goes on the watch's
// own stream.
func (c *Cache) requestProgress(ctx context.Context) {
	pctx, cancel := context.WithTimeout(c.streamCtx, c.wait)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	_ = c.client.RequestProgress(pctx)
}

// progressAlongFor is how long after a progress notification last moved
// the applied revision reads send their progress request along with their
// revision request.
const progressAlongFor = 10 * time.Second

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
			c.requestProgress(ctx)
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
	if !c.linearizable(ctx) {
		return c.readDirect(ctx, keys, prefixes)
	}
	return c.snapshot(keys, prefixes), nil
}

// linearizable waits until the cache may answer a read that began now:
// false when the read must go to etcd instead.
func (c *Cache) linearizable(ctx context.Context) bool {
	return c.linearizableAt(ctx, nil)
}

// linearizableAt is linearizable with etcd's current revision taken from
// ahead when it holds one no read has taken yet (see Ahead), else asked
// for now.
func (c *Cache) linearizableAt(ctx context.Context, ahead *revision) bool {
	if !c.ready.Load() {
		return false
	}
	var (
		rev, floor int64
		asked      time.Time
		err        error
	)
	if ahead != nil && ahead.take() {
		rev, floor, asked, err = ahead.wait(ctx)
	} else {
		floor = c.applied.Load()
		rev, err = c.currentRevision(ctx)
		asked = time.Now()
	}
	if err != nil {
		return false // the direct read reports etcd's failure as the store does
	}
	if rev < floor {
		// etcd's revisions never go back, and the revision was asked for
		// after the cache had applied floor: this is another etcd at the
		// same address (wiped, or restored without a bump), whose history
		// the cache's copy is not. Read it directly until a fresh list.
		// (A revision below what the watch applied since it was asked for
		// is only an answer overtaken by later writes.)
		c.relist()
		return false
	}
	c.lastEtcdRev.Store(rev)
	if !c.await(ctx, rev, asked) {
		return false
	}
	c.cached.Add(1)
	return true
}

// revision is etcd's current revision asked for ahead of the read that
// will take it (Ahead).
type revision struct {
	done   chan struct{} // closed once rev, asked and err are set
	rev    int64
	floor  int64     // the revision the cache had applied when rev was asked for
	asked  time.Time // when etcd's answer arrived
	err    error
	taken  atomic.Bool
	cancel context.CancelFunc
}

// take claims the revision for one read; false once a read has.
func (r *revision) take() bool { return r.taken.CompareAndSwap(false, true) }

// wait waits for etcd's answer, at most until ctx ends.
func (r *revision) wait(ctx context.Context) (int64, int64, time.Time, error) {
	select {
	case <-r.done:
		return r.rev, r.floor, r.asked, r.err
	case <-ctx.Done():
		return 0, 0, time.Time{}, ctx.Err()
	}
}

// Ahead is the cache as one call reads it: etcd's current revision is
// asked for when Ahead is made, while the call gets ready to read, and
// its first linearizable read (Read, ReadSnapshot) takes that revision
// instead of asking etcd then. That read is still linearizable for the
// call: the revision was asked for after the call began (make Ahead only
// once the call has arrived), so it is at least that of every write
// acknowledged before. The call's later reads ask etcd themselves, as
// reads of the Cache do, so that a read after a write of the same call
// sees that write. Done must be called once the call ends.
type Ahead struct {
	c   *Cache
	rev *revision
}

// Ahead starts asking etcd for its current revision for one call's reads.
// Nothing is asked while the cache is not synced (its reads then go to
// etcd anyway).
func (c *Cache) Ahead() *Ahead {
	a := &Ahead{c: c}
	if !c.ready.Load() {
		return a
	}
	// Not bounded by the call's deadline, which the cache does not know:
	// the read that takes the revision waits for it at most until its own
	// context ends, and Done cancels the request.
	ctx, cancel := context.WithCancel(context.Background())
	r := &revision{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.done)
		r.floor = c.applied.Load()
		r.rev, r.err = c.currentRevision(ctx)
		r.asked = time.Now()
	}()
	a.rev = r
	// The goroutine just made waits in this processor's queue until the
	// caller blocks or an idle processor's thread wakes to take it: tens
	// of microseconds on the critical path of a call whose etcd round trip
	// it starts. Yielding runs it now; it blocks as soon as its request is
	// out, and the caller goes on preparing the call meanwhile.
	runtime.Gosched()
	return a
}

// Done ends the call: a revision no read took is no longer waited for.
func (a *Ahead) Done() {
	if a.rev != nil {
		a.rev.cancel()
	}
}

var (
	_ store.Store      = (*Ahead)(nil)
	_ store.Rereader   = (*Ahead)(nil)
	_ store.NameReader = (*Ahead)(nil)
)

// Read is the Cache's Read, on the revision asked ahead when it is the
// call's first.
func (a *Ahead) Read(ctx context.Context, keys []string, prefixes []string) (*store.Snapshot, error) {
	if !a.c.linearizableAt(ctx, a.rev) {
		return a.c.readDirect(ctx, keys, prefixes)
	}
	return a.c.snapshot(keys, prefixes), nil
}

// ReadSnapshot is the Cache's ReadSnapshot, on the revision asked ahead
// when it is the call's first.
func (a *Ahead) ReadSnapshot(ctx context.Context, keys, prefixes []string) (*View, error) {
	if !a.c.linearizableAt(ctx, a.rev) {
		return nil, ErrNotCurrent
	}
	return a.c.view(keys, prefixes), nil
}

// ReadNames is the Cache's ReadNames (straight from etcd).
func (a *Ahead) ReadNames(ctx context.Context, r store.NameRead, head func(*store.Snapshot) error, page func(*store.Snapshot, []int) error) error {
	return a.c.ReadNames(ctx, r, head, page)
}

// Txn is the Cache's Txn.
func (a *Ahead) Txn(ctx context.Context, conds []store.Cond, ops []store.Op) error {
	return a.c.Txn(ctx, conds, ops)
}

// TxnOrRead is the Cache's TxnOrRead.
func (a *Ahead) TxnOrRead(ctx context.Context, conds []store.Cond, ops []store.Op, keys []string) (*store.Snapshot, error) {
	return a.c.TxnOrRead(ctx, conds, ops, keys)
}

// Close does nothing: the cache outlives the call (see Done).
func (a *Ahead) Close() error { return nil }

func (c *Cache) readDirect(ctx context.Context, keys []string, prefixes []string) (*store.Snapshot, error) {
	c.direct.Add(1)
	c.etcdReads.Add(1)
	return c.under.Read(ctx, keys, prefixes)
}

// View is one consistent read of the cache: the entries of the keys asked
// for, at one revision, with their decodings. Later watch events do not
// change it.
type View struct {
	Revision int64
	items    map[string]*entry
}

// Get answers the value of key.
func (v *View) Get(key string) ([]byte, bool) {
	e, ok := v.items[key]
	if !ok {
		return nil, false
	}
	return e.value, true
}

// Decoded answers what the cache's Decode made of key's value; false when
// the key is absent or was not decoded.
func (v *View) Decoded(key string) (any, bool) {
	e, ok := v.items[key]
	if !ok || e.decoded == nil {
		return nil, false
	}
	return e.decoded, true
}

// Under answers the keys of the view under prefix, ordered.
func (v *View) Under(prefix string) []string {
	var out []string
	for k := range v.items {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ErrNotCurrent is ReadSnapshot's answer when the cache cannot answer a
// linearizable read now (not synced, or its watch behind etcd): the caller
// reads etcd itself, through the cache's ReadNames.
var ErrNotCurrent = errors.New("cache: not current with etcd")

// ReadSnapshot reads keys and prefixes as Read does, linearizable and
// decoded, as a View; ErrNotCurrent when the watch cannot answer in time.
func (c *Cache) ReadSnapshot(ctx context.Context, keys, prefixes []string) (*View, error) {
	if !c.linearizable(ctx) {
		return nil, ErrNotCurrent
	}
	return c.view(keys, prefixes), nil
}

var _ store.NameReader = (*Cache)(nil)

// ReadNames implements store.NameReader for the reads ReadSnapshot could
// not answer: straight from etcd, in pages when the store under the cache
// reads in pages, so that a many-node read while etcd is in trouble holds a
// page at a time as it does without a daemon.
func (c *Cache) ReadNames(ctx context.Context, r store.NameRead, head func(*store.Snapshot) error, page func(*store.Snapshot, []int) error) error {
	c.direct.Add(1)
	c.etcdReads.Add(1)
	return store.ReadNames(ctx, c.under, r, head, page)
}

// StaleView reads keys and every key under prefixes from memory as the
// cache stands, without asking etcd: for metrics, which need no
// linearizability and must cost no store read.
func (c *Cache) StaleView(keys, prefixes []string) (*View, error) {
	if !c.ready.Load() {
		return nil, errNotSynced
	}
	return c.view(keys, prefixes), nil
}

var errNotSynced = errors.New("cache: not synced with etcd")

// view copies the entries of keys and prefixes out of the cache at one
// revision (entries never change, so copying the pointers is enough). A
// read of a quarter of the keys or more, or of a prefix (which looks at
// every key anyway), takes the cache's map itself instead: the next watch
// batch copies the map before it changes it (the copy the read would have
// made), and a capacity query of 10,000 nodes no longer copies 30,000
// entries. Such a view answers the other keys the cache held at its
// revision too: the engine asks it only for the keys it read.
func (c *Cache) view(keys, prefixes []string) *View {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(prefixes) > 0 || 4*len(keys) >= len(c.kv) {
		c.shared.Store(true)
		return &View{Revision: c.applied.Load(), items: c.kv}
	}
	v := &View{Revision: c.applied.Load(), items: make(map[string]*entry, len(keys))}
	for _, k := range keys {
		if e, ok := c.kv[k]; ok {
			v.items[k] = e
		}
	}
	if len(prefixes) > 0 {
		for k, e := range c.kv {
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					v.items[k] = e
					break
				}
			}
		}
	}
	return v
}

// Stale is a view of the cache that answers reads from memory as they are,
// without asking etcd: for metrics, which need no linearizability and must
// cost no store read. Writes are refused.
func (c *Cache) Stale() store.Store { return stale{c} }

type stale struct{ c *Cache }

func (s stale) Read(_ context.Context, keys []string, prefixes []string) (*store.Snapshot, error) {
	if !s.c.ready.Load() {
		return nil, errNotSynced
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
		if e, ok := c.kv[k]; ok {
			snap.Items[k] = store.Item{Key: k, Value: e.value, ModRevision: e.modRev}
		}
	}
	if len(prefixes) > 0 {
		for k, e := range c.kv {
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					snap.Items[k] = store.Item{Key: k, Value: e.value, ModRevision: e.modRev}
					break
				}
			}
		}
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

// Lag is how many revisions of etcd the cache has not applied yet, of
// those etcd had reached when a read last asked its revision.
func (c *Cache) Lag() int64 { return max(0, c.lastEtcdRev.Load()-c.applied.Load()) }

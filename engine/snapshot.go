package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// Snapshot is one consistent read whose records may come decoded already:
// the serve daemon's watch cache decodes each record once, when the watch
// delivers it, and hands the same decoding to every read of that key and
// modification revision. A decoded value is shared, so what reads it must
// not change it (the verbs that read snapshots only read records).
type Snapshot interface {
	// Get answers the stored value of key, as store.Snapshot.Get does.
	Get(key string) ([]byte, bool)
	// Decoded answers the value of key as its Decoder made it (a
	// *DecodedRecord for a node record, a *nodes.Registration for a
	// registration); false when the key is absent or was not decoded
	// (the engine then decodes Get's bytes itself, and reports what
	// cannot be decoded as it always does).
	Decoded(key string) (any, bool)
	// Under answers the keys of the snapshot under prefix, ordered.
	Under(prefix string) []string
}

// SnapshotReader reads Snapshots: a linearizable one for the verbs, or one
// of the cache as it stands for a metrics scrape.
type SnapshotReader interface {
	// ReadSnapshot reads keys, and every key under prefixes, in one
	// consistent snapshot; ErrNotCached when it cannot answer now (the
	// engine then reads its store as it does without a SnapshotReader).
	ReadSnapshot(ctx context.Context, keys, prefixes []string) (Snapshot, error)
}

// ErrNotCached is a SnapshotReader's answer when it cannot answer a read
// now: the engine reads the store instead.
var ErrNotCached = errors.New("engine: the snapshot reader cannot answer now")

// DecodedRecord is a node record decoded ahead of the reads: the record as
// the resource's Decode made it, and the usage the node registry counts.
type DecodedRecord struct {
	Record any
	Held   types.Amounts

	// capacities remembers what DeployCapacity answered on this record, by
	// request and environment (capacityKey): a pure function of them, so
	// it holds while the record is at this revision.
	capacities memo[types.NodeCapacity]

	// samples remembers a node's get-metrics samples the same way, by
	// podname, whether the node may take work, and the shared values (see
	// sampleOf). They are shared: whoever reads them must not change them.
	samples memo[[]types.Metric]
}

// maxCapacities and maxSamples bound what one record remembers. Samples
// are the larger (about 2 KB per node and plugin): two sets, a scrape's
// (no podname) and core's sweep's (the node's pod).
const (
	maxCapacities = 16
	maxSamples    = 2
)

// remembered is one answer a memo holds, under its key.
type remembered[T any] struct {
	key   string
	value T
}

// memo remembers the last maxRemembered answers stored in it (fewer when
// its owner asks), each under its key: what it holds is a pure function of
// the key while its record is at one revision, so any of them may be
// answered, and a new one takes the oldest one's slot (a node whose status
// changed is sampled under a new key, and must not be sampled again on
// every scrape after that). A query of 10,000 nodes looks up one key per
// node, so a lookup is a scan of a few slots comparing keys (one query's
// nodes share its key string) rather than a hash of the key.
type memo[T any] struct {
	slots [maxRemembered]atomic.Pointer[remembered[T]]
	used  atomic.Uint32
}

// maxRemembered is the most answers a memo holds.
const maxRemembered = max(maxCapacities, maxSamples)

// load answers the value stored under key, if any, among the first size
// slots.
func (m *memo[T]) load(key string, size int) (T, bool) {
	n := min(int(m.used.Load()), size)
	for i := range n {
		if r := m.slots[i].Load(); r != nil && r.key == key {
			return r.value, true
		}
	}
	var zero T
	return zero, false
}

// store remembers value under key in the first size slots, in place of
// the oldest answer when they are all taken.
func (m *memo[T]) store(key string, value T, size int) {
	i := int((m.used.Add(1) - 1) % uint32(size))
	m.slots[i].Store(&remembered[T]{key: key, value: value})
}

// sharedKey names the shared values a decision may read.
func sharedKey(env Env) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env.Shared)) {
		b.WriteString("\x00")
		b.WriteString(k)
		b.WriteString("\x00")
		b.Write(env.Shared[k])
	}
	return b.String()
}

// sampleOf is sample, remembered on the snapshot's decoded record: a
// node's samples are a pure function of its record, the podname asked
// for, whether it may take work and the shared values.
func (e *Engine[N, W]) sampleOf(ref types.NodeRef, v *nodeView[N], env Env, r *manyRead[N], shared string) []types.Metric {
	dr := v.decoded
	if r.snap == nil || !v.known || dr == nil {
		return e.sample(ref, v, env)
	}
	schedulable := "0"
	if v.reg.Refusal(e.Policy) == "" {
		schedulable = "1"
	}
	key := ref.Podname + "\x00" + schedulable + shared
	if m, ok := dr.samples.load(key, maxSamples); ok {
		return m
	}
	m := e.sample(ref, v, env)
	dr.samples.store(key, m, maxSamples)
	return m
}

// capacityKey names a capacity query's request and environment: the
// workload request as core sent it, the deploy limit, and every shared
// value the decision may read.
func capacityKey(request []byte, env Env) string {
	return string(request) + "\x00" + strconv.Itoa(env.MaxDeployCount) + sharedKey(env)
}

// capacity is Res.DeployCapacity on node's record, remembered on the
// snapshot's decoded record under key ("" remembers nothing). An answer
// computed while the call's context ended is not remembered (the search
// may have been cut short; the verb fails anyway).
func (e *Engine[N, W]) capacity(r *manyRead[N], v *nodeView[N], w W, env Env, key string) types.NodeCapacity {
	dr := v.decoded
	if key == "" || r.snap == nil || !v.known {
		dr = nil
	}
	if dr != nil {
		if c, ok := dr.capacities.load(key, maxCapacities); ok {
			return c
		}
	}
	c := e.Res.DeployCapacity(v.rec, w, env)
	if dr != nil && (env.Ctx == nil || env.Ctx.Err() == nil) {
		dr.capacities.store(key, c, maxCapacities)
	}
	return c
}

// Decoder is how a snapshot decodes the values under one key prefix.
type Decoder struct {
	Prefix string
	Decode func(data []byte) (any, error)
}

// Decoders decode every kind of stored value a cache keeps decoded: each
// plugin's node records and the registrations.
type Decoders []Decoder

// Decode is the value of key decoded by the decoder of its prefix, or nil
// when no decoder owns the key or the value does not decode (a reader then
// decodes the bytes itself and meets the error there).
func (ds Decoders) Decode(key string, value []byte) any {
	for _, d := range ds {
		if strings.HasPrefix(key, d.Prefix) {
			v, err := d.Decode(value)
			if err != nil {
				return nil
			}
			return v
		}
	}
	return nil
}

// RecordDecoder decodes the node records of r into *DecodedRecord.
func RecordDecoder[N any](r Records[N]) Decoder {
	return Decoder{Prefix: nodes.RecordPrefix(r.Name()), Decode: func(data []byte) (any, error) {
		n, err := r.Decode(data)
		if err != nil {
			return nil, err
		}
		return &DecodedRecord{Record: n, Held: heldBy(r, n)}, nil
	}}
}

// RegistrationDecoder decodes the node registry's registrations into
// *nodes.Registration.
func RegistrationDecoder() Decoder {
	return Decoder{Prefix: nodes.RegistrationPrefix, Decode: func(data []byte) (any, error) {
		return nodes.DecodeRegistration("", data)
	}}
}

// manyRead is what a verb over many nodes read: the stored values and,
// from a Snapshot, the records decoded already (snap nil: decode from get).
type manyRead[N any] struct {
	get  func(string) ([]byte, bool)
	snap Snapshot

	// names are the nodes read, and keys what the read asked for: the
	// shared keys first (shared of them), then keysPerNode keys per node
	// of names, in order: its record, its registration, its session. A
	// node's view looks its keys up there instead of building them again.
	names  []string
	keys   []string
	shared int
}

// keysPerNode is how many keys readMany asks for per node.
const keysPerNode = 3

// keysOf answers the record, registration and session keys of names[i],
// node, from the read's keys when it has them.
func (e *Engine[N, W]) keysOf(r *manyRead[N], i int, node string) (record, registration, session string) {
	if r.keys != nil && i < len(r.names) && r.names[i] == node {
		at := r.shared + i*keysPerNode
		return r.keys[at], r.keys[at+1], r.keys[at+2]
	}
	return e.recordKey(node), nodes.RegistrationKey(node), nodes.SessionKey(node)
}

// readMany is readNodes (head sees the shared keys and the extras, page
// the nodes at the indices idx of names), from e.Snapshots when the engine
// has one: then the nodes and the extras come in one snapshot and one
// page.
func (e *Engine[N, W]) readMany(ctx context.Context, names []string, extraKeys, extraPrefixes []string, head func(*store.Snapshot) error, page func(idx []int, r *manyRead[N]) error) error {
	fromStore := func() error {
		return e.readNodes(ctx, names, extraKeys, extraPrefixes, head, func(idx []int, get func(string) ([]byte, bool)) error {
			return page(idx, &manyRead[N]{get: get})
		})
	}
	if e.Snapshots == nil {
		return fromStore()
	}
	shared := e.Res.SharedKeys()
	// names are distinct (the callers dedupe them), so are their keys.
	keys := dedupe(shared)
	ahead := len(keys)
	keys = slices.Grow(keys, len(names)*keysPerNode)
	for _, n := range names {
		keys = append(keys, e.recordKey(n), nodes.RegistrationKey(n), nodes.SessionKey(n))
	}
	// The extras (a capacity query's pool records) come in the same
	// snapshot as the nodes, at their revision, as readNodes reads them.
	keys = append(keys, extraKeys...)
	snap, err := e.Snapshots.ReadSnapshot(ctx, keys, extraPrefixes)
	if errors.Is(err, ErrNotCached) {
		return fromStore()
	}
	if err != nil {
		return err
	}
	fixed := &store.Snapshot{Items: map[string]store.Item{}}
	keep := func(k string) {
		if v, ok := snap.Get(k); ok {
			fixed.Items[k] = store.Item{Key: k, Value: v}
		}
	}
	for _, k := range shared {
		keep(k)
	}
	for _, k := range extraKeys {
		keep(k)
	}
	for _, p := range extraPrefixes {
		for _, k := range snap.Under(p) {
			keep(k)
		}
	}
	if err := head(fixed); err != nil {
		return err
	}
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	return page(idx, &manyRead[N]{get: snap.Get, snap: snap, names: names, keys: keys, shared: ahead})
}

// viewOf is one node as read: from decoded values when the snapshot has
// them all, else decoded here exactly as view does.
func (e *Engine[N, W]) viewOf(i int, node string, r *manyRead[N]) (*nodeView[N], error) {
	if r.snap == nil {
		return e.view(node, r.get)
	}
	// The record is the decoded one, shared; an empty one is made only for
	// a node without a record (a node's worth of allocation per node read
	// otherwise, thrown away).
	v := &nodeView[N]{name: node}
	v.reg = &v.entry
	key, regKey, sessionKey := e.keysOf(r, i, node)
	if d, ok := r.snap.Decoded(key); ok {
		dr, _ := d.(*DecodedRecord)
		if dr == nil {
			return e.view(node, r.get)
		}
		if v.rec, ok = dr.Record.(N); !ok {
			return e.view(node, r.get)
		}
		v.known, v.decoded = true, dr
	} else if _, stored := r.get(key); stored {
		return e.view(node, r.get) // not decoded: decode it here, and report what cannot be
	} else {
		v.rec = e.Res.Empty()
	}
	if d, ok := r.snap.Decoded(regKey); ok {
		if v.reg.Reg, ok = d.(*nodes.Registration); !ok {
			return e.view(node, r.get)
		}
	} else if _, stored := r.get(regKey); stored {
		return e.view(node, r.get)
	}
	_, v.reg.Live = r.get(sessionKey)
	return v, nil
}

// eachOf is each over what readMany read.
func (e *Engine[N, W]) eachOf(names []string, idx []int, r *manyRead[N], fn func(i int, v *nodeView[N])) error {
	if r.snap == nil {
		return e.each(names, idx, r.get, fn)
	}
	// Decoded records cost little to view: a worker pays for more of them.
	return visit(names, idx, 256, func(i int) (*nodeView[N], error) { return e.viewOf(i, names[i], r) }, fn)
}

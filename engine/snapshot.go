package engine

import (
	"context"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/eru-extend/resources/nodes"
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
}

// SnapshotReader reads Snapshots: a linearizable one for the verbs, or one
// of the cache as it stands for a metrics scrape.
type SnapshotReader interface {
	// ReadSnapshot reads keys in one consistent snapshot.
	ReadSnapshot(ctx context.Context, keys []string) (Snapshot, error)
}

// DecodedRecord is a node record decoded ahead of the reads: the record as
// the resource's Decode made it, and the usage the node registry counts.
type DecodedRecord struct {
	Record any
	Held   types.Amounts

	// capacities remembers what DeployCapacity answered on this record, by
	// request and environment (capacityKey): a pure function of them, so
	// it holds while the record is at this revision. At most
	// maxCapacities requests are remembered.
	capacities sync.Map
	remembered atomic.Int32
}

// maxCapacities bounds the capacity answers one record remembers.
const maxCapacities = 16

// capacityKey names a capacity query's request and environment: the
// workload request as core sent it, the deploy limit, and every shared
// value the decision may read.
func capacityKey(request []byte, env Env) string {
	var b strings.Builder
	b.Write(request)
	b.WriteString("\x00")
	b.WriteString(strconv.Itoa(env.MaxDeployCount))
	for _, k := range slices.Sorted(maps.Keys(env.Shared)) {
		b.WriteString("\x00")
		b.WriteString(k)
		b.WriteString("\x00")
		b.Write(env.Shared[k])
	}
	return b.String()
}

// capacity is Res.DeployCapacity on node's record, remembered on the
// snapshot's decoded record under key ("" remembers nothing). An answer
// computed while the call's context ended is not remembered (the search
// may have been cut short; the verb fails anyway).
func (e *Engine[N, W]) capacity(r *manyRead[N], node string, v *nodeView[N], w W, env Env, key string) types.NodeCapacity {
	var dr *DecodedRecord
	if key != "" && r.snap != nil && v.known {
		if d, ok := r.snap.Decoded(e.recordKey(node)); ok {
			dr, _ = d.(*DecodedRecord)
		}
	}
	if dr != nil {
		if c, ok := dr.capacities.Load(key); ok {
			return c.(types.NodeCapacity)
		}
	}
	c := e.Res.DeployCapacity(v.rec, w, env)
	if dr != nil && (env.Ctx == nil || env.Ctx.Err() == nil) && dr.remembered.Add(1) <= maxCapacities {
		dr.capacities.Store(key, c)
	}
	return c
}

// Decoder is how a snapshot decodes the values under one key prefix.
type Decoder struct {
	Prefix string
	Decode func(data []byte) (any, error)
}

// RecordDecoder decodes the node records of r into *DecodedRecord.
func RecordDecoder[N any](r Records[N]) Decoder {
	return Decoder{Prefix: nodes.RecordPrefix(r.Name()), Decode: func(data []byte) (any, error) {
		n, err := r.Decode(data)
		if err != nil {
			return nil, err
		}
		return &DecodedRecord{Record: n, Held: r.Held(n)}, nil
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
}

// readMany is readNodes, from e.Snapshots when the engine has one.
func (e *Engine[N, W]) readMany(ctx context.Context, names []string, all bool) (*manyRead[N], error) {
	if e.Snapshots == nil {
		get, err := e.readNodes(ctx, names, all)
		if err != nil {
			return nil, err
		}
		return &manyRead[N]{get: get}, nil
	}
	keys := append([]string(nil), e.Res.SharedKeys()...)
	prefixes := []string{nodes.RecordPrefix(e.Res.Name())}
	if all {
		for _, p := range e.Resources {
			if p.Name() != e.Res.Name() {
				keys = append(keys, p.SharedKeys()...)
				prefixes = append(prefixes, p.RecordPrefix())
			}
		}
	}
	for _, n := range names {
		for _, p := range prefixes {
			keys = append(keys, p+n)
		}
		keys = append(keys, nodes.RegistrationKey(n), nodes.SessionKey(n))
	}
	snap, err := e.Snapshots.ReadSnapshot(ctx, dedupe(keys))
	if err != nil {
		return nil, err
	}
	return &manyRead[N]{get: snap.Get, snap: snap}, nil
}

// viewOf is one node as read: from decoded values when the snapshot has
// them all, else decoded here exactly as view does.
func (e *Engine[N, W]) viewOf(node string, r *manyRead[N]) (*nodeView[N], error) {
	if r.snap == nil {
		return e.view(node, r.get)
	}
	v := &nodeView[N]{name: node, rec: e.Res.Empty(), reg: &nodes.Entry{}}
	key := e.recordKey(node)
	if _, ok := r.get(key); ok {
		rec, ok := decodedRecord[N](r.snap, key)
		if !ok {
			return e.view(node, r.get)
		}
		v.rec, v.known = rec, true
	}
	if _, ok := r.get(nodes.RegistrationKey(node)); ok {
		d, _ := r.snap.Decoded(nodes.RegistrationKey(node))
		reg, ok := d.(*nodes.Registration)
		if !ok {
			return e.view(node, r.get)
		}
		v.reg.Reg = reg
	}
	_, v.reg.Live = r.get(nodes.SessionKey(node))
	return v, nil
}

func decodedRecord[N any](snap Snapshot, key string) (N, bool) {
	var zero N
	d, ok := snap.Decoded(key)
	if !ok {
		return zero, false
	}
	dr, ok := d.(*DecodedRecord)
	if !ok {
		return zero, false
	}
	n, ok := dr.Record.(N)
	return n, ok
}

// holds reports whether any plugin's record of node holds usage (see
// nodes.Holds), from decoded records when the snapshot has them all.
func (e *Engine[N, W]) holds(node string, r *manyRead[N]) (bool, error) {
	if r.snap == nil {
		return nodes.Holds(node, e.Resources, r.get)
	}
	held := false
	for _, p := range e.Resources {
		key := p.RecordPrefix() + node
		if _, ok := r.get(key); !ok {
			continue
		}
		d, _ := r.snap.Decoded(key)
		dr, ok := d.(*DecodedRecord)
		if !ok {
			return nodes.Holds(node, e.Resources, r.get)
		}
		held = held || !dr.Held.IsZero()
	}
	return held, nil
}

// eachOf is each over what readMany read.
func (e *Engine[N, W]) eachOf(names []string, r *manyRead[N], fn func(i int, v *nodeView[N])) error {
	if r.snap == nil {
		return e.each(names, r.get, fn)
	}
	var mu sync.Mutex
	var first error
	visit := func(i int) {
		v, err := e.viewOf(names[i], r)
		if err != nil {
			mu.Lock()
			if first == nil {
				first = types.Wrap(types.Internal, err, "node "+names[i])
			}
			mu.Unlock()
			return
		}
		fn(i, v)
	}
	workers := min(runtime.GOMAXPROCS(0), len(names)/256)
	if workers <= 1 {
		for i := range names {
			visit(i)
		}
		return first
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names); i = int(next.Add(1) - 1) {
				visit(i)
			}
		})
	}
	wg.Wait()
	return first
}

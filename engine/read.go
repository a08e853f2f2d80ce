package engine

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// nodeView is one node as read: its record (Empty when unknown) and what
// the registry knows of it.
type nodeView[N any] struct {
	name  string
	rec   N
	known bool
	reg   *nodes.Entry
	// others: another plugin has a record of the node (set by write only).
	others bool
	// decoded is the snapshot's decoded record rec comes from, if it does
	// (what the record's answers are remembered on).
	decoded *DecodedRecord
	// entry is what reg points to when the view made it itself (one
	// allocation per node viewed rather than two).
	entry nodes.Entry
}

// env collects what the resource's decisions read besides the record, and
// refuses shared values the resource cannot read (a corrupt cluster
// setting must not quietly read as its default).
func (e *Engine[N, W]) env(get func(string) ([]byte, bool)) (Env, error) {
	env := Env{MaxDeployCount: e.MaxDeploy, Shared: map[string][]byte{}}
	for _, k := range e.Res.SharedKeys() {
		if v, ok := get(k); ok {
			env.Shared[k] = v
		}
	}
	return env, e.Res.CheckShared(env.Shared)
}

// view decodes one node from a snapshot or a transaction.
func (e *Engine[N, W]) view(node string, get func(string) ([]byte, bool)) (*nodeView[N], error) {
	v := &nodeView[N]{name: node, rec: e.Res.Empty()}
	if data, ok := get(e.recordKey(node)); ok {
		rec, err := e.Res.Decode(data)
		if err != nil {
			return nil, types.Wrap(types.Internal, err, "stored record")
		}
		v.rec, v.known = rec, true
	}
	reg, err := nodes.ReadEntry(node, get)
	if err != nil {
		return nil, err
	}
	v.reg = reg
	return v, nil
}

// readNode reads one node for a verb that does not write.
func (e *Engine[N, W]) readNode(ctx context.Context, node string) (*nodeView[N], Env, error) {
	s, err := e.Open(ctx, false)
	if err != nil {
		return nil, Env{}, err
	}
	snap, err := s.Read(ctx, e.nodeKeys(node), nil)
	if err != nil {
		return nil, Env{}, err
	}
	v, err := e.view(node, snap.Get)
	if err != nil {
		return nil, Env{}, err
	}
	env, err := e.env(snap.Get)
	return v, env, err
}

// readNodes reads many nodes in one consistent read: each node's record,
// registration and session, the shared keys, and the extra keys and whole
// prefixes the verb names (storage's pool records), so that a query's
// cost follows the nodes it names, not the size of the cluster (see
// store.ReadNames). head sees the shared keys and the extras first; then
// page sees, a page at a time, the nodes at the indices idx of names,
// through a get that also finds what head saw. Records are decoded by
// whoever needs them (see each) and a page's bytes are dropped once page
// returns: a query over 10,000 nodes never holds all their bytes, nor all
// their decoded records. names must be distinct and not empty (dedupe).
func (e *Engine[N, W]) readNodes(ctx context.Context, names []string, keys, prefixes []string, head func(*store.Snapshot) error, page func(idx []int, get func(string) ([]byte, bool)) error) error {
	s, err := e.Open(ctx, false)
	if err != nil {
		return err
	}
	shared := append([]string(nil), e.Res.SharedKeys()...)
	under := []string{nodes.RecordPrefix(e.Res.Name()), nodes.RegistrationPrefix, nodes.SessionPrefix}
	var fixed *store.Snapshot
	r := store.NameRead{Keys: dedupe(append(shared, keys...)), Prefixes: prefixes, Names: names, Under: under}
	return store.ReadNames(ctx, s, r, func(snap *store.Snapshot) error {
		fixed = snap
		return head(snap)
	}, func(snap *store.Snapshot, idx []int) error {
		return page(idx, func(k string) ([]byte, bool) {
			if v, ok := snap.Get(k); ok {
				return v, true
			}
			return fixed.Get(k)
		})
	})
}

// each calls fn for the names at the indices idx, decoding each node just
// before fn sees it and dropping it after, spread over the CPUs when there
// are many. The workers end before each returns.
func (e *Engine[N, W]) each(names []string, idx []int, get func(string) ([]byte, bool), fn func(i int, v *nodeView[N])) error {
	return visit(names, idx, 64, func(i int) (*nodeView[N], error) { return e.view(names[i], get) }, fn)
}

// visit calls fn with the view of each name at the indices idx, on one
// worker per perWorker names (at most one per CPU), and returns the first
// error a view met (fn is not called for that name). The workers end
// before visit returns.
func visit[N any](names []string, idx []int, perWorker int, view func(i int) (*nodeView[N], error), fn func(i int, v *nodeView[N])) error {
	var mu sync.Mutex
	var first error
	one := func(i int) {
		v, err := view(i)
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
	workers := min(runtime.GOMAXPROCS(0), len(idx)/perWorker)
	if workers <= 1 {
		for _, i := range idx {
			one(i)
		}
		return first
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(idx); k = int(next.Add(1) - 1) {
				one(idx[k])
			}
		})
	}
	wg.Wait()
	return first
}

// dedupe drops empty and repeated names, keeping the first of each.
func dedupe(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

package pooladmin

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/storage/pool/move"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// MoveRequest is `storage pools move ID --to P2 --node N [--abort]`.
type MoveRequest struct {
	Object, To, Node string
	// CommandID names the move: the same id resumes it.
	CommandID string
	Abort     bool
	// Progress, when set, is called as the copy goes (move.Options).
	Progress func(move.Progress)
}

// Step runs fn, one store step of a command that lasts longer than a store
// call, with an Admin on a store opened for it and under the store-call
// budget (etcd.call_timeout); the store is closed after (the embedded
// store's lock is held only while a step runs).
type Step func(fn func(ctx context.Context, a *Admin) error) error

// Move runs a move with every store step on a.Store under ctx, the copy
// too (MoveSteps takes them apart).
func (a *Admin) Move(ctx context.Context, r MoveRequest) (pool.ObjectView, error) {
	return MoveSteps(ctx, func(fn func(context.Context, *Admin) error) error { return fn(ctx, a) }, r)
}

// MoveSteps runs a move on this host, which is node Node and reaches both
// pools: start (reserve in the target), copy, settle (the object lives in
// the target, the source keeps a cleanup entry), remove the source copy and
// drop the entry. Each transaction compares the holder's record and both
// pool records. With Abort it undoes a move that did not settle.
//
// Every store call runs in a step of its own; ctx bounds only the file
// work (the copy, the removals), which takes as long as the data needs:
// the store-call budget is no measure of it.
func MoveSteps(ctx context.Context, step Step, r MoveRequest) (pool.ObjectView, error) {
	if err := pool.ValidObjectID(r.Object); err != nil {
		return pool.ObjectView{}, err
	}
	if err := pool.ValidID(r.To); err != nil {
		return pool.ObjectView{}, err
	}
	if r.CommandID == "" {
		r.CommandID = "move-" + r.Object + "-" + r.To
	}
	var (
		st  *state
		now time.Time
	)
	if err := step(func(sctx context.Context, a *Admin) (err error) {
		now = a.now()
		st, err = a.read(sctx)
		return err
	}); err != nil {
		return pool.ObjectView{}, err
	}
	object := func() (v pool.ObjectView, err error) {
		err = step(func(sctx context.Context, a *Admin) error {
			v, err = a.Object(sctx, r.Object)
			return err
		})
		return v, err
	}
	holder := ""
	for name, n := range st.nodes {
		if _, ok := n.Usage.PoolObjects[r.Object]; ok {
			holder = name
		}
	}
	if holder == "" {
		return pool.ObjectView{}, types.Errorf(types.NotFound, "no node record keeps pool object %s", r.Object)
	}
	copier, ok := st.nodes[r.Node]
	if !ok {
		return pool.ObjectView{}, types.Errorf(types.NotFound, "the storage plugin has no record of node %s", r.Node)
	}
	from := st.nodes[holder].Usage.PoolObjects[r.Object].Pool
	if from == r.To {
		// Already there (a move that settled, run again): nothing to do,
		// and an abort must not touch what is now the object's data.
		return object()
	}
	fromDecl, okFrom := copier.Capacity.Pools[from]
	toDecl, okTo := copier.Capacity.Pools[r.To]
	if !okFrom || !okTo {
		return pool.ObjectView{}, types.Errorf(types.FailedPrecondition, "node %s does not declare both pools %s and %s", r.Node, from, r.To)
	}
	if why := move.Overlap(fromDecl.Path, toDecl.Path); why != "" && !r.Abort {
		// Refused before anything is written: the copy would be the object
		// itself, and an abort would remove it. (An abort is let through:
		// it releases a move started before this check, keeping the data.)
		return pool.ObjectView{}, types.Errorf(types.FailedPrecondition, "node %s declares pools %s and %s at one place (%s): a move between them would copy object %s onto itself; give each pool a path of its own",
			r.Node, from, r.To, why, r.Object)
	}
	for _, other := range slices.Sorted(maps.Keys(copier.Capacity.Pools)) {
		if other == from || other == r.To || r.Abort {
			continue
		}
		if why := move.Overlap(toDecl.Path, copier.Capacity.Pools[other].Path); why != "" {
			// A copy the other pool keeps at <target>/<object> would pass
			// for a finished copy and the move would settle on it.
			return pool.ObjectView{}, types.Errorf(types.FailedPrecondition, "node %s declares pools %s and %s at one place (%s): a move into %s could take %s's files for its copy of object %s; give each pool a path of its own",
				r.Node, r.To, other, why, r.To, other, r.Object)
		}
	}
	// transition runs one step of the move; done reports a step with
	// nothing to do (a replay, or an abort of a move that is not in
	// progress).
	transition := func(decide func(mr pool.MoveRequest) (pool.MoveOutcome, error)) (done bool, err error) {
		keys := dedupe([]string{nodes.RecordPrefix("storage") + holder, nodes.RecordPrefix("storage") + r.Node,
			nodes.RegistrationKey(r.Node), nodes.SessionKey(r.Node), storage.PoolKey(from), storage.PoolKey(r.To),
			nodes.CommandKey(r.CommandID)})
		err = step(func(sctx context.Context, a *Admin) error {
			return store.Update(sctx, a.Store, keys, func(tx *store.Tx) error {
				done = false
				// A move's id names the move (on its object's record) and
				// is never kept at /commands/; an id kept there belongs to
				// another operator command.
				if _, taken := tx.Get(nodes.CommandKey(r.CommandID)); taken {
					return types.Errorf(types.AlreadyExists, "command id %s was used for another command; give the move an id of its own", r.CommandID)
				}
				hdata, ok := tx.Get(keys[0])
				if !ok {
					return types.Errorf(types.Aborted, "node %s's record went away; run the move again", holder)
				}
				h, err := storage.DecodeNode(hdata)
				if err != nil {
					return types.Wrap(types.DataLoss, err, "storage record of node "+holder)
				}
				pools := map[string]*pool.Record{}
				for _, id := range []string{from, r.To} {
					if rec, err := getRecord(tx, id); err == nil {
						pools[id] = rec
					}
				}
				reach := map[string]bool{}
				checks := map[string]nodes.PoolCheck{}
				if e, err := nodes.ReadEntry(r.Node, tx.Get); err == nil && e.Reg != nil && e.Reg.Observation != nil {
					checks = e.Reg.Observation.Pools
				}
				for id := range copier.Capacity.Pools {
					c, checked := checks[id]
					reach[id] = !checked || c.Available
				}
				out, err := decide(pool.MoveRequest{Node: r.Node, Reach: reach, Holder: holder, Objects: h.Usage.PoolObjects,
					ID: r.Object, From: from, To: r.To, CommandID: r.CommandID, Pools: pools})
				if err != nil || out.Done {
					done = out.Done
					return err
				}
				h.Usage.PoolObjects = out.Objects
				data, err := storage.Rules{}.Encode(h)
				if err != nil {
					return err
				}
				tx.Put(keys[0], data)
				for _, rec := range out.Pools {
					if err := putRecord(tx, rec); err != nil {
						return err
					}
				}
				return nil
			})
		})
		return done, err
	}
	drop := func(id string) error {
		return step(func(sctx context.Context, a *Admin) error {
			return store.Update(sctx, a.Store, []string{storage.PoolKey(id)}, func(tx *store.Tx) error {
				rec, err := getRecord(tx, id)
				if err != nil {
					return err
				}
				next, ok := pool.DropCleanup(rec, r.Object)
				if !ok {
					return nil
				}
				return putRecord(tx, next)
			})
		})
	}
	if r.Abort {
		done, err := transition(func(mr pool.MoveRequest) (pool.MoveOutcome, error) { return pool.AbortMove(mr, now) })
		if err != nil {
			return pool.ObjectView{}, err
		}
		if done {
			// Nothing moving under this command: the target copy, if any,
			// is live data now, never removed here.
			return object()
		}
		if err := move.Abort(fromDecl.Path, toDecl.Path, r.Object); err != nil {
			return pool.ObjectView{}, types.Wrap(types.Unavailable, err, "removing the target copy")
		}
		if err := drop(r.To); err != nil {
			return pool.ObjectView{}, err
		}
		return object()
	}
	if _, err := transition(pool.StartMove); err != nil {
		return pool.ObjectView{}, err
	}
	if err := move.Copy(ctx, fromDecl.Path, toDecl.Path, r.Object, move.Options{Progress: r.Progress}); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return pool.ObjectView{}, types.Wrap(types.Unavailable, err, "copying "+r.Object+" stopped (run the same command again to resume, or --abort)")
	}
	if _, err := transition(func(mr pool.MoveRequest) (pool.MoveOutcome, error) { return pool.SettleMove(mr, now) }); err != nil {
		return pool.ObjectView{}, err
	}
	if err := move.Remove(fromDecl.Path, r.Object); err != nil {
		return pool.ObjectView{}, types.Wrap(types.Unavailable, err, "removing the source copy (storage pools cleanup "+from+" --node "+r.Node+" does it later)")
	}
	if err := drop(from); err != nil {
		return pool.ObjectView{}, err
	}
	return object()
}

// Cleaned is `storage pools cleanup`'s answer: the copies removed, and the
// entries dropped without removing anything because their copy is the
// object's live data on this host.
type Cleaned struct {
	Pool    string         `json:"pool"`
	Removed []pool.Cleanup `json:"removed"`
	Dropped []Dropped      `json:"dropped"`
}

// Dropped is a cleanup entry whose copy, Path, is (or holds, or lies
// inside) the object's live copy LivePath in pool LivePool on this host:
// pools a node record declares at one place, as one written before that
// was refused can. The entry is dropped and nothing is removed; Why says
// so in one line.
type Dropped struct {
	pool.Cleanup
	Path     string `json:"path"`
	LivePool string `json:"live_pool"`
	LivePath string `json:"live_path"`
	Why      string `json:"why"`
}

// Cleanup runs CleanupSteps with every store step on a.Store under ctx.
func (a *Admin) Cleanup(ctx context.Context, id, node string) (Cleaned, error) {
	return CleanupSteps(ctx, func(fn func(context.Context, *Admin) error) error { return fn(ctx, a) }, id, node)
}

// CleanupSteps removes, on this host (node Node, which declares the pool),
// every copy pool id still keeps (a settled move's source, an aborted
// move's target), then drops each entry under a compare on the pool
// record. Each entry is decided on a read of its own, just before its
// removal: one another cleanup dropped meanwhile is passed over. A copy
// that is the object's live copy here (move.Holds, against the path of the
// pool the node records say the object lives in) is never removed: its
// entry is dropped the same way and listed in Dropped.
//
// As in MoveSteps, every store call runs in a step of its own and the
// removals run between them, under ctx only: removing a big copy takes as
// long as it needs, and the embedded store stays free meanwhile.
func CleanupSteps(ctx context.Context, step Step, id, node string) (Cleaned, error) {
	if err := pool.ValidID(id); err != nil {
		return Cleaned{}, err
	}
	first, err := readCleanup(step, id, node)
	if err != nil {
		return Cleaned{}, err
	}
	drop := func(object string) error {
		return step(func(sctx context.Context, a *Admin) error {
			return store.Update(sctx, a.Store, []string{storage.PoolKey(id)}, func(tx *store.Tx) error {
				cur, err := getRecord(tx, id)
				if err != nil {
					return err
				}
				next, ok := pool.DropCleanup(cur, object)
				if !ok {
					return nil
				}
				return putRecord(tx, next)
			})
		})
	}
	out := Cleaned{Pool: id, Removed: []pool.Cleanup{}, Dropped: []Dropped{}}
	for _, c := range first.rec.Cleanups {
		if err := ctx.Err(); err != nil {
			return out, types.Wrap(types.Unavailable, context.Cause(ctx), "cleanup of pool "+id+" stopped (run it again to go on)")
		}
		// Each entry is decided on a read of its own, just before its
		// removal: since the first read (and the removals before this
		// one, which take their time), another cleanup may have removed
		// this copy and dropped the entry, and a move may then have
		// brought the object's live copy to the same place.
		now, err := readCleanup(step, id, node)
		if err != nil {
			return out, err
		}
		if !slices.ContainsFunc(now.rec.Cleanups, func(e pool.Cleanup) bool { return sameCleanup(e, c) }) {
			continue // handled by another cleanup meanwhile
		}
		decl := now.decls[id]
		if d, live := liveCopy(now.st, now.decls, id, decl.Path, c); live {
			if err := drop(c.Object); err != nil {
				return out, err
			}
			out.Dropped = append(out.Dropped, d)
			continue
		}
		if err := move.Remove(decl.Path, c.Object); err != nil {
			return out, types.Wrap(types.Unavailable, err, "removing the copy of "+c.Object)
		}
		if err := drop(c.Object); err != nil {
			return out, err
		}
		out.Removed = append(out.Removed, c)
	}
	return out, nil
}

// cleanupView is what a cleanup decides on: one read of the store, pool
// id's record and the pools node declares (id among them).
type cleanupView struct {
	st    *state
	rec   *pool.Record
	decls map[string]pool.Declaration
}

// readCleanup reads the store in a step of its own and checks that pool id
// and node exist and that the node declares the pool.
func readCleanup(step Step, id, node string) (cleanupView, error) {
	var st *state
	if err := step(func(sctx context.Context, a *Admin) (err error) {
		st, err = a.read(sctx)
		return err
	}); err != nil {
		return cleanupView{}, err
	}
	rec, ok := st.pools[id]
	if !ok {
		return cleanupView{}, notFound(id)
	}
	n, ok := st.nodes[node]
	if !ok {
		return cleanupView{}, types.Errorf(types.NotFound, "the storage plugin has no record of node %s", node)
	}
	if _, ok := n.Capacity.Pools[id]; !ok {
		return cleanupView{}, types.Errorf(types.FailedPrecondition, "node %s does not declare pool %s", node, id)
	}
	return cleanupView{st: st, rec: rec, decls: n.Capacity.Pools}, nil
}

// sameCleanup reports whether a and b are one cleanup entry (a copy left
// by one command at one time).
func sameCleanup(a, b pool.Cleanup) bool {
	return a.Object == b.Object && a.Reason == b.Reason && a.CommandID == b.CommandID && a.Since.Equal(b.Since)
}

// liveCopy says whether cleanup entry c of pool id, whose copy on this
// node is <path>/<object>, names the object's live copy here: the object
// lives (per the node records, as MoveSteps finds its holder) in a pool
// the node declares (decls) at a path where removing the copy would
// remove the live <that pool's path>/<object> or a part of it.
func liveCopy(st *state, decls map[string]pool.Declaration, id, path string, c pool.Cleanup) (Dropped, bool) {
	for _, n := range st.nodes {
		obj, ok := n.Usage.PoolObjects[c.Object]
		if !ok {
			continue
		}
		decl, ok := decls[obj.Pool]
		if !ok {
			return Dropped{}, false
		}
		copyPath, livePath := filepath.Join(path, c.Object), filepath.Join(decl.Path, c.Object)
		why := move.Holds(copyPath, livePath)
		if why == "" {
			return Dropped{}, false
		}
		return Dropped{Cleanup: c, Path: copyPath, LivePool: obj.Pool, LivePath: livePath,
			Why: fmt.Sprintf("pool %s's copy of object %s is its live copy in pool %s (%s): the entry is dropped and nothing removed",
				id, c.Object, obj.Pool, why)}, true
	}
	return Dropped{}, false
}

package engine

import (
	"context"
	"maps"

	"github.com/eru-extend/resources/types"
)

// The verbs that read or write one node's record.

// AddNode records a new node; a name the node registry retired never comes
// back.
func (e *Engine[N, W]) AddNode(ctx context.Context, req *types.Request) (any, error) {
	rec, err := e.Res.AddNode(req.Resource, req.Info)
	if err != nil {
		return nil, err
	}
	return e.write(ctx, req.Nodename, func(v *nodeView[N], env Env) (N, any, error) {
		if v.known {
			return v.rec, nil, types.Errorf(types.AlreadyExists, "node exists")
		}
		if v.reg.Retired() {
			return v.rec, nil, types.Errorf(types.FailedPrecondition, "node is RETIRED: a retired node name can never be added again")
		}
		capacity, usage := e.Res.View(rec, env)
		return rec, types.NodeResource{Capacity: capacity, Usage: usage}, nil
	})
}

// RemoveNode forgets the node's record; removing an unknown node succeeds.
func (e *Engine[N, W]) RemoveNode(ctx context.Context, req *types.Request) (any, error) {
	return struct{}{}, e.remove(ctx, req.Nodename)
}

// SetCapacity changes the node's capacity and answers the capacity before
// and after.
func (e *Engine[N, W]) SetCapacity(ctx context.Context, req *types.Request) (any, error) {
	change := types.ChangeOf(req, false)
	return e.write(ctx, req.Nodename, func(v *nodeView[N], env Env) (N, any, error) {
		next, err := e.Res.SetCapacity(v.rec, change, req.Delta, req.Incr)
		if err != nil {
			return v.rec, nil, err
		}
		before, _ := e.Res.View(v.rec, env)
		after, _ := e.Res.View(next, env)
		return next, types.BeforeAfter{Before: before, After: after}, nil
	})
}

// SetInfo writes capacity and usage verbatim (core's undo of a
// remove-node).
func (e *Engine[N, W]) SetInfo(ctx context.Context, req *types.Request) (any, error) {
	return e.write(ctx, req.Nodename, func(v *nodeView[N], _ Env) (N, any, error) {
		rec, err := e.Res.Restore(req.Capacity, req.Usage)
		if err != nil {
			return v.rec, nil, err
		}
		// Written verbatim: the ledger is not drawn on, but an isolated node
		// still takes no growth.
		if err := v.reg.RefuseGrowth(e.Res.Held(v.rec), e.Res.Held(rec)); err != nil {
			return v.rec, nil, err
		}
		return rec, struct{}{}, nil
	})
}

// SetUsage changes the node's usage and answers the usage before and after.
func (e *Engine[N, W]) SetUsage(ctx context.Context, req *types.Request) (any, error) {
	change := types.ChangeOf(req, true)
	return e.write(ctx, req.Nodename, func(v *nodeView[N], env Env) (N, any, error) {
		next, err := e.Res.NextUsage(v.rec, change, req.Delta, req.Incr)
		if err != nil {
			return v.rec, nil, err
		}
		// A delta is core adding or removing workloads: decreases draw on
		// the isolation ledger first. An absolute write (core replaying a
		// before, a reset) lands verbatim; either way an isolated node
		// takes no growth.
		if req.Delta {
			held, err := v.reg.Absorb(e.Res.Name(), e.Res.Held(v.rec), e.Res.Held(next))
			if err != nil {
				return v.rec, nil, err
			}
			next = e.Res.WithHeld(next, held)
		} else if err := v.reg.RefuseGrowth(e.Res.Held(v.rec), e.Res.Held(next)); err != nil {
			return v.rec, nil, err
		}
		if next, err = e.Res.Settle(next); err != nil {
			return v.rec, nil, err
		}
		_, before := e.Res.View(v.rec, env)
		_, after := e.Res.View(next, env)
		return next, types.BeforeAfter{Before: before, After: after}, nil
	})
}

// GetInfo answers the node's capacity, usage and the disagreements with
// the workloads core lists; null for a node the plugin has never seen.
func (e *Engine[N, W]) GetInfo(ctx context.Context, req *types.Request) (any, error) {
	v, env, err := e.readNode(ctx, req.Nodename)
	if err != nil {
		return nil, err
	}
	if !v.known {
		return nil, nil // core reads null as "no such node here"
	}
	_, diffs, err := e.Res.Recompute(v.rec, req.WorkloadsResource, v.reg.Ledger(e.Res.Name()))
	if err != nil {
		return nil, err
	}
	capacity, usage := e.Res.View(v.rec, env)
	return types.NodeResourceInfo{Capacity: capacity, Usage: usage, Diffs: diffs}, nil
}

// FixNode rewrites the node's usage as the sum of its workloads' (less the
// isolation ledger) and answers like GetInfo; an isolated node is reported,
// not written.
func (e *Engine[N, W]) FixNode(ctx context.Context, req *types.Request) (any, error) {
	// The workloads are the caller's view of the node. A retry after a
	// conflict may go ahead when only capacity or the registration moved;
	// when the usage itself moved, someone placed or removed work since the
	// fix began, and writing the caller's sum would erase it.
	var seen types.Amounts
	return e.write(ctx, req.Nodename, func(v *nodeView[N], env Env) (N, any, error) {
		if !v.known {
			return v.rec, nil, types.Errorf(types.NotFound, "the %s plugin has no record of this node", e.Res.Name())
		}
		held := e.Res.Held(v.rec)
		if seen == nil {
			seen = held
		} else if !maps.Equal(seen, held) {
			return v.rec, nil, types.Errorf(types.Aborted, "the node's usage changed while it was being fixed; list its workloads again and retry")
		}
		fixed, diffs, err := e.Res.Recompute(v.rec, req.WorkloadsResource, v.reg.Ledger(e.Res.Name()))
		if err != nil {
			return v.rec, nil, err
		}
		next := v.rec
		if len(diffs) > 0 && !v.reg.Isolated() {
			if next, err = e.Res.Settle(fixed); err != nil {
				return v.rec, nil, types.Wrap(types.FailedPrecondition, err, "the workloads' usage cannot be written")
			}
		}
		capacity, usage := e.Res.View(next, env)
		return next, types.NodeResourceInfo{Capacity: capacity, Usage: usage, Diffs: diffs}, nil
	})
}

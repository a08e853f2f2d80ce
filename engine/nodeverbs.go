package engine

import (
	"context"
	"maps"

	"github.com/eru-extend/resources/types"
)

// The verbs that read or write one node's record.

// AddNode records a new node; a name the node registry retired never comes
// back. With no other plugin record of the name, the add is a new life: the
// registration left by the last one starts fresh.
func (e *Engine[N, W]) AddNode(ctx context.Context, req *types.Request) (any, error) {
	rec, err := e.Res.AddNode(req.Resource, req.Info)
	if err != nil {
		return nil, err
	}
	return e.writeAs(ctx, req.Nodename, writeMode[N]{verb: "add-node", delta: false}, func(v *nodeView[N], env Env) (N, any, error) {
		if v.known {
			return v.rec, nil, types.Errorf(types.AlreadyExists, "node exists")
		}
		if err := v.reg.Adding(e.Res.Name(), v.others); err != nil {
			return v.rec, nil, err
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
	change, err := types.ChangeOf(req, false)
	if err != nil {
		return nil, err
	}
	edit, err := e.Res.CapacityChange(change, req.Delta, req.Incr)
	if err != nil {
		return nil, err
	}
	return e.writeAs(ctx, req.Nodename, writeMode[N]{verb: "set-node-resource-capacity", delta: req.Delta}, func(v *nodeView[N], env Env) (N, any, error) {
		if err := v.reg.RefuseRetired("capacity write"); err != nil {
			return v.rec, nil, err
		}
		next, err := edit.Apply(v.rec)
		if err != nil {
			return v.rec, nil, err
		}
		before, _ := e.Res.View(v.rec, env)
		after, _ := e.Res.View(next, env)
		return next, types.BeforeAfter{Before: before, After: after}, nil
	})
}

// SetInfo writes capacity and usage verbatim (core's undo of a
// remove-node). It never starts a new life: a registration the removal left
// (drained, isolated, a ledger) is found as it was.
func (e *Engine[N, W]) SetInfo(ctx context.Context, req *types.Request) (any, error) {
	// core's undo hands back what get-node-resource-info answered before
	// the removal; for a node without a record that was null, so both are
	// null and the state to restore is no record: nothing to write.
	if types.IsNull(req.Capacity) && types.IsNull(req.Usage) {
		return struct{}{}, nil
	}
	return e.writeAs(ctx, req.Nodename, writeMode[N]{verb: "set-node-resource-info", delta: false}, func(v *nodeView[N], _ Env) (N, any, error) {
		if err := v.reg.RefuseRetired("record"); err != nil {
			return v.rec, nil, err
		}
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
// Where the isolation ledger is involved, both carry it (LedgerKey), so
// core's rollback, which replays the before with delta=false, restores the
// ledger with the usage.
func (e *Engine[N, W]) SetUsage(ctx context.Context, req *types.Request) (any, error) {
	change, err := types.ChangeOf(req, true)
	if err != nil {
		return nil, err
	}
	restore, err := takeLedger(&change)
	if err != nil {
		return nil, err
	}
	if restore != nil && req.Delta {
		return nil, types.Invalid("%s is a rollback snapshot: it is only replayed with delta=false", LedgerKey)
	}
	edit, err := e.Res.UsageChange(change, req.Delta, req.Incr)
	if err != nil {
		return nil, err
	}
	// The answer is rendered again from the record stored when the
	// resource's linked records adjust it (storage's pool admission).
	var answer func(next N) (any, error)
	mode := writeMode[N]{verb: "set-node-resource-usage", delta: req.Delta, answer: func(next N) (any, error) { return answer(next) }}
	return e.writeAs(ctx, req.Nodename, mode, func(v *nodeView[N], env Env) (N, any, error) {
		if !v.known {
			// A usage write would create the record: a tombstone takes
			// none, even of zero usage (which is no growth).
			if err := v.reg.RefuseRetired("record"); err != nil {
				return v.rec, nil, err
			}
		}
		ledger := v.reg.Ledger(e.Res.Name()).Clone()
		next, err := edit.Apply(v.rec)
		if err != nil {
			return v.rec, nil, err
		}
		// A delta is core adding or removing workloads: decreases draw on
		// the isolation ledger first. An absolute write (core replaying a
		// before, a reset) lands verbatim and sets the ledger back to the
		// snapshot it carries; either way an isolated or retired node takes
		// no growth.
		if req.Delta {
			held, err := v.reg.Absorb(e.Res.Name(), e.Res.Held(v.rec), e.Res.Held(next))
			if err != nil {
				return v.rec, nil, err
			}
			next = e.Res.WithHeld(next, held)
		} else {
			if err := v.reg.RefuseGrowth(e.Res.Held(v.rec), e.Res.Held(next)); err != nil {
				return v.rec, nil, err
			}
			if restore != nil {
				if err := checkLedgerKeys(restore, e.Res.CheckLedgerKey); err != nil {
					return v.rec, nil, err
				}
				v.reg.RestoreLedger(e.Res.Name(), restore)
			}
		}
		if next, err = e.Res.Settle(next); err != nil {
			return v.rec, nil, err
		}
		answer = func(next N) (any, error) {
			_, before := e.Res.View(v.rec, env)
			_, after := e.Res.View(next, env)
			if len(ledger) > 0 || len(v.reg.Ledger(e.Res.Name())) > 0 || restore != nil {
				var err error
				if before, err = withLedger(before, ledger); err != nil {
					return nil, err
				}
				if after, err = withLedger(after, v.reg.Ledger(e.Res.Name())); err != nil {
					return nil, err
				}
			}
			return types.BeforeAfter{Before: before, After: after}, nil
		}
		out, err := answer(next)
		return next, out, err
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
// isolation ledger) and answers like GetInfo; an isolated or retired node is
// reported, not written.
func (e *Engine[N, W]) FixNode(ctx context.Context, req *types.Request) (any, error) {
	// The workloads are the caller's view of the node. A retry after a
	// conflict may go ahead when only capacity or the registration moved;
	// when the usage itself moved, someone placed or removed work since the
	// fix began, and writing the caller's sum would erase it.
	var seen types.Amounts
	return e.writeAs(ctx, req.Nodename, writeMode[N]{verb: "fix-node-resource", delta: false}, func(v *nodeView[N], env Env) (N, any, error) {
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
		if len(diffs) > 0 && !v.reg.Isolated() && !v.reg.Retired() {
			if next, err = e.Res.Settle(fixed); err != nil {
				return v.rec, nil, types.Wrap(types.FailedPrecondition, err, "the workloads' usage cannot be written")
			}
		}
		capacity, usage := e.Res.View(next, env)
		return next, types.NodeResourceInfo{Capacity: capacity, Usage: usage, Diffs: diffs}, nil
	})
}

package pool

import (
	"slices"
	"time"

	"github.com/eru-extend/resources/types"
)

// MoveRequest is one step of `storage pools move ID --to P2 --node N`, with
// what its transaction read.
type MoveRequest struct {
	// Node is the node that copies; Reach its attachments (true when
	// available). It must reach both pools.
	Node  string
	Reach map[string]bool
	// Holder is the node whose record has the object; Objects its objects.
	Holder  string
	Objects Objects
	ID      string
	// From is the pool the command found the object in when it began: the
	// pool it copies from and whose record it loads. A step that finds the
	// object in another pool (moved meanwhile by another command) is
	// refused, as aborted: the copy would come from the wrong place.
	From string
	To   string
	// CommandID names the move; a step of another move is refused.
	CommandID string
	// Pools holds the records of the source and target pools.
	Pools map[string]*Record
}

// MoveOutcome is what a move step stores: the holder's objects and the
// pool records that changed. Done is true when there was nothing to do (an
// object already in the target, a step replayed).
type MoveOutcome struct {
	Objects Objects
	Pools   map[string]*Record
	Done    bool
}

// StartMove is a move's first transaction: the object must exist, be
// unheld or held by the copying node, not moving (a move under the same
// command is resumed as is), not lost; the target must exist, not be lost,
// keep no earlier copy of the object, and have room; the copying node must
// reach both pools. The object records moving_to and the command, and its
// bytes are reserved in the target too.
func StartMove(r MoveRequest) (MoveOutcome, error) {
	obj, ok := r.Objects[r.ID]
	if !ok {
		return MoveOutcome{}, types.Errorf(types.NotFound, "object %s does not exist on node %s", r.ID, r.Holder)
	}
	if err := r.stillIn(obj); err != nil {
		return MoveOutcome{}, err
	}
	switch {
	case obj.MovingTo == r.To && obj.MoveCommandID == r.CommandID:
		return MoveOutcome{Objects: r.Objects.Clone(), Pools: map[string]*Record{}, Done: true}, nil
	case obj.MovingTo != "":
		return MoveOutcome{}, types.Errorf(types.Unavailable, "object %s is already moving to pool %s (command %s)", r.ID, obj.MovingTo, obj.MoveCommandID)
	case obj.Pool == r.To:
		return MoveOutcome{Objects: r.Objects.Clone(), Pools: map[string]*Record{}, Done: true}, nil
	case obj.Held && r.Holder != r.Node:
		return MoveOutcome{}, types.Errorf(types.FailedPrecondition, "object %s is held by node %s; move it on that node once its workload is stopped", r.ID, r.Holder)
	}
	src, dst := r.Pools[obj.Pool], r.Pools[r.To]
	switch {
	case src == nil || src.Lost():
		return MoveOutcome{}, types.Errorf(types.FailedPrecondition, "object %s is LOST or its pool %s has no record", r.ID, obj.Pool)
	case dst == nil:
		return MoveOutcome{}, types.Errorf(types.NotFound, "pool %s was never declared", r.To)
	case dst.Lost():
		return MoveOutcome{}, types.Errorf(types.FailedPrecondition, "pool %s was declared lost", r.To)
	case !r.Reach[obj.Pool] || !r.Reach[r.To]:
		return MoveOutcome{}, types.Errorf(types.FailedPrecondition, "node %s does not reach both pools %s and %s through available attachments", r.Node, obj.Pool, r.To)
	}
	if slices.ContainsFunc(dst.Cleanups, func(c Cleanup) bool { return c.Object == r.ID }) {
		return MoveOutcome{}, types.Errorf(types.Unavailable, "pool %s still keeps an earlier copy of object %s; run `storage pools cleanup %s` first", r.To, r.ID, r.To)
	}
	if err := Room(dst, obj.Bytes); err != nil {
		return MoveOutcome{}, err
	}
	objs := r.Objects.Clone()
	obj.MovingTo, obj.MoveCommandID = r.To, r.CommandID
	objs[r.ID] = obj
	next := dst.Clone()
	next.Reserved += obj.Bytes
	return MoveOutcome{Objects: objs, Pools: map[string]*Record{r.To: next}}, nil
}

// stillIn refuses a step that finds the object in another pool than the
// one the command began with (From).
func (r MoveRequest) stillIn(obj Object) error {
	if obj.Pool != r.From {
		return types.Errorf(types.Aborted, "object %s moved to pool %s after this move found it in pool %s; run the move again", r.ID, obj.Pool, r.From)
	}
	return nil
}

// moving finds the object under move r, or answers a replayed step.
func (r MoveRequest) moving(settledPool string) (Object, bool, error) {
	obj, ok := r.Objects[r.ID]
	switch {
	case !ok:
		return Object{}, false, types.Errorf(types.NotFound, "object %s does not exist on node %s", r.ID, r.Holder)
	case obj.MovingTo == r.To && obj.MoveCommandID == r.CommandID:
		return obj, false, r.stillIn(obj)
	case obj.MovingTo == "" && obj.Pool == settledPool:
		return obj, true, nil
	default:
		return Object{}, false, types.Errorf(types.FailedPrecondition, "object %s is not moving to pool %s under command %s", r.ID, r.To, r.CommandID)
	}
}

// SettleMove is a move's last transaction, after the copy: the object now
// lives in the target, the source's reservation is released and the
// source gains a cleanup entry for the copy left there. A replay after the
// settle changes nothing.
func SettleMove(r MoveRequest, now time.Time) (MoveOutcome, error) {
	obj, done, err := r.moving(r.To)
	if err != nil || done {
		return MoveOutcome{Objects: r.Objects.Clone(), Pools: map[string]*Record{}, Done: done}, err
	}
	src, dst := r.Pools[obj.Pool], r.Pools[r.To]
	if dst == nil || dst.Lost() {
		return MoveOutcome{}, types.Errorf(types.FailedPrecondition, "pool %s was declared lost; abort the move", r.To)
	}
	out := MoveOutcome{Objects: r.Objects.Clone(), Pools: map[string]*Record{}}
	if src != nil && !src.Lost() {
		s := src.Clone()
		s.Reserved = max(s.Reserved-obj.Bytes, 0)
		s.Objects = max(s.Objects-1, 0)
		s.Cleanups = append(s.Cleanups, Cleanup{Object: r.ID, Reason: CleanupMoved, CommandID: r.CommandID, Bytes: obj.Bytes, Since: now.UTC()})
		out.Pools[src.ID] = s
	}
	d := dst.Clone()
	d.Objects++
	out.Pools[r.To] = d
	obj.Pool, obj.MovingTo, obj.MoveCommandID = r.To, "", ""
	out.Objects[r.ID] = obj
	return out, nil
}

// AbortMove undoes a move before it settled: the object stays in its pool,
// the target's reservation is released and the target gains a cleanup
// entry for the partial copy. A replay after the abort changes nothing.
func AbortMove(r MoveRequest, now time.Time) (MoveOutcome, error) {
	cur, ok := r.Objects[r.ID]
	if !ok {
		return MoveOutcome{}, types.Errorf(types.NotFound, "object %s does not exist on node %s", r.ID, r.Holder)
	}
	obj, done, err := r.moving(cur.Pool)
	if err != nil || done {
		return MoveOutcome{Objects: r.Objects.Clone(), Pools: map[string]*Record{}, Done: done}, err
	}
	out := MoveOutcome{Objects: r.Objects.Clone(), Pools: map[string]*Record{}}
	if dst := r.Pools[r.To]; dst != nil && !dst.Lost() {
		d := dst.Clone()
		d.Reserved = max(d.Reserved-obj.Bytes, 0)
		d.Cleanups = append(d.Cleanups, Cleanup{Object: r.ID, Reason: CleanupAborted, CommandID: r.CommandID, Bytes: obj.Bytes, Since: now.UTC()})
		out.Pools[r.To] = d
	}
	obj.MovingTo, obj.MoveCommandID = "", ""
	out.Objects[r.ID] = obj
	return out, nil
}

// DropCleanup removes the cleanup entry of object from pool rec once its
// copy was removed; false when there was none.
func DropCleanup(rec *Record, object string) (*Record, bool) {
	i := slices.IndexFunc(rec.Cleanups, func(c Cleanup) bool { return c.Object == object })
	if i < 0 {
		return rec.Clone(), false
	}
	next := rec.Clone()
	next.Cleanups = slices.Delete(next.Cleanups, i, i+1)
	return next, true
}

package pool

import (
	"maps"
	"slices"

	"github.com/eru-extend/resources/types"
)

// Mode is how a usage write changes a node's objects.
type Mode int

// The modes of set-node-resource-usage.
const (
	// Absolute replaces the node's objects (core's rollback of `before`,
	// set-node-resource-info, fix-node-resource).
	Absolute Mode = iota
	// Incr adds bytes to each object, creating it (a negative amount, a
	// realloc shrink, subtracts).
	Incr
	// Decr subtracts bytes from each object this node's record still has,
	// deleting it at 0; an object it no longer has is left alone.
	Decr
)

// Amount is one object's part of a usage write: its pool and bytes (the
// workload resources' pool plans, summed per object).
type Amount struct {
	Pool  string
	Bytes int64
}

// Change is the pool part of one usage write.
type Change struct {
	Mode    Mode
	Objects map[string]Amount
	// Unheld are the objects an absolute restore's snapshot has unheld:
	// the restore leaves them unheld (it never makes an unheld object
	// held again).
	Unheld map[string]bool
}

// Write is everything one usage write's admission needs, read in the same
// transaction that will write its outcome.
type Write struct {
	Node     string
	Isolated bool
	// Reach holds the pools this node declares, true when the attachment
	// is available.
	Reach  map[string]bool
	Before Objects
	Change Change
	// Attaching are the object ids the change attaches (bindings naming an
	// existing object). Each must be in Before or in Others.
	Attaching []string
	// From names, for an attached object, the node whose record its plan
	// found it in (the plan's from); an object no longer there is a stale
	// plan.
	From map[string]string
	// Others are the records of the nodes an attached object comes from,
	// by node. For an absolute write, they must include every record that
	// has an object of the change absent from Before, so that a restore
	// neither duplicates an object nor takes one from under another
	// node's workload.
	Others map[string]Objects
	// Pools are the records of every pool the change and the objects it
	// touches live in or move to.
	Pools map[string]*Record
	// Restore marks an absolute restore or a fix: no precondition or
	// capacity check (a rollback never fails); the counters still move by
	// the derived deltas.
	Restore bool
}

// Delta is how one write moves one pool's counters.
type Delta struct {
	Bytes   int64
	Objects int64
}

// Outcome is what a write stores: this node's objects, the other records an
// attach took objects from, and the pool records whose counters moved.
type Outcome struct {
	After  Objects
	Others map[string]Objects
	Pools  map[string]*Record
	Deltas map[string]Delta
}

// Admit applies a usage write to a node's objects and derives each pool's
// delta from the before/after objects of every record it touches; for a
// pool whose reservation grows it requires a node not isolated, a pool not
// lost, an available attachment, a capacity set and room for the growth.
// Refusals are failed_precondition, resource_exhausted (no room) or
// unavailable (a moving object) or aborted (an attach whose plan is stale);
// nothing of a refused write is to be stored.
func Admit(w Write) (Outcome, error) {
	after := w.Before.Clone()
	others := map[string]Objects{}
	for n, o := range w.Others {
		others[n] = o.Clone()
	}
	attaching := map[string]bool{}
	for _, id := range w.Attaching {
		attaching[id] = true
	}
	ids := slices.Sorted(maps.Keys(w.Change.Objects))
	if w.Change.Mode == Absolute {
		after = Objects{}
	}
	for _, id := range ids {
		amt := w.Change.Objects[id]
		if err := ValidObjectID(id); err != nil {
			return Outcome{}, err
		}
		if err := ValidID(amt.Pool); err != nil {
			return Outcome{}, types.Invalid("object %s: %v", id, err)
		}
		if amt.Bytes > types.MaxExact || amt.Bytes < -types.MaxExact {
			return Outcome{}, types.Invalid("object %s: %d bytes is out of range (at most 8 PiB)", id, amt.Bytes)
		}
		var err error
		switch w.Change.Mode {
		case Decr:
			err = w.decr(after, id, amt)
		case Incr:
			err = w.incr(after, others, id, amt, attaching[id])
		default:
			err = w.absolute(after, others, id, amt, attaching[id])
		}
		if err != nil {
			return Outcome{}, err
		}
	}
	if w.Change.Mode == Absolute && !w.Restore {
		for _, id := range w.Before.IDs() {
			if _, kept := after[id]; !kept {
				if err := w.notMoving(id, w.Before[id]); err != nil {
					return Outcome{}, err
				}
			}
		}
	}
	if w.Change.Mode == Absolute && w.Restore {
		w.giveBack(after, others)
	}
	if err := after.Validate(); err != nil {
		return Outcome{}, err
	}
	before := []Objects{w.Before}
	now := []Objects{after}
	for n := range w.Others {
		before = append(before, w.Others[n])
		now = append(now, others[n])
	}
	deltas := Deltas(before, now)
	out := Outcome{After: after, Others: map[string]Objects{}, Pools: map[string]*Record{}, Deltas: deltas}
	for n, o := range others {
		if !maps.Equal(o, w.Others[n]) {
			out.Others[n] = o
		}
	}
	for _, p := range slices.Sorted(maps.Keys(deltas)) {
		d := deltas[p]
		rec := w.Pools[p]
		if (d.Bytes > 0 || d.Objects > 0) && !w.Restore {
			if err := w.admitGrowth(p, rec, d.Bytes); err != nil {
				return Outcome{}, err
			}
		}
		if rec == nil || rec.Lost() {
			// A lost pool reserves nothing: its counters never move. A
			// pool without a record has no counter to move; check
			// reports the objects.
			continue
		}
		next := rec.Clone()
		next.Reserved = max(next.Reserved+d.Bytes, 0)
		next.Objects = max(next.Objects+d.Objects, 0)
		out.Pools[p] = next
	}
	return out, nil
}

// admitGrowth checks a pool that gains objects or whose reservation grows
// by delta (the room is checked only for a growth).
func (w Write) admitGrowth(p string, rec *Record, delta int64) error {
	switch {
	case w.Isolated:
		return types.Errorf(types.FailedPrecondition, "node is isolated: no new object or growth in pool %s", p)
	case rec == nil:
		return types.Errorf(types.FailedPrecondition, "pool %s is not declared by any node", p)
	case rec.Lost():
		return types.Errorf(types.FailedPrecondition, "pool %s was declared lost at %s", p, rec.LostAt.UTC().Format(timeFormat))
	}
	available, declared := w.Reach[p]
	switch {
	case !declared:
		return types.Errorf(types.FailedPrecondition, "this node does not declare pool %s", p)
	case !available:
		return types.Errorf(types.FailedPrecondition, "this node's attachment to pool %s is unavailable", p)
	case delta <= 0:
		return nil
	}
	return Room(rec, delta)
}

// Room checks that pool rec takes asked more bytes: a capacity set
// (failed_precondition) and capacity − reserved ≥ asked
// (resource_exhausted, sizes in human units and bytes).
func Room(rec *Record, asked int64) error {
	if rec.Lost() {
		return types.Errorf(types.FailedPrecondition, "pool %s was declared lost", rec.ID)
	}
	if rec.Capacity == nil {
		return types.Errorf(types.FailedPrecondition, "pool %s has no capacity set; an operator sets it with `storage pools set-capacity`", rec.ID)
	}
	if free := rec.Free(); asked > free {
		return types.Errorf(types.ResourceExhausted, "pool %s has %s free, %s asked (%d bytes free, %d asked)", rec.ID, Human(free), Human(asked), free, asked)
	}
	return nil
}

func (w Write) decr(after Objects, id string, amt Amount) error {
	if amt.Bytes < 0 {
		return types.Invalid("object %s: a decrease of %d bytes is negative", id, amt.Bytes)
	}
	obj, ok := after[id]
	if !ok {
		// Attached elsewhere since, or already deleted: never a second
		// release.
		return nil
	}
	if err := w.notMoving(id, obj); err != nil {
		return err
	}
	if obj.Bytes -= amt.Bytes; obj.Bytes <= 0 {
		delete(after, id)
		return nil
	}
	after[id] = obj
	return nil
}

func (w Write) incr(after Objects, others map[string]Objects, id string, amt Amount, attach bool) error {
	if obj, ok := after[id]; ok {
		if obj.Pool != amt.Pool {
			return types.Invalid("object %s lives in pool %s, not %s", id, obj.Pool, amt.Pool)
		}
		if attach {
			return w.reattach(after, id, obj)
		}
		if amt.Bytes == 0 {
			return nil
		}
		if err := w.notMoving(id, obj); err != nil {
			return err
		}
		obj.Bytes += amt.Bytes
		switch {
		case obj.Bytes < 0 && !w.Restore:
			return types.Invalid("object %s: shrinking by %d bytes leaves less than nothing", id, -amt.Bytes)
		case obj.Bytes <= 0:
			delete(after, id)
		default:
			after[id] = obj
		}
		return nil
	}
	if attach || w.holder(others, id) != "" {
		return w.attach(after, others, id, amt)
	}
	if amt.Bytes <= 0 {
		return nil // shrinking an object this node no longer has
	}
	after[id] = Object{Pool: amt.Pool, Bytes: amt.Bytes, Held: true}
	return nil
}

func (w Write) absolute(after Objects, others map[string]Objects, id string, amt Amount, attach bool) error {
	if amt.Bytes < 0 {
		return types.Invalid("object %s: %d bytes is negative", id, amt.Bytes)
	}
	if amt.Bytes == 0 {
		return nil
	}
	if obj, ok := w.Before[id]; ok {
		if attach && obj.Pool == amt.Pool && !obj.Held {
			if err := w.reattach(after, id, obj); err != nil {
				return err
			}
			obj = after[id]
		}
		// A restore keeps the object in the pool the record says it lives
		// in: a move since the snapshot changed it there, and its data is
		// there.
		if obj.Pool != amt.Pool && !w.Restore {
			obj = Object{Pool: amt.Pool, Held: true}
		}
		if obj.Bytes != amt.Bytes && !w.Restore {
			if err := w.notMoving(id, obj); err != nil {
				return err
			}
		}
		obj.Bytes = amt.Bytes
		if w.Restore && w.Change.Unheld[id] {
			obj.Held = false
		}
		after[id] = obj
		return nil
	}
	if attach || w.holder(others, id) != "" {
		return w.attach(after, others, id, amt)
	}
	after[id] = Object{Pool: amt.Pool, Bytes: amt.Bytes, Held: !(w.Restore && w.Change.Unheld[id])}
	return nil
}

// reattach takes back the use right of an object this node's own record
// keeps unheld (released by an isolation of an earlier incarnation).
func (w Write) reattach(after Objects, id string, obj Object) error {
	if obj.Held {
		return nil
	}
	if !w.Restore {
		if err := CheckAttach(id, obj, w.Node, w.Isolated, w.Reach, w.Pools[obj.Pool]); err != nil {
			return err
		}
	}
	obj.Held = true
	after[id] = obj
	return nil
}

// holder is the other node whose record has object id, or "".
func (w Write) holder(others map[string]Objects, id string) string {
	for _, n := range slices.Sorted(maps.Keys(others)) {
		if _, ok := others[n][id]; ok {
			return n
		}
	}
	return ""
}

// attach moves object id from the record of the node that has it to this
// node's, held. The pool's reservation does not change.
func (w Write) attach(after Objects, others map[string]Objects, id string, amt Amount) error {
	from := w.holder(others, id)
	if from == "" {
		if w.Restore && amt.Bytes > 0 {
			// A restore recreates an object that exists nowhere.
			after[id] = Object{Pool: amt.Pool, Bytes: amt.Bytes, Held: !w.Change.Unheld[id]}
			return nil
		}
		// The plan found it in a record that no longer has it: attached
		// elsewhere or deleted since. Nothing lands; a new plan finds it
		// where it is now, or says it is gone.
		if node := w.From[id]; node != "" {
			return types.Errorf(types.Aborted, "object %s is no longer in node %s's record, where the deploy's plan found it (attached elsewhere or deleted since); plan the deploy again", id, node)
		}
		return types.Errorf(types.Aborted, "object %s is no longer where the deploy's plan found it (attached elsewhere or deleted since); plan the deploy again", id)
	}
	obj := others[from][id]
	if w.Restore && obj.Held {
		// Another node's workload holds it now: a restore leaves it
		// there rather than take it from under that workload.
		return nil
	}
	if !w.Restore {
		if err := CheckAttach(id, obj, from, w.Isolated, w.Reach, w.Pools[obj.Pool]); err != nil {
			return err
		}
		if obj.Pool != amt.Pool {
			return types.Invalid("object %s lives in pool %s, not %s", id, obj.Pool, amt.Pool)
		}
		if amt.Bytes != 0 && amt.Bytes != obj.Bytes {
			return types.Errorf(types.FailedPrecondition, "object %s has %d bytes, the plan says %d", id, obj.Bytes, amt.Bytes)
		}
	}
	delete(others[from], id)
	// A restore takes an unheld object back as its snapshot has it: it
	// never makes an unheld object held.
	obj.Held = !(w.Restore && w.Change.Unheld[id])
	if !w.Restore {
		obj.AttachedFrom = from
	}
	after[id] = obj
	return nil
}

// Donors are the nodes an absolute restore of before may give attached
// objects back to: the AttachedFrom of each object of before the change
// drops. Their records are to be read into Others.
func Donors(before Objects, c Change) []string {
	if c.Mode != Absolute {
		return nil
	}
	set := map[string]bool{}
	for id, obj := range before {
		if _, kept := c.Objects[id]; !kept && obj.AttachedFrom != "" {
			set[obj.AttachedFrom] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// giveBack undoes the attaches an absolute restore drops (core rolling
// back the deploy that attached them): each object of Before the restore
// dropped that was attached from another node goes back unheld to that
// node's record when it is read in Others and has no such object, or else
// stays here unheld. Its data and reservation are kept, and it can be
// attached again.
func (w Write) giveBack(after Objects, others map[string]Objects) {
	for _, id := range w.Before.IDs() {
		obj := w.Before[id]
		if _, kept := after[id]; kept || obj.AttachedFrom == "" || w.holder(others, id) != "" {
			continue
		}
		donor := obj.AttachedFrom
		obj.Held, obj.AttachedFrom = false, ""
		if d, ok := others[donor]; ok && donor != w.Node {
			d[id] = obj
			continue
		}
		after[id] = obj
	}
}

// CheckAttach checks that this node may take the use right of object id,
// found in node holder's record: the object is not held there, not moving,
// its pool not lost, and this node not isolated and reaching the pool
// through an available attachment.
func CheckAttach(id string, obj Object, holder string, isolated bool, reach map[string]bool, rec *Record) error {
	switch {
	case isolated:
		return types.Errorf(types.FailedPrecondition, "node is isolated: object %s cannot be attached here", id)
	case obj.Held:
		return types.Errorf(types.FailedPrecondition, "object %s is held by node %s", id, holder)
	case obj.MovingTo != "":
		return types.Errorf(types.Unavailable, "object %s is moving to pool %s (command %s)", id, obj.MovingTo, obj.MoveCommandID)
	case rec == nil:
		return types.Errorf(types.FailedPrecondition, "object %s lives in pool %s, which no node declares", id, obj.Pool)
	case rec.Lost():
		return types.Errorf(types.FailedPrecondition, "object %s is LOST: pool %s was declared lost", id, obj.Pool)
	}
	available, declared := reach[obj.Pool]
	switch {
	case !declared:
		return types.Errorf(types.FailedPrecondition, "object %s lives in pool %s, which this node does not declare", id, obj.Pool)
	case !available:
		return types.Errorf(types.FailedPrecondition, "object %s lives in pool %s, whose attachment on this node is unavailable", id, obj.Pool)
	}
	return nil
}

func (w Write) notMoving(id string, obj Object) error {
	if obj.MovingTo != "" && !w.Restore {
		return types.Errorf(types.Unavailable, "object %s is moving to pool %s (command %s); try again once it settles", id, obj.MovingTo, obj.MoveCommandID)
	}
	return nil
}

// Deltas derives each pool's counter change from the before and after
// objects of the records a write touches: an object counts its bytes and
// itself in the pool it lives in, and its bytes in the pool it moves to.
// Pools whose counters do not change are left out.
func Deltas(before, after []Objects) map[string]Delta {
	sum := map[string]Delta{}
	add := func(set []Objects, sign int64) {
		for _, objs := range set {
			for _, obj := range objs {
				d := sum[obj.Pool]
				d.Bytes += sign * obj.Bytes
				d.Objects += sign
				sum[obj.Pool] = d
				if obj.MovingTo != "" {
					m := sum[obj.MovingTo]
					m.Bytes += sign * obj.Bytes
					sum[obj.MovingTo] = m
				}
			}
		}
	}
	add(after, 1)
	add(before, -1)
	for p, d := range sum {
		if d == (Delta{}) {
			delete(sum, p)
		}
	}
	return sum
}

package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/eru-extend/resources/types"
)

// Tx is one attempt of an Update: the snapshot it read and the writes it
// wants. Its commit is conditional on every key read being unchanged.
type Tx struct {
	snap    *Snapshot
	keys    []string
	named   map[string]bool
	ops     []Op
	index   map[string]int // key -> position in ops, so the last write wins
	unnamed string         // the first key read that was not named to Update
}

func newTx(snap *Snapshot, keys []string) *Tx {
	named := make(map[string]bool, len(keys))
	for _, k := range keys {
		named[k] = true
	}
	return &Tx{snap: snap, keys: keys, named: named, index: map[string]int{}}
}

// Get returns the value of key as read, or as written earlier in this
// transaction. Only keys named to Update can be read: no condition would
// cover any other, so the Update that reads one fails (with class internal,
// writing nothing) whatever its function returns.
func (t *Tx) Get(key string) ([]byte, bool) {
	if i, ok := t.index[key]; ok {
		op := t.ops[i]
		return op.Value, !op.Delete
	}
	if !t.named[key] {
		if t.unnamed == "" {
			t.unnamed = key
		}
		return nil, false
	}
	return t.snap.Get(key)
}

// Put writes key.
func (t *Tx) Put(key string, value []byte) { t.set(Op{Key: key, Value: value}) }

// PutTTL writes key to expire after ttl.
func (t *Tx) PutTTL(key string, value []byte, ttl time.Duration) {
	t.set(Op{Key: key, Value: value, TTL: ttl})
}

// Delete removes key.
func (t *Tx) Delete(key string) { t.set(Op{Key: key, Delete: true}) }

// Writes reports whether the transaction has anything to commit.
func (t *Tx) Writes() bool { return len(t.ops) > 0 }

func (t *Tx) set(op Op) {
	if i, ok := t.index[op.Key]; ok {
		t.ops[i] = op
		return
	}
	t.index[op.Key] = len(t.ops)
	t.ops = append(t.ops, op)
}

func (t *Tx) conds() []Cond {
	conds := make([]Cond, 0, len(t.keys))
	for _, k := range t.keys {
		conds = append(conds, Cond{Key: k, ModRevision: t.snap.Items[k].ModRevision})
	}
	return conds
}

// ErrContention is returned by Update when the keys kept changing under it
// until its context ended. Errors wrapping it are of class aborted.
var ErrContention = errors.New("gave up after repeated conflicting writes by others")

// ErrUnnamedRead is returned by Update when its function read a key that was
// not named to it.
var ErrUnnamedRead = errors.New("read of a key not named to the update")

// Update reads keys in one snapshot, calls fn with a transaction over them,
// and commits fn's writes if none of the keys changed in between. On a
// conflict it waits a jittered, growing pause and starts again with a fresh
// read, until ctx ends; then it returns an error wrapping ErrContention. fn
// may run several times and must not have other side effects. An fn error
// ends the Update at once with that error and nothing written.
//
// A store whose writes can lose their answer (a Scoper) resolves every
// attempt: Update returns nil only when one attempt landed (the last fn
// call's), an error of class types.OutcomeUnknown when one may have, and any
// other error only when none did or will.
func Update(ctx context.Context, s Store, keys []string, fn func(*Tx) error) error {
	c := committer(ctx, s)
	defer c.Close()
	actx := c.Context()
	var snap *Snapshot
	conflicts := 0
	for attempt := 1; ; attempt++ {
		if snap == nil {
			var err error
			// The read may take the whole budget: an attempt that finds
			// no time left writes nothing and says so.
			if snap, err = s.Read(ctx, keys, nil); err != nil {
				return contended(actx, err, conflicts)
			}
		}
		tx := newTx(snap, keys)
		err := fn(tx)
		if tx.unnamed != "" {
			return types.Wrap(types.Internal, fmt.Errorf("%w: %q (named: %q)", ErrUnnamedRead, tx.unnamed, keys), "store")
		}
		if err != nil {
			return err
		}
		if !tx.Writes() {
			return nil
		}
		snap, err = c.Commit(actx, tx.conds(), tx.ops, keys)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrConflict):
			conflicts++
		case errors.Is(err, ErrNotApplied):
			// The attempt's answer was lost and it was found not to have
			// landed: try again while the budget lasts.
			if actx.Err() != nil {
				return err
			}
			snap = nil
		default:
			return contended(actx, err, conflicts)
		}
		if snap != nil && attempt%2 == 1 {
			continue // retry at once on the values the conflict brought back
		}
		// Back off a random while, short enough that a writer who has lost
		// many times is not starved by newcomers, then read afresh.
		snap = nil
		select {
		case <-actx.Done():
			if conflicts == 0 {
				return err
			}
			return contention(attempt)
		case <-time.After(time.Duration(rand.N(int64(maxPause)))):
		}
	}
}

// maxPause bounds the random pause between attempts after a conflict.
const maxPause = 8 * time.Millisecond

func contention(attempts int) error {
	return types.Wrap(types.Aborted, fmt.Errorf("%w (%d attempts)", ErrContention, attempts), "store")
}

// contended tells a deadline that ran out while retrying conflicts apart from
// a store that does not answer: after a conflict, running out of time is
// contention. An error saying a write may have landed is never relabelled:
// aborted promises that nothing did.
func contended(ctx context.Context, err error, conflicts int) error {
	if err != nil && conflicts > 0 && ctx.Err() != nil && types.ClassOf(err) != types.OutcomeUnknown {
		return contention(conflicts + 1)
	}
	return err
}

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
	snap  *Snapshot
	keys  []string
	ops   []Op
	index map[string]int // key -> position in ops, so the last write wins
}

// Get returns the value of key as read, or as written earlier in this
// transaction. Only keys named to Update can be read.
func (t *Tx) Get(key string) ([]byte, bool) {
	if i, ok := t.index[key]; ok {
		op := t.ops[i]
		return op.Value, !op.Delete
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

// Update reads keys in one snapshot, calls fn with a transaction over them,
// and commits fn's writes if none of the keys changed in between. On a
// conflict it waits a jittered, growing pause and starts again with a fresh
// read, until ctx ends; then it returns an error wrapping ErrContention. fn
// may run several times and must not have other side effects. An fn error
// ends the Update at once with that error and nothing written.
func Update(ctx context.Context, s Store, keys []string, fn func(*Tx) error) error {
	rr, rereads := s.(Rereader)
	var snap *Snapshot
	for attempt := 1; ; attempt++ {
		if snap == nil {
			var err error
			if snap, err = s.Read(ctx, keys, nil); err != nil {
				return contended(ctx, err, attempt)
			}
		}
		tx := &Tx{snap: snap, keys: keys, index: map[string]int{}}
		if err := fn(tx); err != nil {
			return err
		}
		if !tx.Writes() {
			return nil
		}
		var err error
		snap = nil
		if rereads {
			snap, err = rr.TxnOrRead(ctx, tx.conds(), tx.ops, keys)
		} else {
			err = s.Txn(ctx, tx.conds(), tx.ops)
		}
		if !errors.Is(err, ErrConflict) {
			return contended(ctx, err, attempt)
		}
		if snap != nil && attempt%2 == 1 {
			continue // retry at once on the values the conflict brought back
		}
		// Back off a random while, short enough that a writer who has lost
		// many times is not starved by newcomers, then read afresh.
		snap = nil
		select {
		case <-ctx.Done():
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
// contention.
func contended(ctx context.Context, err error, attempt int) error {
	if err != nil && attempt > 1 && ctx.Err() != nil {
		return contention(attempt)
	}
	return err
}

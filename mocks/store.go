// Package mocks holds failure-injecting doubles for unit tests of failure
// paths. Behaviour tests use the real stores; these only make a real store
// fail the way a busy or broken one would.
package mocks

import (
	"context"
	"sync"
	"time"

	"github.com/eru-extend/resources/store"
)

// FlakyStore wraps a store and fails its calls on demand.
type FlakyStore struct {
	store.Store

	mu sync.Mutex
	// Conflicts is how many of the next transactions fail with
	// store.ErrConflict without being applied.
	Conflicts int
	// ReadErr, when set, is returned by every Read.
	ReadErr error
	// TxnErr, when set, is returned by every transaction.
	TxnErr error
	// Delay is added before every call, as a slow server would.
	Delay time.Duration
	// Reads and Txns count the calls made.
	Reads, Txns int
	// BeforeTxn, when set, runs before each transaction is passed on; a
	// test uses it to slip a competing write in between a read and a
	// commit.
	BeforeTxn func()
}

// Read implements store.Store.
func (f *FlakyStore) Read(ctx context.Context, keys, prefixes []string) (*store.Snapshot, error) {
	f.mu.Lock()
	f.Reads++
	err, delay := f.ReadErr, f.Delay
	f.mu.Unlock()
	if err := wait(ctx, delay); err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	return f.Store.Read(ctx, keys, prefixes)
}

// Txn implements store.Store.
func (f *FlakyStore) Txn(ctx context.Context, conds []store.Cond, ops []store.Op) error {
	f.mu.Lock()
	f.Txns++
	err, delay, before := f.TxnErr, f.Delay, f.BeforeTxn
	conflict := f.Conflicts > 0
	if conflict {
		f.Conflicts--
	}
	f.mu.Unlock()
	if err := wait(ctx, delay); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	if conflict {
		return store.ErrConflict
	}
	if before != nil {
		before()
	}
	return f.Store.Txn(ctx, conds, ops)
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

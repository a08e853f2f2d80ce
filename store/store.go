// Package store is the key-value store every plugin record lives in: one
// interface with consistent batched reads and compare-and-swap transactions
// over several keys, implemented on etcd (store/etcdstore) and on an embedded
// bbolt file (store/boltstore).
//
// Keys are paths relative to the configured prefix ("/resource/storage/n1");
// each implementation puts the prefix in front. Every write goes through a
// transaction whose conditions name the mod revision each key had when it was
// read, so two writers of the same key never lose an update: the second one
// fails with ErrConflict and reads again (see Update).
package store

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"
)

// Item is one key as read, with the revision of its last modification.
type Item struct {
	Key         string
	Value       []byte
	ModRevision int64
}

// Snapshot is the result of one consistent read: every key asked for, every
// key under every prefix asked for, all as of the same revision.
type Snapshot struct {
	Revision int64
	Items    map[string]Item
}

// Get returns the value of key, and whether it exists.
func (s *Snapshot) Get(key string) ([]byte, bool) {
	it, ok := s.Items[key]
	return it.Value, ok
}

// Under returns the items whose key starts with prefix, ordered by key.
func (s *Snapshot) Under(prefix string) []Item {
	var out []Item
	for k, it := range s.Items {
		if strings.HasPrefix(k, prefix) {
			out = append(out, it)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Cond requires a key to be at a mod revision when a transaction commits;
// ModRevision 0 requires the key to be absent.
type Cond struct {
	Key         string
	ModRevision int64
}

// Op is one write of a transaction: a put (with an optional time to live
// after which the key reads as absent) or a delete.
type Op struct {
	Key    string
	Value  []byte
	Delete bool
	TTL    time.Duration
}

// Store is a key-value store with consistent reads and compare-and-swap
// transactions. Implementations are safe for concurrent use.
type Store interface {
	// Read returns the given keys and everything under the given prefixes in
	// one consistent snapshot, in one round trip where the backend allows.
	// Absent keys are absent from the snapshot.
	Read(ctx context.Context, keys []string, prefixes []string) (*Snapshot, error)
	// Txn applies ops atomically if every cond holds, and returns ErrConflict
	// (writing nothing) if one does not.
	Txn(ctx context.Context, conds []Cond, ops []Op) error
	// Close releases the store's connection or file.
	Close() error
}

// Rereader is a Store whose failed transaction can hand back the current
// values of keys in the same round trip, so a retry after a conflict needs
// no read of its own (etcd: the transaction's else branch).
type Rereader interface {
	// TxnOrRead is Txn; when a condition fails it also returns a fresh
	// snapshot of keys along with ErrConflict.
	TxnOrRead(ctx context.Context, conds []Cond, ops []Op, keys []string) (*Snapshot, error)
}

// Scoper is a Store whose writes can lose their answer (a network between
// the plugin and the store): each Update's writes go through a Scope that
// resolves every attempt before answering, so that a failure it reports is
// one that did not and will not land.
type Scoper interface {
	// Scope starts the writes of one Update bounded by ctx. It may start
	// work (e.g. granting a lease) that runs beside the Update's first read.
	Scope(ctx context.Context) Scope
}

// Scope is the writes of one Update.
type Scope interface {
	// Context bounds the Update's reads and attempts: it ends early enough
	// that the last attempt's outcome can still be resolved within the
	// Update's own context.
	Context() context.Context
	// Commit is one attempt: it applies ops if every cond holds. It returns
	// nil when the attempt landed; ErrConflict (with the current values of
	// keys when the store can) when a cond failed; an error wrapping
	// ErrNotApplied when its answer was lost and it was found not to have
	// landed; an error of class types.OutcomeUnknown when that could not
	// be found out in time; any other error only when it did not land.
	Commit(ctx context.Context, conds []Cond, ops []Op, keys []string) (*Snapshot, error)
	// Close releases what the scope holds.
	Close()
}

// committer is the Scope of one Update on s: the store's own when it has
// one, else its transactions as they are.
func committer(ctx context.Context, s Store) Scope {
	if sc, ok := s.(Scoper); ok {
		return sc.Scope(ctx)
	}
	return plainScope{ctx: ctx, s: s}
}

type plainScope struct {
	ctx context.Context
	s   Store
}

func (p plainScope) Context() context.Context { return p.ctx }

func (p plainScope) Commit(ctx context.Context, conds []Cond, ops []Op, keys []string) (*Snapshot, error) {
	if rr, ok := p.s.(Rereader); ok {
		return rr.TxnOrRead(ctx, conds, ops, keys)
	}
	return nil, p.s.Txn(ctx, conds, ops)
}

func (plainScope) Close() {}

// Errors of the store. Implementations wrap these so errors.Is works.
var (
	// ErrConflict means a transaction's condition failed: a key changed
	// since it was read.
	ErrConflict = errors.New("store: a key changed since it was read")
	// ErrReadOnly means a write was attempted on a store opened read-only.
	ErrReadOnly = errors.New("store: opened read-only")
	// ErrMissing means the embedded store's file does not exist and the
	// caller asked not to create it.
	ErrMissing = errors.New("store: state file does not exist")
	// ErrNotApplied means a transaction whose answer was lost was found
	// not to have landed, and never will: it may be tried again.
	ErrNotApplied = errors.New("store: the write did not land")
)

// Get reads one key.
func Get(ctx context.Context, s Store, key string) ([]byte, bool, error) {
	snap, err := s.Read(ctx, []string{key}, nil)
	if err != nil {
		return nil, false, err
	}
	v, ok := snap.Get(key)
	return v, ok, nil
}

// GetMany reads several keys in one snapshot.
func GetMany(ctx context.Context, s Store, keys ...string) (*Snapshot, error) {
	return s.Read(ctx, keys, nil)
}

// Range reads every key under prefix, ordered by key.
func Range(ctx context.Context, s Store, prefix string) ([]Item, error) {
	snap, err := s.Read(ctx, nil, []string{prefix})
	if err != nil {
		return nil, err
	}
	return snap.Under(prefix), nil
}

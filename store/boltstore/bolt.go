// Package boltstore implements store.Store on an embedded bbolt file, for a
// single host with no etcd. Several plugin processes may use one file at
// once: readers share the file lock, a writer takes it alone, and either
// waits at most a bounded time before failing with a "store busy" error.
//
// Each value is kept in an envelope with its mod revision and optional
// expiry; a global revision counter advances on every committed write, so
// transactions have the same compare-and-swap meaning as on etcd.
//
// Only an absent file is ever created. A file that is not a whole store of
// this project (empty, truncated, foreign, damaged) is a data_loss error
// naming it, never a panic: see Open.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// Options says how to open the file.
type Options struct {
	Prefix    string // put in front of every key, as on etcd
	ReadOnly  bool   // share the lock; a missing file reads as empty
	Create    bool   // create the file (and its folder) when missing
	MustExist bool   // with ReadOnly: a missing file is an error
	// EmptyIfMissing, for a writer that may not create the file: a
	// missing file reads as an empty store, and a write to it fails with
	// store.ErrMissing naming the file, so that a verb refused on an empty
	// store says why (no such node) and a verb that would write says the
	// store is missing.
	EmptyIfMissing bool
	LockTimeout    time.Duration // how long to wait for the file lock
	Now            func() time.Time
	// Waits bounds the lock waits that Opens which timed out leave
	// behind, for a process that opens the store call after call (the
	// serve daemon); nil leaves every wait to the kernel's queue, for a
	// process that exits after its call.
	Waits *Waits
}

var (
	bucketKV   = []byte("kv")
	bucketMeta = []byte("meta")
	keyRev     = []byte("revision")
)

// Store is a store.Store on a bbolt file.
type Store struct {
	db     *bolt.DB // nil when opened read-only on a file that does not exist
	lock   *os.File // the lock file, held while the store is open
	path   string
	prefix string
	ro     bool
	now    func() time.Time
}

// Close releases the file and its lock.
func (s *Store) Close() error {
	if s.db == nil {
		return nil
	}
	err := s.closeBolt(s.db)
	release(s.lock)
	return err
}

// envelope layout: 8 bytes mod revision, 8 bytes expiry (unix nanoseconds, 0
// for none), then the value.
const headerLen = 16

func encode(rev int64, expires time.Time, value []byte) []byte {
	out := make([]byte, headerLen+len(value))
	binary.BigEndian.PutUint64(out[0:8], uint64(rev))
	var exp int64
	if !expires.IsZero() {
		exp = expires.UnixNano()
	}
	binary.BigEndian.PutUint64(out[8:16], uint64(exp))
	copy(out[headerLen:], value)
	return out
}

// decode returns the envelope's parts; live is false for an expired key.
func (s *Store) decode(raw []byte, now time.Time) (rev int64, value []byte, live bool, err error) {
	if len(raw) < headerLen {
		return 0, nil, false, s.lost("damaged: a value of %d bytes, shorter than its %d-byte header", len(raw), headerLen)
	}
	rev = int64(binary.BigEndian.Uint64(raw[0:8]))
	exp := int64(binary.BigEndian.Uint64(raw[8:16]))
	if exp != 0 && now.UnixNano() >= exp {
		return rev, nil, false, nil
	}
	value = make([]byte, len(raw)-headerLen)
	copy(value, raw[headerLen:])
	return rev, value, true, nil
}

// Read implements store.Store in one read transaction.
func (s *Store) Read(ctx context.Context, keys []string, prefixes []string) (*store.Snapshot, error) {
	snap := &store.Snapshot{Items: make(map[string]store.Item, len(keys))}
	if s.db == nil {
		return snap, nil
	}
	now := s.now()
	err := s.guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			snap.Revision = revision(tx.Bucket(bucketMeta))
			kv := tx.Bucket(bucketKV)
			if kv == nil {
				return nil
			}
			add := func(k, raw []byte) error {
				rev, value, live, err := s.decode(raw, now)
				if err != nil || !live {
					return err
				}
				key := string(k[len(s.prefix):])
				snap.Items[key] = store.Item{Key: key, Value: value, ModRevision: rev}
				return nil
			}
			for _, k := range keys {
				full := []byte(s.prefix + k)
				if raw := kv.Get(full); raw != nil {
					if err := add(full, raw); err != nil {
						return err
					}
				}
			}
			for _, p := range prefixes {
				full := []byte(s.prefix + p)
				c := kv.Cursor()
				for k, raw := c.Seek(full); k != nil && hasPrefix(k, full); k, raw = c.Next() {
					if err := add(k, raw); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, s.classify(err)
	}
	return snap, nil
}

func hasPrefix(k, p []byte) bool {
	return len(k) >= len(p) && string(k[:len(p)]) == string(p)
}

// Txn implements store.Store in one update transaction: conditions are
// checked and writes applied under bbolt's single writer.
func (s *Store) Txn(ctx context.Context, conds []store.Cond, ops []store.Op) error {
	if s.db == nil && !s.ro {
		return s.missing()
	}
	if s.ro || s.db == nil {
		return types.Wrap(types.Internal, store.ErrReadOnly, "embedded store "+s.path)
	}
	now := s.now()
	var (
		next       int64 // the revision the write takes
		committing bool  // the transaction was handed to Commit
	)
	err := s.guard(func() error {
		tx, err := s.db.Begin(true)
		if err != nil {
			return err
		}
		// Rolled back on an error or a panic in apply or inside Commit
		// (which guard turns into data_loss), as bbolt's Update would: an
		// open write transaction would hold the store's writer lock for
		// good. Commit ends the transaction whenever it returns, so one
		// still open here is one a panic left.
		defer func() {
			if tx.DB() != nil {
				_ = tx.Rollback()
			}
		}()
		if next, err = s.apply(tx, conds, ops, now); err != nil {
			return err
		}
		committing = true
		return tx.Commit()
	})
	if errors.Is(err, store.ErrConflict) {
		return err
	}
	if err != nil && committing && s.visible(next) {
		// bbolt writes the page that makes a commit visible, then syncs
		// it: a failed sync leaves the write visible now but maybe not
		// after a crash. Such a write is neither landed nor not.
		return types.Wrap(types.OutcomeUnknown, err, s.where()+": the write is in the file but could not be synced to disk; read the node before retrying")
	}
	if err != nil {
		return s.classify(err)
	}
	return nil
}

// apply checks conds and writes ops in the update transaction tx at time
// now, and answers the revision the write takes.
func (s *Store) apply(tx *bolt.Tx, conds []store.Cond, ops []store.Op, now time.Time) (int64, error) {
	kv, err := tx.CreateBucketIfNotExists(bucketKV)
	if err != nil {
		return 0, err
	}
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return 0, err
	}
	for _, c := range conds {
		var rev int64
		if raw := kv.Get([]byte(s.prefix + c.Key)); raw != nil {
			r, _, live, err := s.decode(raw, now)
			if err != nil {
				return 0, err
			}
			if live {
				rev = r
			}
		}
		if rev != c.ModRevision {
			return 0, store.ErrConflict
		}
	}
	next := revision(meta) + 1
	for _, op := range ops {
		key := []byte(s.prefix + op.Key)
		if op.Delete {
			if err := kv.Delete(key); err != nil {
				return 0, err
			}
			continue
		}
		var expires time.Time
		if op.TTL > 0 {
			expires = now.Add(op.TTL)
		}
		if err := kv.Put(key, encode(next, expires, op.Value)); err != nil {
			return 0, err
		}
	}
	if err := sweep(kv, meta, now); err != nil {
		return 0, err
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(next))
	return next, meta.Put(keyRev, buf[:])
}

// keySweep is where the next sweep of expired keys starts.
var keySweep = []byte("sweep")

// sweepEach is how many keys each write looks at for expired ones.
const sweepEach = 64

// sweep deletes the expired keys among the next sweepEach keys of kv from
// where the last write's sweep stopped, wrapping around, so that keys put
// with a time to live leave the file some writes after they expire, at a
// bounded cost per write. An expired key reads as absent either way: its
// deletion changes nothing visible and takes no revision.
func sweep(kv, meta *bolt.Bucket, now time.Time) error {
	c := kv.Cursor()
	k, raw := c.First()
	if from := meta.Get(keySweep); from != nil {
		k, raw = c.Seek(from)
	}
	var expired [][]byte
	for range sweepEach {
		if k == nil {
			break
		}
		if len(raw) >= headerLen {
			if exp := int64(binary.BigEndian.Uint64(raw[8:16])); exp != 0 && now.UnixNano() >= exp {
				expired = append(expired, bytes.Clone(k))
			}
		}
		k, raw = c.Next()
	}
	var resume []byte
	if k != nil {
		resume = bytes.Clone(k)
	}
	for _, k := range expired {
		if err := kv.Delete(k); err != nil {
			return err
		}
	}
	if resume == nil {
		return meta.Delete(keySweep)
	}
	return meta.Put(keySweep, resume)
}

// visible reports whether the store's revision is rev: after a commit that
// failed, whether its write is what the file now shows.
func (s *Store) visible(rev int64) bool {
	var now int64
	err := s.guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			if meta := tx.Bucket(bucketMeta); meta != nil {
				now = revision(meta)
			}
			return nil
		})
	})
	return err == nil && now == rev
}

// classify gives an error of a transaction its class: those of this
// package keep theirs, the file system's are classed by failure.
func (s *Store) classify(err error) error {
	var typed *types.Error
	if errors.As(err, &typed) {
		return err
	}
	return s.failure(err)
}

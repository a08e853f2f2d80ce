package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// Open opens the file at path. A read-only open of a missing file succeeds
// and reads as an empty store; a writable open of a missing file creates it
// only when opts.Create is set, else it fails with store.ErrMissing.
//
// Only an absent file is ever created. A file that exists but is not a
// whole store of this project — empty, truncated, of another program — is a
// data_loss error naming it, whatever the mode: it is never initialised over
// and never makes the process panic. A file the user may not open is
// permission_denied. Readers need no write access anywhere.
func Open(path string, opts Options) (*Store, error) {
	s := &Store{path: path, prefix: opts.Prefix, ro: opts.ReadOnly, now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		switch {
		case opts.ReadOnly && !opts.MustExist, !opts.ReadOnly && !opts.Create && opts.EmptyIfMissing:
			return s, nil
		case opts.ReadOnly, !opts.Create:
			return nil, s.missing()
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, s.failure(err)
		}
	case err != nil:
		return nil, s.failure(err)
	case !info.Mode().IsRegular():
		return nil, s.lost("is not a regular file (%s)", info.Mode().Type())
	}
	lock, err := acquireQueued(path, !opts.ReadOnly, timeout, opts.Waits)
	if err != nil {
		if errors.Is(err, errLockTimeout) {
			return nil, s.busy(timeout)
		}
		return nil, s.failure(err)
	}
	// Under the lock, no writer of this project is creating or changing
	// the file: what it holds now is what it is.
	creating := false
	switch info, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
		if opts.ReadOnly || !opts.Create {
			release(lock)
			return nil, s.missing()
		}
		creating = true
	case err != nil:
		release(lock)
		return nil, s.failure(err)
	case info.Size() == 0:
		release(lock)
		return nil, s.lost("is empty (0 bytes), not a store: restore it from a backup, or remove it to start from an empty store")
	}
	db, err := s.openChecked(opts.ReadOnly, creating, timeout)
	if err != nil {
		if creating {
			// The file did not exist and nothing was stored in it: a
			// create that failed half-way (a full disk) must not leave an
			// empty or partial file that every later call reports as
			// damaged. Under the lock no other writer is creating it.
			if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = fmt.Errorf("%w (and the partial file could not be removed: %v)", err, rerr)
			}
		}
		release(lock)
		return nil, err
	}
	s.db, s.lock = db, lock
	return s, nil
}

// openChecked opens the bbolt file for reading or writing. A file that
// exists is first opened read-only and validated, so that a damaged one is
// refused before bbolt's writable open reads its free list (a panic there
// would leave the file mapped, and its lock held, for the rest of the
// process); a file just created gets its buckets and marks.
func (s *Store) openChecked(readOnly, creating bool, timeout time.Duration) (*bolt.DB, error) {
	if !creating {
		db, err := s.openBolt(true, timeout)
		if err != nil {
			return nil, err
		}
		if err := s.validate(db); err != nil {
			_ = s.closeBolt(db)
			return nil, err
		}
		if readOnly {
			return db, nil
		}
		if err := s.closeBolt(db); err != nil {
			return nil, err
		}
	}
	db, err := s.openBolt(false, timeout)
	if err != nil {
		return nil, err
	}
	if creating {
		if err := s.initialise(db); err != nil {
			_ = s.closeBolt(db)
			return nil, err
		}
	}
	return db, nil
}

// openBolt opens the bbolt file. bbolt panics, or faults on its memory map,
// on some damaged files; either becomes a data_loss error, and the file it
// had opened is closed so that its lock does not outlive the call.
func (s *Store) openBolt(readOnly bool, timeout time.Duration) (db *bolt.DB, err error) {
	var file *os.File
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				_ = file.Close()
			}
			db, err = nil, s.damaged(r)
		}
	}()
	db, err = bolt.Open(s.path, 0o644, &bolt.Options{
		Timeout:  timeout,
		ReadOnly: readOnly,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
	if err == nil {
		return db, nil
	}
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, s.busy(timeout)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch),
		errors.Is(err, bolterrors.ErrChecksum), strings.Contains(err.Error(), "file size too small"):
		return nil, s.lost("not a store of this project, or damaged: %v", err)
	}
	return nil, s.failure(err)
}

// closeBolt closes db, whatever state a damaged file left it in.
func (s *Store) closeBolt(db *bolt.DB) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = s.damaged(r)
		}
	}()
	return db.Close()
}

// Marks of the file format: the buckets a store holds, and a format key
// written when the file is created.
var (
	keyFormat = []byte("format")
	format    = []byte("eru-resources/1")
)

// initialise gives a file just created its buckets and format mark, in
// the same hold of the lock that created it.
func (s *Store) initialise(db *bolt.DB) error {
	return s.guard(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			if _, err := tx.CreateBucketIfNotExists(bucketKV); err != nil {
				return err
			}
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return meta.Put(keyFormat, format)
		})
	})
}

// validate checks, at the cost of reading the meta pages and the root
// bucket, that the file is a whole store of this project: its pages all lie
// within the file (a truncated file is caught here, before bbolt reads past
// its end), it holds no bucket of another program, and its marks are ours.
func (s *Store) validate(db *bolt.DB) error {
	return s.guard(func() error {
		info, err := os.Stat(s.path)
		if err != nil {
			return s.failure(err)
		}
		return db.View(func(tx *bolt.Tx) error {
			if need := tx.Size(); need > info.Size() {
				return s.lost("truncated: its pages reach %d bytes, the file holds %d", need, info.Size())
			}
			if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				if string(name) != string(bucketKV) && string(name) != string(bucketMeta) {
					return s.lost("holds a bucket %q: not a store of this project", name)
				}
				return nil
			}); err != nil {
				return err
			}
			meta := tx.Bucket(bucketMeta)
			if meta == nil {
				return nil
			}
			if v := meta.Get(keyRev); v != nil && len(v) != 8 {
				return s.lost("its revision counter holds %d bytes, not 8", len(v))
			}
			if v := meta.Get(keyFormat); v != nil && string(v) != string(format) {
				return s.lost("its format is %q, not %q", v, format)
			}
			return nil
		})
	})
}

// guard runs fn, turning a panic or a memory fault inside bbolt into a
// data_loss error: a damaged file must fail the call in one line, never
// crash the process.
func (s *Store) guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = s.damaged(r)
		}
	}()
	return fn()
}

// Errors naming the file.

func (s *Store) where() string { return "embedded store " + s.path }

func (s *Store) missing() error {
	return types.Wrap(types.FailedPrecondition, store.ErrMissing, s.where()+" (run from the folder of the plugins' config, or name it with --config)")
}

func (s *Store) busy(timeout time.Duration) error {
	return types.Errorf(types.Unavailable, "%s: store busy: another process held its lock for %s", s.where(), timeout)
}

func (s *Store) lost(format string, args ...any) error {
	return types.Wrap(types.DataLoss, fmt.Errorf(format, args...), s.where())
}

func (s *Store) damaged(r any) error {
	return s.lost("damaged: %s", strings.Join(strings.Fields(fmt.Sprint(r)), " "))
}

// failure classes an error of the file system: permission denied is the
// operator's to fix; anything else may pass (a full disk, an I/O error).
func (s *Store) failure(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return types.Wrap(types.PermissionDenied, err, s.where())
	}
	return types.Wrap(types.Unavailable, err, s.where())
}

// revision reads the revision counter of meta (0 when none).
func revision(meta *bolt.Bucket) int64 {
	if meta == nil {
		return 0
	}
	if v := meta.Get(keyRev); len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

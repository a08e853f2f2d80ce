package boltstore

import (
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bbolt takes its own file lock by polling every 50ms, which lets a waiter
// lose the race to others again and again while many plugin processes write
// one node. A blocking lock on a companion file queues the processes in the
// kernel instead, so each gets its turn as soon as the previous one is done;
// bbolt's own lock is then free by the time it asks.

var errLockTimeout = errors.New("lock wait timed out")

// Waits bounds the blocking lock waits a process leaves behind (it counts
// those under way too, for any of them may be left behind). A
// blocking flock(2) cannot be called off: a wait that times out leaves its
// goroutine (and an OS thread) blocked with the file open until the lock
// comes free. A plugin process exits after the error; a long-running one
// (the serve daemon opens the store per call) would pile them up while a
// holder is stuck, up to the fd limit or Go's thread limit. Past the
// bound, an Open polls the lock instead, and closes its file when it gives
// up. One Waits is shared by every Open of the process.
type Waits struct {
	most      int32
	abandoned atomic.Int32
}

// NewWaits bounds the waits left behind at most.
func NewWaits(most int) *Waits { return &Waits{most: int32(most)} }

// reserve takes a place for a blocking wait, false when none is left: a
// wait may be left behind once it has begun, so its place is taken before
// (Opens that begin together must not all find the bound unreached).
func (w *Waits) reserve() bool {
	if w == nil {
		return true
	}
	for {
		n := w.abandoned.Load()
		if n >= w.most {
			return false
		}
		if w.abandoned.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// done gives back the place of a wait that ended.
func (w *Waits) done() {
	if w != nil {
		w.abandoned.Add(-1)
	}
}

const pollEvery = 5 * time.Millisecond

// acquire takes a shared or exclusive lock on path, waiting at most
// timeout. A writer opens (or creates) the lock file for writing; a reader
// opens it read-only, for flock needs no write access, and goes on without
// it when the file is not there and cannot be made or cannot be read by this
// user: bbolt's own shared lock on the store keeps the reader safe, the
// companion lock only keeps the queue fair. The file is nil then.
func acquire(path string, exclusive bool, timeout time.Duration, waits *Waits) (*os.File, error) {
	var (
		f   *os.File
		err error
	)
	if exclusive {
		f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	} else {
		f, err = os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if unix.Flock(int(f.Fd()), how|unix.LOCK_NB) == nil {
		return f, nil
	}
	if !waits.reserve() {
		return poll(f, how, timeout)
	}
	done := make(chan error) // unbuffered: a send succeeds only while the caller waits
	abandoned := make(chan struct{})
	go func() {
		err := unix.Flock(int(f.Fd()), how)
		select {
		case done <- err:
		case <-abandoned:
			// The caller gave up; whatever the lock call did, undo it.
			release(f)
			waits.done()
		}
	}()
	select {
	case err := <-done:
		waits.done()
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		return f, nil
	case <-time.After(timeout):
		close(abandoned) // its place is given back when the wait ends
		return nil, errLockTimeout
	}
}

// poll tries the lock on f every pollEvery until timeout.
func poll(f *os.File, how int, timeout time.Duration) (*os.File, error) {
	deadline := time.Now().Add(timeout)
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, err
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, errLockTimeout
		}
		time.Sleep(pollEvery)
	}
}

// acquireQueued takes the store's lock (path+".lock") through a gate
// (path+".gate"): flock(2) grants a shared lock while a writer waits for
// the exclusive one, so readers whose holds overlap would keep a writer out
// for good. A writer holds the gate exclusively while it waits for the
// lock, so readers arriving meanwhile wait behind it; everyone lets the gate
// go once the lock is theirs, and only ever waits for the lock while holding
// the gate, never the reverse.
func acquireQueued(path string, exclusive bool, timeout time.Duration, waits *Waits) (*os.File, error) {
	deadline := time.Now().Add(timeout)
	gate, err := acquire(path+".gate", exclusive, timeout, waits)
	if err != nil {
		return nil, err
	}
	defer release(gate)
	return acquire(path+".lock", exclusive, time.Until(deadline), waits)
}

// release drops the lock and closes the file.
func release(f *os.File) {
	if f == nil {
		return
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	_ = f.Close()
}

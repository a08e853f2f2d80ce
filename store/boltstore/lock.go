package boltstore

import (
	"errors"
	"io/fs"
	"os"
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

// acquire takes a shared or exclusive lock on path, waiting at most
// timeout. A writer opens (or creates) the lock file for writing; a reader
// opens it read-only, for flock needs no write access, and goes on without
// it when the file is not there and cannot be made or cannot be read by this
// user: bbolt's own shared lock on the store keeps the reader safe, the
// companion lock only keeps the queue fair. The file is nil then.
func acquire(path string, exclusive bool, timeout time.Duration) (*os.File, error) {
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
	done := make(chan error) // unbuffered: a send succeeds only while the caller waits
	abandoned := make(chan struct{})
	go func() {
		err := unix.Flock(int(f.Fd()), how)
		select {
		case done <- err:
		case <-abandoned:
			// The caller gave up; whatever the lock call did, undo it.
			release(f)
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		return f, nil
	case <-time.After(timeout):
		close(abandoned)
		return nil, errLockTimeout
	}
}

// release drops the lock and closes the file.
func release(f *os.File) {
	if f == nil {
		return
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	_ = f.Close()
}

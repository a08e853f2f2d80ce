package boltstore_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

// openFilesOf counts this process's descriptors open on path.
func openFilesOf(t *testing.T, path string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestTimedOutLockWaitsDoNotPileUp: the serve daemon opens the embedded
// store for each call. While another process holds the lock past the lock
// timeout, every call answers "store busy" — and must not leave behind a
// descriptor and an OS thread blocked in flock(2) for each call until the
// holder lets go: at a few hundred calls a second a stuck holder would
// run the daemon out of descriptors or into Go's 10,000-thread limit (a
// fatal error), and once the holder lets go, each abandoned waiter takes
// its turn at the lock ahead of the live callers.
func TestTimedOutLockWaitsDoNotPileUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	holder, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err)
	lock := path + ".lock"
	before := openFilesOf(t, lock)
	waits := boltstore.NewWaits(2) // the daemon's: one for the process
	for range 20 {
		_, err := boltstore.Open(path, boltstore.Options{LockTimeout: 10 * time.Millisecond, Waits: waits})
		require.Equal(t, types.Unavailable, types.ClassOf(err), "%v", err)
		_, err = boltstore.Open(path, boltstore.Options{ReadOnly: true, LockTimeout: 10 * time.Millisecond, Waits: waits})
		require.Equal(t, types.Unavailable, types.ClassOf(err), "%v", err)
	}
	require.LessOrEqual(t, openFilesOf(t, lock)-before, 2, "40 timed-out waits left more lock files open than the bound, each with a thread blocked in flock")

	// Past the bound an Open polls: it gets the lock once the holder lets
	// go, and the waits left behind let go of theirs.
	got := make(chan error, 1)
	go func() {
		s, err := boltstore.Open(path, boltstore.Options{LockTimeout: 5 * time.Second, Waits: waits})
		if err == nil {
			err = s.Close()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, holder.Close())
	require.NoError(t, <-got)
	require.Eventually(t, func() bool { return openFilesOf(t, lock) == 0 }, 5*time.Second, 5*time.Millisecond)
}

// TestConcurrentTimedOutLockWaitsStayWithinTheBound: the daemon opens the
// store for many calls at once. Calls that start waiting together while a
// holder is stuck must not each leave a blocked wait behind because none
// of them had timed out yet when the others looked at the bound.
func TestConcurrentTimedOutLockWaitsStayWithinTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	holder, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err)
	lock := path + ".lock"
	waits := boltstore.NewWaits(2)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			_, err := boltstore.Open(path, boltstore.Options{ReadOnly: true, LockTimeout: 100 * time.Millisecond, Waits: waits})
			assert.Equal(t, types.Unavailable, types.ClassOf(err), "%v", err)
		})
	}
	wg.Wait()
	require.LessOrEqual(t, openFilesOf(t, lock)-1, 2, "16 waits that timed out together left more lock files open than the bound, each with a thread blocked in flock")
	require.NoError(t, holder.Close())
	require.Eventually(t, func() bool { return openFilesOf(t, lock) == 0 }, 5*time.Second, 5*time.Millisecond)
}

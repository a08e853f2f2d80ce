package boltstore_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
)

// TestAWriterIsNotStarvedByOverlappingReaders: readers that keep the
// shared lock held between them (each for a moment, but overlapping) must
// not keep a writer out past its lock wait: flock(2) grants a new shared
// lock while a writer waits for the exclusive one.
func TestAWriterIsNotStarvedByOverlappingReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	w, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err)
	require.NoError(t, w.Txn(context.Background(), nil, []store.Op{{Key: "/k", Value: []byte("v")}}))
	require.NoError(t, w.Close())

	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				r, err := boltstore.Open(path, boltstore.Options{ReadOnly: true, LockTimeout: 5 * time.Second})
				if err != nil {
					continue
				}
				_, _ = r.Read(context.Background(), []string{"/k"}, nil)
				time.Sleep(2 * time.Millisecond) // a plugin's work while it holds the store
				_ = r.Close()
				reads.Add(1)
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	time.Sleep(50 * time.Millisecond)
	ok := 0
	for range 5 {
		s, err := boltstore.Open(path, boltstore.Options{LockTimeout: time.Second})
		if err == nil {
			ok++
			require.NoError(t, s.Close())
		} else {
			t.Logf("writer: %v", err)
		}
	}
	t.Logf("reads meanwhile: %d", reads.Load())
	require.Equal(t, 5, ok, "every writer got the lock within its wait")
}

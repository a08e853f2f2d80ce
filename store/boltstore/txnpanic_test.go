package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

// TestAWriteThatMeetsADamagedPageEndsItsTransaction: a store damaged after
// it was opened (as a long-running daemon holds it) makes bbolt panic
// inside a write; the write is data_loss, and its transaction is rolled
// back, so the next write in the process answers too instead of waiting
// for bbolt's writer lock for good.
func TestAWriteThatMeetsADamagedPageEndsItsTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 50 {
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: fmt.Sprintf("/k%02d", i), Value: make([]byte, 500)}}))
	}
	// Every page past the two meta pages, the free list and the root is
	// overwritten.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	info, err := f.Stat()
	require.NoError(t, err)
	junk := make([]byte, info.Size()-4*4096)
	for i := range junk {
		junk[i] = 0xff
	}
	_, err = f.WriteAt(junk, 4*4096)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	for i := range 2 {
		done := make(chan error, 1)
		go func() { done <- s.Txn(ctx, nil, []store.Op{{Key: "/x", Value: []byte("y")}}) }()
		select {
		case err := <-done:
			require.Equal(t, types.DataLoss, types.ClassOf(err), "write %d: %v", i+1, err)
			require.ErrorContains(t, err, "damaged")
		case <-time.After(10 * time.Second):
			// The store cannot be closed either: it is left open.
			t.Fatalf("write %d is still waiting: an earlier write left its transaction open", i+1)
		}
	}
	require.NoError(t, s.Close())
}

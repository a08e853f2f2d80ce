package boltstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

// TestAWriteWhoseCommitMeetsADamagedPageEndsItsTransaction: a damaged page
// that only bbolt's commit reads (a sibling leaf it merges an underfilled
// leaf with) makes it panic inside tx.Commit. The write is data_loss, and
// its transaction must be ended as one that panics before Commit is: else
// the next write of the process, and Close, wait on bbolt's writer lock for
// good (in the serve daemon: the call hangs and keeps the file lock, so
// every plugin process gets "store busy" until the daemon is restarted).
func TestAWriteWhoseCommitMeetsADamagedPageEndsItsTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err)
	ctx := context.Background()
	key := func(i int) string { return fmt.Sprintf("/k%03d", i) }
	for i := range 60 {
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: key(i), Value: make([]byte, 500)}}))
	}
	// Keys after them, written in one write: each write's sweep of expired
	// keys walks on from where the last one stopped, which is now among
	// these, so that the write below reads the damaged page only in Commit
	// (a sweep that read it would panic in apply, before Commit).
	var after []store.Op
	for i := range 200 {
		after = append(after, store.Op{Key: fmt.Sprintf("/z%03d", i), Value: []byte("v")})
	}
	require.NoError(t, s.Txn(ctx, nil, after))
	require.NoError(t, s.Close())

	// Find the kv bucket's first leaf (the keys from /k000) and the leaf
	// after it.
	db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	require.NoError(t, err)
	pageSize := db.Info().PageSize
	leaves := map[int]bool{} // live leaf pages (freed ones hold stale copies)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		for id := 0; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			if info.Type == "leaf" {
				leaves[id] = true
			}
		}
	}))
	require.NoError(t, db.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	leafOf := map[int]int{} // key index -> page id
	for id := 0; (id+1)*pageSize <= len(data); id++ {
		if !leaves[id] {
			continue
		}
		page := data[id*pageSize : (id+1)*pageSize]
		for i := range 60 {
			if bytes.Contains(page, []byte(key(i))) {
				leafOf[i] = id
			}
		}
	}
	first := leafOf[0]
	var inFirst []int
	next := -1
	for i := range 60 {
		if leafOf[i] == first {
			inFirst = append(inFirst, i)
		} else if next < 0 {
			next = leafOf[i]
		}
	}
	require.Greater(t, len(inFirst), 1)
	require.GreaterOrEqual(t, next, 0)
	sort.Ints(inFirst)
	// The sibling leaf is overwritten with garbage.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0xff}, pageSize), int64(next*pageSize))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	s, err = boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err, "the damage is not in what Open checks")
	// Deleting all but one key of the first leaf leaves it underfilled:
	// Commit merges it with its sibling, which it reads.
	var ops []store.Op
	for _, i := range inFirst[1:] {
		ops = append(ops, store.Op{Key: key(i), Delete: true})
	}
	err = s.Txn(ctx, nil, ops)
	t.Logf("first write: %v", err)
	require.Equal(t, types.DataLoss, types.ClassOf(err), "%v", err)

	done := make(chan error, 1)
	go func() {
		err := s.Txn(ctx, nil, []store.Op{{Key: "/x", Value: []byte("y")}})
		if err == nil || types.ClassOf(err) == types.DataLoss {
			err = s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the next write (or Close) is still waiting: the write whose Commit panicked left its transaction open")
	}
}

package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
)

// TestExpiredKeysLeaveTheFile: a key put with a time to live (an operator
// command's answer under /commands/<id>, "kept 24 hours"; a node's session)
// reads as absent once it expires, and must not stay in the file for ever:
// every --command-id run adds one, and every read of a prefix and every
// scrape of the whole store walks them.
func TestExpiredKeysLeaveTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	now := time.Now()
	clock := func() time.Time { return now }
	s, err := boltstore.Open(path, boltstore.Options{Create: true, Now: clock})
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 100 {
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: fmt.Sprintf("/commands/c%03d", i), Value: make([]byte, 1000), TTL: 24 * time.Hour}}))
	}
	now = now.Add(25 * time.Hour)
	for i := range 100 {
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: fmt.Sprintf("/resource/storage/n%03d", i), Value: []byte("{}")}}))
	}
	snap, err := s.Read(ctx, nil, []string{"/commands/"})
	require.NoError(t, err)
	require.Empty(t, snap.Items, "they read as absent")
	require.NoError(t, s.Close())

	db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	left := 0
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("kv")).ForEach(func(k, _ []byte) error {
			if len(k) > 10 && string(k[:10]) == "/commands/" {
				left++
			}
			return nil
		})
	}))
	require.Zero(t, left, "expired keys still in the file a day after they expired, 100 writes later")
}

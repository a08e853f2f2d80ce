package boltstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

func TestContract(t *testing.T) {
	dir := t.TempDir()
	storetest.Run(t, func(t *testing.T, name string) store.Store {
		return &perCall{path: filepath.Join(dir, name+".db")}
	}, 3*time.Second)
}

// perCall opens the file for each call, as plugin processes do (bbolt holds
// its file lock while open), so that several "processes" can share it.
type perCall struct{ path string }

func (p *perCall) open(ro bool) (*boltstore.Store, error) {
	return boltstore.Open(p.path, boltstore.Options{Prefix: "/eru", Create: !ro, ReadOnly: ro, LockTimeout: 5 * time.Second})
}

func (p *perCall) Read(ctx context.Context, keys, prefixes []string) (*store.Snapshot, error) {
	s, err := p.open(true)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Read(ctx, keys, prefixes)
}

func (p *perCall) Txn(ctx context.Context, conds []store.Cond, ops []store.Op) error {
	s, err := p.open(false)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Txn(ctx, conds, ops)
}

func (p *perCall) Close() error { return nil }

func TestMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.db")
	t.Run("a reader of a missing file sees an empty store and creates nothing", func(t *testing.T) {
		s, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
		require.NoError(t, err)
		snap, err := s.Read(context.Background(), []string{"/a"}, []string{"/"})
		require.NoError(t, err)
		require.Empty(t, snap.Items)
		require.NoError(t, s.Close())
		_, err = os.Stat(path)
		require.True(t, os.IsNotExist(err))
	})
	t.Run("a writer that must not create the file fails naming it", func(t *testing.T) {
		_, err := boltstore.Open(path, boltstore.Options{})
		require.ErrorIs(t, err, store.ErrMissing)
		require.Contains(t, err.Error(), path)
		_, err = boltstore.Open(path, boltstore.Options{ReadOnly: true, MustExist: true})
		require.ErrorIs(t, err, store.ErrMissing)
	})
	t.Run("a writer that may create it creates the folder and the file", func(t *testing.T) {
		s, err := boltstore.Open(path, boltstore.Options{Create: true})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.FileExists(t, path)
	})
}

func TestAWriterHeldPastTheLockWaitGetsStoreBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	holder, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err)
	defer holder.Close()
	start := time.Now()
	_, err = boltstore.Open(path, boltstore.Options{Create: true, LockTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	require.Equal(t, types.Unavailable, types.ClassOf(err))
	require.Contains(t, err.Error(), "store busy")
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "it waited (bbolt polls the lock every 50ms)")
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestReadersShareTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	w, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err)
	require.NoError(t, w.Txn(context.Background(), nil, []store.Op{{Key: "/k", Value: []byte("v")}}))
	require.NoError(t, w.Close())
	var readers []*boltstore.Store
	for range 5 {
		r, err := boltstore.Open(path, boltstore.Options{ReadOnly: true, LockTimeout: 200 * time.Millisecond})
		require.NoError(t, err, "readers do not block each other")
		readers = append(readers, r)
	}
	for _, r := range readers {
		v, ok, err := store.Get(context.Background(), r, "/k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "v", string(v))
		require.NoError(t, r.Close())
	}
}

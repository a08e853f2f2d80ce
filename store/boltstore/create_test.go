package boltstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

// TestACreateThatFailsLeavesNoFile: a store whose creation fails half-way
// (here the file size limit stops bbolt's first pages, as a full disk
// would) leaves no file behind, so the next call creates it afresh
// instead of finding an empty file it must call damaged. Not parallel: the
// limit holds for the whole process while it is set.
func TestACreateThatFailsLeavesNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "store.db")
	var was unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_FSIZE, &was))
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 1024, Max: was.Max}))
	_, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &was))
	require.Error(t, err, "bbolt's first pages are larger than the limit")
	require.Equal(t, types.Unavailable, types.ClassOf(err), "%v", err)
	_, statErr := os.Stat(path)
	require.True(t, os.IsNotExist(statErr), "the partial file is gone: %v", statErr)

	s, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err, "the next call creates the store")
	require.NoError(t, s.Close())
}

// TestACommitTheFileCannotTakeIsReportedNotWritten: a write whose commit
// fails before it is visible (the file cannot grow: the size limit here,
// a full disk in life) is reported unavailable, the store shows nothing of
// it, and the next write lands. (A commit whose sync fails after the page
// that makes it visible was written is outcome_unknown; no test here can
// make a sync fail.) Not parallel: the limit holds for the whole process.
func TestACommitTheFileCannotTakeIsReportedNotWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, boltstore.Options{Create: true})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/small", Value: []byte("1")}}))
	info, err := os.Stat(path)
	require.NoError(t, err)

	var was unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_FSIZE, &was))
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: uint64(info.Size()), Max: was.Max}))
	err = s.Txn(ctx, nil, []store.Op{{Key: "/big", Value: make([]byte, 4<<20)}})
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &was))
	require.Error(t, err, "the file cannot grow to take 4 MiB")
	require.Equal(t, types.Unavailable, types.ClassOf(err), "%v", err)

	snap, err := s.Read(ctx, []string{"/small", "/big"}, nil)
	require.NoError(t, err)
	_, big := snap.Get("/big")
	require.False(t, big, "nothing of the failed write shows")
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/big", Value: make([]byte, 4<<20)}}), "the next write lands")
}

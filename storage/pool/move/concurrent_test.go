package move

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/storage/pool"
)

// TestTwoCopiesOfOneObjectAtOnce: a second run of one move (the same
// command on another host reaching the same pools, or started again in
// another terminal) resumes it as its own (StartMove answers Done), so two
// copiers fill the one partial tree. Their scratch files share names
// (f1, f2, … counted per run from the files each copies), and the second
// opens the first's scratch file with O_TRUNC: the first then renames a
// file holding another file's bytes, with this file's size and mtime, and
// settles on it.
func TestTwoCopiesOfOneObjectAtOnce(t *testing.T) {
	from, to := pools(t)
	const chunk = 4 << 10
	src := filepath.Join(from, obj)
	require.NoError(t, os.Mkdir(src, 0o755))
	files := map[string][]byte{
		"a": bytes.Repeat([]byte{'a'}, chunk),
		"c": bytes.Repeat([]byte{'c'}, 2*chunk),
		"d": bytes.Repeat([]byte{'d'}, 2*chunk),
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), data, 0o644))
		require.NoError(t, os.Chtimes(filepath.Join(src, name), old, old))
	}

	// The second copier runs while the first has written c's first chunk,
	// and pauses once it wrote d's first chunk (or ends, refused).
	secondWrote := make(chan struct{})
	secondDone := make(chan error, 1)
	releaseSecond := make(chan struct{})
	second := func() {
		var once bool
		secondDone <- Copy(context.Background(), from, to, obj, Options{ChunkSize: chunk, Progress: func(p Progress) {
			if !once && p.Bytes == int64(chunk+2*chunk+chunk) { // a (skipped), c, d's first chunk
				once = true
				close(secondWrote)
				<-releaseSecond
			}
		}})
	}
	var started bool
	err := Copy(context.Background(), from, to, obj, Options{ChunkSize: chunk, Progress: func(p Progress) {
		if !started && p.Bytes == int64(chunk+chunk) { // a, c's first chunk
			started = true
			go second()
			select {
			case <-secondWrote:
			case err := <-secondDone:
				secondDone <- err
			case <-time.After(30 * time.Second):
				t.Error("the second copier neither wrote nor ended")
			}
		}
	}})
	close(releaseSecond)
	secondErr := <-secondDone
	if err == nil {
		for name, data := range files {
			got, rerr := os.ReadFile(filepath.Join(to, obj, name))
			require.NoError(t, rerr)
			require.True(t, bytes.Equal(data, got), "file %s of the finished copy holds %q…, not the source's bytes", name, got[:1])
		}
	}
	require.Error(t, secondErr, "only one copy of an object into a pool runs at a time")
	require.NoError(t, err)
	require.Equal(t, []string{obj}, entries(t, to))
}

// TestSparseFileStaysSparse: a sparse file (a VM image, a preallocated
// database file) is copied with its holes, not blown up to its apparent
// size in the target pool, which reserved only the object's capacity.
func TestSparseFileStaysSparse(t *testing.T) {
	from, to := pools(t)
	require.NoError(t, os.Mkdir(filepath.Join(from, obj), 0o755))
	path := filepath.Join(from, obj, "disk.img")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("head"), 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("middle"), 32<<20)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(64<<20))
	require.NoError(t, f.Close())
	require.NoError(t, os.Chtimes(path, old, old))
	allocated := func(p string) int64 {
		info, err := os.Stat(p)
		require.NoError(t, err)
		return info.Sys().(*syscall.Stat_t).Blocks * 512
	}
	if allocated(path) >= 1<<20 {
		t.Skip("the file system does not keep holes")
	}
	want := snapshot(t, filepath.Join(from, obj))
	var last Progress
	require.NoError(t, Copy(context.Background(), from, to, obj, Options{Progress: func(p Progress) { last = p }}))
	require.Equal(t, want, snapshot(t, filepath.Join(to, obj)))
	require.Equal(t, last.Total, last.Bytes)
	require.Less(t, allocated(filepath.Join(to, obj, "disk.img")), int64(1<<20),
		"a 64 MiB file holding 10 bytes takes its data's blocks in the target, not 64 MiB")
}

// TestCleanupOfAnAbortedMoveRemovesItsPartialCopy: an abort commits its
// transition (the target's cleanup entry) before it removes the files; a
// crash in between leaves the partial tree and the scratch files, and the
// abort run again finds nothing moving and removes nothing. The cleanup
// entry is then the only trace, and the cleanup removes <path>/<id> only:
// the partial copy (up to the object's size) stays in the pool for ever,
// reserved by nothing, and a later move of the object into this pool
// resumes on it.
func TestCleanupOfAnAbortedMoveRemovesItsPartialCopy(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	capacity := int64(1 << 40)
	from, to := pools(t)
	makeTree(t, from)
	records := map[string]*pool.Record{
		"ceph-a": {ID: "ceph-a", Capacity: &capacity, Reserved: 1 << 30, Objects: 1, DeclaredAt: now},
		"nfs1":   {ID: "nfs1", Capacity: &capacity, DeclaredAt: now},
	}
	r := pool.MoveRequest{Node: "n1", Reach: map[string]bool{"ceph-a": true, "nfs1": true}, Holder: "n1",
		Objects: pool.Objects{obj: {Pool: "ceph-a", Bytes: 1 << 30, Held: true}}, ID: obj, From: "ceph-a", To: "nfs1",
		CommandID: "m1", Pools: records}
	out, err := pool.StartMove(r)
	require.NoError(t, err)
	r.Objects = out.Objects
	maps(records, out.Pools)
	killMidway(t, from, to, 1<<20)
	out, err = pool.AbortMove(r, now)
	require.NoError(t, err)
	r.Objects = out.Objects
	maps(records, out.Pools)
	// The abort's process dies here, before move.Abort.
	out, err = pool.AbortMove(r, now)
	require.NoError(t, err)
	require.True(t, out.Done, "the abort run again has nothing to do")

	// storage pools cleanup nfs1: remove the entry's copy, drop the entry.
	require.Len(t, records["nfs1"].Cleanups, 1)
	require.NoError(t, Remove(to, obj))
	rec, dropped := pool.DropCleanup(records["nfs1"], obj)
	require.True(t, dropped)
	records["nfs1"] = rec
	require.Empty(t, entries(t, to), "the cleanup removes every copy the aborted move left, not <path>/<id> only")
}

func maps(dst, src map[string]*pool.Record) {
	for k, v := range src {
		dst[k] = v
	}
}

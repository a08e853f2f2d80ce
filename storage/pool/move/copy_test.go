package move

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	obj      = "v-00000000000000cc"
	childEnv = "POOLMOVE_TEST_CHILD"
)

// TestMain doubles as the child process of the kill test: with childEnv set
// it copies and, once stopAt bytes are done, writes a marker and waits to
// be killed.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	from, to, marker := os.Getenv("FROM"), os.Getenv("TO"), os.Getenv("MARKER")
	stopAt, _ := strconv.ParseInt(os.Getenv("STOP_AT"), 10, 64)
	err := Copy(context.Background(), from, to, obj, Options{ChunkSize: 64 << 10, Progress: func(p Progress) {
		if p.Bytes >= stopAt {
			_ = os.WriteFile(marker, []byte(strconv.FormatInt(p.Bytes, 10)), 0o600)
			time.Sleep(time.Hour)
		}
	}})
	if err != nil {
		return 1
	}
	return 0
}

var old = time.Date(2020, 1, 2, 3, 4, 5, 600, time.UTC)

// makeTree builds an object with files of several modes, a symlink, a
// read-only directory and a large file, with fixed modification times.
func makeTree(t *testing.T, root string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	base := filepath.Join(root, obj)
	require.NoError(t, os.MkdirAll(filepath.Join(base, "sub"), 0o750))
	require.NoError(t, os.MkdirAll(filepath.Join(base, "ro"), 0o755))
	files := []struct {
		rel  string
		data []byte
		mode fs.FileMode
	}{
		{"a.txt", []byte("hello pool\n"), 0o640},
		{"big.bin", random(3 << 20), 0o600},
		{"sub/b.bin", random(1 << 20), 0o644},
		{"sub/empty", nil, 0o755},
		{"ro/x", []byte("read only"), 0o444},
	}
	for _, f := range files {
		p := filepath.Join(base, f.rel)
		require.NoError(t, os.WriteFile(p, f.data, 0o600))
		require.NoError(t, os.Chmod(p, f.mode))
		require.NoError(t, os.Chtimes(p, old, old))
	}
	require.NoError(t, os.Symlink("sub/b.bin", filepath.Join(base, "link")))
	require.NoError(t, os.Chmod(filepath.Join(base, "sub"), 0o750))
	require.NoError(t, os.Chmod(filepath.Join(base, "ro"), 0o555))
	for _, d := range []string{"sub", "ro", ""} {
		require.NoError(t, os.Chtimes(filepath.Join(base, d), old, old))
	}
	t.Cleanup(func() { _ = removeAll(root) })
}

type node struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	sum   [32]byte
	link  string
}

// snapshot reads a tree: every entry's type and mode, size, content hash,
// symlink target and modification time (symlinks' own times are left out).
func snapshot(t *testing.T, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := os.Lstat(path)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, path)
		n := node{mode: info.Mode()}
		switch {
		case info.Mode().IsRegular():
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			n.size, n.sum, n.mtime = info.Size(), sha256.Sum256(data), info.ModTime()
		case info.IsDir():
			n.mtime = info.ModTime()
		default:
			n.link, err = os.Readlink(path)
			require.NoError(t, err)
		}
		out[rel] = n
		return nil
	}))
	return out
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}

func pools(t *testing.T) (string, string) {
	base := t.TempDir()
	from, to := filepath.Join(base, "ceph-a"), filepath.Join(base, "nfs1")
	require.NoError(t, os.Mkdir(from, 0o755))
	require.NoError(t, os.Mkdir(to, 0o755))
	return from, to
}

// killMidway runs the copy in a child process and SIGKILLs it once at
// least stopAt bytes were copied.
func killMidway(t *testing.T, from, to string, stopAt int64) int64 {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "marker")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "FROM="+from, "TO="+to, "MARKER="+marker, "STOP_AT="+strconv.FormatInt(stopAt, 10))
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(2 * time.Minute)
	var done []byte
	for {
		var err error
		if done, err = os.ReadFile(marker); err == nil && len(done) > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the child never reached %d bytes", stopAt)
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err := cmd.Wait()
	require.Error(t, err, "the child was killed, it did not finish")
	n, _ := strconv.ParseInt(string(done), 10, 64)
	return n
}

func TestCopy(t *testing.T) {
	t.Run("a tree with files, a symlink, modes and times is copied identical and the source is left alone", func(t *testing.T) {
		from, to := pools(t)
		makeTree(t, from)
		want := snapshot(t, filepath.Join(from, obj))
		var seen []Progress
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{Progress: func(p Progress) { seen = append(seen, p) }}))
		require.Equal(t, want, snapshot(t, filepath.Join(to, obj)))
		require.Equal(t, want, snapshot(t, filepath.Join(from, obj)), "the source is unchanged")
		require.Equal(t, []string{obj}, entries(t, to), "no partial or scratch is left")
		last := seen[len(seen)-1]
		require.Equal(t, last.Total, last.Bytes)
		require.Equal(t, int64(3<<20+1<<20+11+9), last.Total)
		require.Equal(t, Progress{Bytes: last.Total, Total: last.Total, Files: 5, FilesTotal: 5, Entries: 9}, last,
			"five regular files, three directories and a symlink, nothing found from an earlier run")
		for i := 1; i < len(seen); i++ {
			require.GreaterOrEqual(t, seen[i].Bytes, seen[i-1].Bytes, "progress never goes back")
		}
	})
	t.Run("a copy killed mid-way and run again continues and ends identical", func(t *testing.T) {
		from, to := pools(t)
		makeTree(t, from)
		want := snapshot(t, filepath.Join(from, obj))
		at := killMidway(t, from, to, 2<<20)
		require.GreaterOrEqual(t, at, int64(2<<20))
		require.Less(t, at, int64(4<<20+20), "killed before the end")
		require.NoDirExists(t, filepath.Join(to, obj), "a killed copy is never in place")
		require.DirExists(t, filepath.Join(to, "."+obj+".partial"))
		require.FileExists(t, filepath.Join(to, "."+obj+".partial", "a.txt"), "the file finished before the kill is kept")

		inode := func(path string) uint64 {
			info, err := os.Stat(path)
			require.NoError(t, err)
			return info.Sys().(*syscall.Stat_t).Ino
		}
		kept := inode(filepath.Join(to, "."+obj+".partial", "a.txt"))
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{}))
		require.Equal(t, want, snapshot(t, filepath.Join(to, obj)))
		require.Equal(t, kept, inode(filepath.Join(to, obj, "a.txt")), "the resume continued: the finished file was not written again")
		require.Equal(t, []string{obj}, entries(t, to))
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{}), "a finished copy answers at once")
	})
	t.Run("a resume skips complete files and recopies one of another size", func(t *testing.T) {
		from, to := pools(t)
		makeTree(t, from)
		partial := filepath.Join(to, "."+obj+".partial")
		require.NoError(t, os.MkdirAll(partial, 0o700))
		src, err := os.ReadFile(filepath.Join(from, obj, "a.txt"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(partial, "a.txt"), src, 0o640))
		require.NoError(t, os.Chtimes(filepath.Join(partial, "a.txt"), old, old))
		require.NoError(t, os.WriteFile(filepath.Join(partial, "big.bin"), []byte("truncated"), 0o600))
		require.NoError(t, os.Chtimes(filepath.Join(partial, "big.bin"), old, old))
		require.NoError(t, os.WriteFile(filepath.Join(partial, "stale"), []byte("not in the source"), 0o600))
		var last Progress
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{Progress: func(p Progress) { last = p }}))
		require.Equal(t, snapshot(t, filepath.Join(from, obj)), snapshot(t, filepath.Join(to, obj)))
		require.Equal(t, int64(3<<20+1<<20+11+9), last.Bytes)
		require.Equal(t, int64(11), last.Resumed, "only a.txt was complete; the truncated big.bin is copied again")
		require.Equal(t, 5, last.Files)
	})
	t.Run("abort removes the partial copy and the scratch files", func(t *testing.T) {
		from, to := pools(t)
		makeTree(t, from)
		killMidway(t, from, to, 1<<20)
		require.NotEmpty(t, entries(t, to))
		require.NoError(t, Abort(from, to, obj))
		require.Empty(t, entries(t, to))
		require.NoError(t, Abort(from, to, obj), "aborting twice is harmless")
	})
	t.Run("abort of a finished but unsettled copy removes it, read-only directories included", func(t *testing.T) {
		from, to := pools(t)
		makeTree(t, from)
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{}))
		require.NoError(t, Abort(from, to, obj))
		require.Empty(t, entries(t, to))
		require.DirExists(t, filepath.Join(from, obj))
	})
	t.Run("the source is removed only by the separate step taken after the settle", func(t *testing.T) {
		from, to := pools(t)
		makeTree(t, from)
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{}))
		require.DirExists(t, filepath.Join(from, obj))
		require.NoError(t, Remove(from, obj))
		require.Empty(t, entries(t, from))
		require.DirExists(t, filepath.Join(to, obj))
		require.NoError(t, Remove(from, obj), "removing again is harmless")
	})
	t.Run("an object that is one regular file is copied", func(t *testing.T) {
		from, to := pools(t)
		require.NoError(t, os.WriteFile(filepath.Join(from, obj), []byte("block image"), 0o600))
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{}))
		data, err := os.ReadFile(filepath.Join(to, obj))
		require.NoError(t, err)
		require.True(t, bytes.Equal([]byte("block image"), data))
	})
	t.Run("a cancelled copy stops and leaves no finished target", func(t *testing.T) {
		from, to := pools(t)
		makeTree(t, from)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, Copy(ctx, from, to, obj, Options{}), context.Canceled)
		require.NoDirExists(t, filepath.Join(to, obj))
	})
	refusals := []struct {
		name, from, to, id, err string
	}{
		{"a bad object id is refused", "/a", "/b", "../etc", "object id"},
		{"a relative pool path is refused", "a", "/b", obj, "not absolute"},
		{"the same pool path on both sides is refused", "/a", "/a", obj, "source and target pool paths /a and /a are one place"},
		{"a target path inside the source's is refused", "/a", "/a/b", obj, "are one inside the other"},
		{"a missing source is an error", "/nonexistent-pool-a", "/nonexistent-pool-b", obj, "reading the source copy"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, Copy(context.Background(), tc.from, tc.to, tc.id, Options{}), tc.err)
		})
	}
	t.Run("a fifo in the object is refused naming it", func(t *testing.T) {
		from, to := pools(t)
		require.NoError(t, os.Mkdir(filepath.Join(from, obj), 0o755))
		require.NoError(t, syscall.Mkfifo(filepath.Join(from, obj, "pipe"), 0o600))
		err := Copy(context.Background(), from, to, obj, Options{})
		require.ErrorContains(t, err, "pipe is")
		require.ErrorContains(t, err, "not a regular file, directory or symlink")
	})
}

func TestOverlapAndAbortKeepTheSource(t *testing.T) {
	t.Run("two names of one directory through a symlink overlap", func(t *testing.T) {
		from, _ := pools(t)
		link := filepath.Join(t.TempDir(), "alias")
		require.NoError(t, os.Symlink(from, link))
		require.Contains(t, Overlap(from, link), "are one place")
		require.ErrorContains(t, Copy(context.Background(), from, link, obj, Options{}), "are one place")
	})
	t.Run("two separate directories are apart", func(t *testing.T) {
		from, to := pools(t)
		require.Empty(t, Overlap(from, to))
	})
	t.Run("an abort whose target is the source's place removes the partial copy and keeps the object", func(t *testing.T) {
		from, _ := pools(t)
		makeTree(t, from)
		want := snapshot(t, filepath.Join(from, obj))
		require.NoError(t, os.Mkdir(filepath.Join(from, "."+obj+".partial"), 0o700))
		require.NoError(t, Abort(from, from, obj))
		require.Equal(t, want, snapshot(t, filepath.Join(from, obj)))
		require.NoDirExists(t, filepath.Join(from, "."+obj+".partial"))
	})
	t.Run("an abort whose target reaches the source through a symlink keeps the object", func(t *testing.T) {
		from, _ := pools(t)
		makeTree(t, from)
		want := snapshot(t, filepath.Join(from, obj))
		link := filepath.Join(t.TempDir(), "alias")
		require.NoError(t, os.Symlink(from, link))
		require.NoError(t, Abort(from, link, obj))
		require.Equal(t, want, snapshot(t, filepath.Join(from, obj)))
	})
}

func TestCopyRepairsAPartialTree(t *testing.T) {
	t.Run("a resume replaces a wrong symlink, a file where a directory belongs and a read-only directory's content", func(t *testing.T) {
		from, to := pools(t)
		makeTree(t, from)
		partial := filepath.Join(to, "."+obj+".partial")
		require.NoError(t, os.MkdirAll(filepath.Join(partial, "ro"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(partial, "ro", "x"), []byte("stale"), 0o600))
		require.NoError(t, os.Chmod(filepath.Join(partial, "ro"), 0o555))
		require.NoError(t, os.WriteFile(filepath.Join(partial, "sub"), []byte("a file where a directory belongs"), 0o600))
		require.NoError(t, os.Symlink("elsewhere", filepath.Join(partial, "link")))
		require.NoError(t, os.Mkdir(filepath.Join(partial, "a.txt"), 0o700))
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{}))
		require.Equal(t, snapshot(t, filepath.Join(from, obj)), snapshot(t, filepath.Join(to, obj)))
	})
}

func TestHolds(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "q", obj)
	require.NoError(t, os.MkdirAll(filepath.Join(live, "sub"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "q"), filepath.Join(dir, "alias")))
	for _, c := range []struct {
		name, path, want string
	}{
		{"the live copy by name", live, live + " is " + live},
		{"the live copy through a symlinked pool path", filepath.Join(dir, "alias", obj), filepath.Join(dir, "alias", obj) + " is " + live},
		{"a directory above the live copy", filepath.Join(dir, "q"), filepath.Join(dir, "q") + " holds " + live},
		{"a path inside the live copy", filepath.Join(live, "sub", obj), filepath.Join(live, "sub", obj) + " is inside " + live},
		{"a copy elsewhere", filepath.Join(dir, "p", obj), ""},
		{"a sibling whose name starts like the live copy's", live + "x", ""},
	} {
		t.Run(c.name, func(t *testing.T) { require.Equal(t, c.want, Holds(c.path, live)) })
	}
}

// Package move copies a pool object between two pool paths on one node, the
// I/O half of `storage pools move`: <from>/<id> is copied to <to>/<id>
// (regular files, directories, symlinks, modes, modification times,
// fsync), so that a copy killed at any point and run again continues and
// ends identical, and a copy abandoned is removed whole.
//
// Resume rule. The copy is built in <to>/.<id>.partial and renamed to
// <to>/<id> only when complete, so <to>/<id> existing means a finished
// copy. Inside the partial tree, a regular file is written to a scratch
// file in <to>/.<id>.scratch, fsynced, given its mode and modification
// time, then renamed into place: a file of the source's size and
// modification time in the partial tree is therefore complete and skipped
// on a resume, and anything else is copied again. Directories get their
// modes last (they stay writable while being filled); entries the source
// does not have are removed before the final rename.
//
// The source is never changed by Copy: removing it is a separate step
// (Remove), taken only after the move settled in the store.
package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/eru-extend/resources/storage/pool"
)

// Progress is how far a copy is: bytes of regular files done (skipped
// complete files included) out of the total, regular files done out of
// theirs, entries done, and the bytes of files an earlier, interrupted
// run had already copied completely (skipped by this one).
type Progress struct {
	Bytes      int64
	Total      int64
	Files      int
	FilesTotal int
	Entries    int
	Resumed    int64
}

// Options tune a copy. Progress, when set, is called after every chunk
// and every entry, from the copying goroutine.
type Options struct {
	Progress func(Progress)
	// ChunkSize is the size of one read and write (default 1 MiB).
	ChunkSize int
}

// Paths are the names a copy of object id uses under the target pool path.
type Paths struct {
	Source  string // <from>/<id>
	Target  string // <to>/<id>
	Partial string // <to>/.<id>.partial
	Scratch string // <to>/.<id>.scratch
}

// PathsOf checks the pool paths and the object id and names the paths.
func PathsOf(from, to, id string) (Paths, error) {
	if err := pool.ValidObjectID(id); err != nil {
		return Paths{}, err
	}
	for _, p := range []string{from, to} {
		if err := pool.ValidPath(p); err != nil {
			return Paths{}, fmt.Errorf("pool path: %w", err)
		}
	}
	if why := Overlap(from, to); why != "" {
		return Paths{}, errors.New(why)
	}
	return Paths{
		Source:  filepath.Join(from, id),
		Target:  filepath.Join(to, id),
		Partial: filepath.Join(to, "."+id+".partial"),
		Scratch: filepath.Join(to, "."+id+".scratch"),
	}, nil
}

// Overlap says why the pool paths from and to cannot take a move between
// them on this host: they are one place (by name, by what the names
// resolve to, or as one directory reached twice, a bind mount), or one is
// inside the other. "" when they are apart.
func Overlap(from, to string) string {
	rf, rt := resolve(from), resolve(to)
	switch {
	case from == to || rf == rt:
		return fmt.Sprintf("source and target pool paths %s and %s are one place", from, to)
	case pool.Within(rt, rf), pool.Within(rf, rt):
		return fmt.Sprintf("source and target pool paths %s and %s are one inside the other", from, to)
	}
	a, errA := os.Stat(from)
	b, errB := os.Stat(to)
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return fmt.Sprintf("source and target pool paths %s and %s are one directory", from, to)
	}
	return ""
}

// resolve is path with its symlinks resolved, or path when it cannot be.
func resolve(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}

// Copy copies <from>/<id> to <to>/<id>. A finished copy (<to>/<id> exists)
// answers at once; an interrupted one continues where it stopped.
func Copy(ctx context.Context, from, to, id string, opt Options) error {
	p, err := PathsOf(from, to, id)
	if err != nil {
		return err
	}
	// A finished copy is made durable again before it is trusted: a run
	// killed between renaming it into place and syncing its folder left a
	// rename a power loss could undo, and the move then settles on it.
	if _, err := os.Lstat(p.Target); err == nil {
		return syncDir(to)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checking the target copy: %w", err)
	}
	root, err := os.Lstat(p.Source)
	if err != nil {
		return fmt.Errorf("reading the source copy: %w", err)
	}
	if !root.IsDir() && !root.Mode().IsRegular() {
		return fmt.Errorf("source %s is neither a directory nor a regular file", p.Source)
	}
	// One copier at a time: a second one (the same move run again on
	// another host or in another terminal) would share the partial tree
	// and the scratch files.
	unlock, err := lock(to, id)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Lstat(p.Target); err == nil {
		return syncDir(to) // finished by the copier that held the lock before
	}
	c := &copier{ctx: ctx, opt: opt, paths: p}
	if c.opt.ChunkSize <= 0 {
		c.opt.ChunkSize = 1 << 20
	}
	if err := c.plan(); err != nil {
		return err
	}
	if err := os.Mkdir(p.Scratch, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating the scratch directory: %w", err)
	}
	for _, e := range c.entries {
		if err := c.copyEntry(e); err != nil {
			return err
		}
		c.progress.Entries++
		if e.info.Mode().IsRegular() {
			c.progress.Files++
		}
		c.report()
	}
	if err := c.prune(); err != nil {
		return err
	}
	if err := c.finishDirs(); err != nil {
		return err
	}
	if err := os.RemoveAll(p.Scratch); err != nil {
		return fmt.Errorf("removing the scratch directory: %w", err)
	}
	if err := os.Rename(p.Partial, p.Target); err != nil {
		return fmt.Errorf("renaming the finished copy into place: %w", err)
	}
	return syncDir(filepath.Dir(p.Target))
}

// Abort removes every trace of a copy of id from pool path from under the
// target pool path to: the partial tree, the scratch files and a finished
// copy. It must only run for a move that did not settle (after the settle
// <to>/<id> is the object itself). Whatever is the source object itself,
// holds it or lies inside it (Holds) is never removed: a target at the
// source's place (pools declared at one path before that was refused)
// keeps the data.
func Abort(from, to, id string) error {
	if err := pool.ValidObjectID(id); err != nil {
		return err
	}
	for _, p := range []string{from, to} {
		if err := pool.ValidPath(p); err != nil {
			return fmt.Errorf("pool path: %w", err)
		}
	}
	unlock, err := lock(to, id)
	if err != nil {
		return err
	}
	defer unlock()
	source := filepath.Join(from, id)
	for _, path := range []string{filepath.Join(to, "."+id+".partial"), filepath.Join(to, "."+id+".scratch"), filepath.Join(to, id)} {
		if Holds(path, source) != "" {
			continue
		}
		if err := removeAll(path); err != nil {
			return fmt.Errorf("removing %s: %w", path, err)
		}
	}
	return syncDir(to)
}

// Holds says why removing path on this host would remove live (an
// object's live copy) or a part of it: path is live (by name, by what the
// names resolve to, or as one file: a bind mount), is a directory above
// it, or lies inside it. "" when removing path leaves live whole. This is
// the one rule by which a removal (an abort's, a cleanup's) spares an
// object's data.
func Holds(path, live string) string {
	rp, rl := resolve(path), resolve(live)
	switch {
	case path == live || rp == rl:
		return fmt.Sprintf("%s is %s", path, live)
	case pool.Within(live, path) || pool.Within(rl, rp):
		return fmt.Sprintf("%s holds %s", path, live)
	case pool.Within(path, live) || pool.Within(rp, rl):
		return fmt.Sprintf("%s is inside %s", path, live)
	}
	a, errA := os.Lstat(path)
	b, errB := os.Lstat(live)
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return fmt.Sprintf("%s is %s (one file)", path, live)
	}
	return ""
}

// Remove removes the copy of object id under pool path root: the source a
// settled move left, a cleanup entry's copy (an aborted move's target:
// its partial tree and scratch files too, which an abort that stopped
// before its removals leaves).
func Remove(root, id string) error {
	if err := pool.ValidObjectID(id); err != nil {
		return err
	}
	if err := pool.ValidPath(root); err != nil {
		return fmt.Errorf("pool path: %w", err)
	}
	unlock, err := lock(root, id)
	if err != nil {
		return err
	}
	defer unlock()
	for _, path := range []string{filepath.Join(root, id), filepath.Join(root, "."+id+".partial"), filepath.Join(root, "."+id+".scratch")} {
		if err := removeAll(path); err != nil {
			return fmt.Errorf("removing %s: %w", path, err)
		}
	}
	return syncDir(root)
}

// lock takes the exclusive lock on the copies of object id under pool path
// root (<root>/.<id>.lock, flock(2): held across hosts by the shared file
// systems that honour it, released by the kernel when the process dies).
// A copy, an abort and a removal of one object in one pool never run at
// once: another process holding it is an error, not a wait.
func lock(root, id string) (func(), error) {
	path := filepath.Join(root, "."+id+".lock")
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("creating the lock %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("another process is copying or removing object %s in %s (%s is locked)", id, root, path)
			}
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		// The lock counts only if path still names the file locked (a
		// holder removes it when it is done).
		a, errA := f.Stat()
		b, errB := os.Stat(path)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return func() {
				_ = os.Remove(path)
				f.Close()
			}, nil
		}
		f.Close()
		if errA != nil {
			return nil, fmt.Errorf("locking %s: %w", path, errA)
		}
	}
}

// removeAll removes a tree even where a directory mode forbids writing.
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}

type entry struct {
	rel  string // "" for the root
	info fs.FileInfo
	link string
}

type copier struct {
	ctx      context.Context
	opt      Options
	paths    Paths
	entries  []entry
	progress Progress
	scratchN int
}

func (c *copier) report() {
	if c.opt.Progress != nil {
		c.opt.Progress(c.progress)
	}
}

// plan walks the source in lexical order and sums the bytes to copy.
func (c *copier) plan() error {
	return filepath.WalkDir(c.paths.Source, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading the source copy: %w", err)
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("reading the source copy: %w", err)
		}
		rel, _ := filepath.Rel(c.paths.Source, path)
		if rel == "." {
			rel = ""
		}
		e := entry{rel: rel, info: info}
		switch {
		case info.Mode().IsRegular():
			c.progress.Total += info.Size()
			c.progress.FilesTotal++
		case info.IsDir():
		case info.Mode()&fs.ModeSymlink != 0:
			if e.link, err = os.Readlink(path); err != nil {
				return fmt.Errorf("reading the symlink %s: %w", path, err)
			}
		default:
			return fmt.Errorf("source %s is %s, not a regular file, directory or symlink", path, info.Mode().Type())
		}
		c.entries = append(c.entries, e)
		return nil
	})
}

func (c *copier) target(rel string) string { return filepath.Join(c.paths.Partial, rel) }

func (c *copier) copyEntry(e entry) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	dst := c.target(e.rel)
	have, err := os.Lstat(dst)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", dst, err)
	}
	exists := err == nil
	switch {
	case e.info.IsDir():
		if exists && !have.IsDir() {
			if err := removeAll(dst); err != nil {
				return fmt.Errorf("replacing %s: %w", dst, err)
			}
			exists = false
		}
		if !exists {
			if err := os.Mkdir(dst, 0o700); err != nil {
				return fmt.Errorf("creating the directory %s: %w", dst, err)
			}
		}
		// Writable while filled; the source's mode comes last.
		if err := os.Chmod(dst, 0o700); err != nil {
			return fmt.Errorf("opening the directory %s: %w", dst, err)
		}
		return nil
	case e.link != "":
		if exists {
			if cur, err := os.Readlink(dst); err == nil && cur == e.link {
				return nil
			}
			if err := removeAll(dst); err != nil {
				return fmt.Errorf("replacing %s: %w", dst, err)
			}
		}
		if err := os.Symlink(e.link, dst); err != nil {
			return fmt.Errorf("creating the symlink %s: %w", dst, err)
		}
		chown(dst, e.info)
		return nil
	default:
		if exists && have.Mode().IsRegular() && have.Size() == e.info.Size() && have.ModTime().Equal(e.info.ModTime()) {
			c.progress.Bytes += e.info.Size()
			c.progress.Resumed += e.info.Size()
			return nil
		}
		if exists && have.IsDir() {
			if err := removeAll(dst); err != nil {
				return fmt.Errorf("replacing %s: %w", dst, err)
			}
		}
		return c.copyFile(e, dst)
	}
}

// copyFile writes the file to a scratch file, fsyncs it, gives it its
// mode, owner and modification time, and renames it into place.
func (c *copier) copyFile(e entry, dst string) error {
	src := filepath.Join(c.paths.Source, e.rel)
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	defer in.Close()
	c.scratchN++
	tmp := filepath.Join(c.paths.Scratch, fmt.Sprintf("f%d", c.scratchN))
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	if err := c.copyData(in, out, src, tmp); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	chown(tmp, e.info)
	if err := os.Chmod(tmp, e.info.Mode().Perm()|e.info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", tmp, err)
	}
	if err := os.Chtimes(tmp, e.info.ModTime(), e.info.ModTime()); err != nil {
		return fmt.Errorf("setting the times of %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("placing %s: %w", dst, err)
	}
	return nil
}

// copyData copies in to out region by region: the data the source's file
// system reports (lseek SEEK_DATA/SEEK_HOLE) is read and written, its
// holes are left holes, so a sparse file takes in the target the blocks
// it takes in the source. A file system that cannot tell has one data
// region, the whole file.
func (c *copier) copyData(in, out *os.File, src, tmp string) error {
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	size := info.Size()
	buf := make([]byte, c.opt.ChunkSize)
	for off := int64(0); off < size; {
		data, err := in.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			c.progress.Bytes += size - off
			c.report()
			break // a hole up to the end
		}
		hole := size
		if err != nil {
			data = off // no SEEK_DATA here: all of it is data
		} else if h, err := in.Seek(data, unix.SEEK_HOLE); err == nil {
			hole = min(h, size)
		}
		if data > off {
			c.progress.Bytes += data - off
			c.report()
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return fmt.Errorf("reading %s: %w", src, err)
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return fmt.Errorf("writing %s: %w", tmp, err)
		}
		for pos := data; pos < hole; {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			n, rerr := in.Read(buf[:min(int64(len(buf)), hole-pos)])
			if n > 0 {
				if _, err := out.Write(buf[:n]); err != nil {
					return fmt.Errorf("writing %s: %w", tmp, err)
				}
				pos += int64(n)
				c.progress.Bytes += int64(n)
				c.report()
			}
			if errors.Is(rerr, io.EOF) {
				return fmt.Errorf("reading %s: it ended at %d bytes of %d: was it changed during the copy?", src, pos, size)
			}
			if rerr != nil {
				return fmt.Errorf("reading %s: %w", src, rerr)
			}
		}
		off = hole
	}
	if err := out.Truncate(size); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	return nil
}

// prune removes what the partial tree has and the source does not (left
// by an earlier run that saw another source, or replaced entries).
func (c *copier) prune() error {
	want := map[string]bool{}
	for _, e := range c.entries {
		want[e.rel] = true
	}
	var extra []string
	err := filepath.WalkDir(c.paths.Partial, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.paths.Partial, path)
		if rel == "." {
			rel = ""
		}
		if !want[rel] {
			extra = append(extra, path)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the partial copy: %w", err)
	}
	for _, p := range extra {
		if err := removeAll(p); err != nil {
			return fmt.Errorf("removing %s: %w", p, err)
		}
	}
	return nil
}

// finishDirs gives directories their owners, modes and times, deepest
// first, and fsyncs each.
func (c *copier) finishDirs() error {
	var dirs []entry
	for _, e := range c.entries {
		if e.info.IsDir() {
			dirs = append(dirs, e)
		}
	}
	slices.SortFunc(dirs, func(a, b entry) int {
		return strings.Count(b.rel, string(filepath.Separator)) - strings.Count(a.rel, string(filepath.Separator))
	})
	for _, e := range dirs {
		dst := c.target(e.rel)
		if err := syncDir(dst); err != nil {
			return err
		}
		chown(dst, e.info)
		if err := os.Chmod(dst, e.info.Mode().Perm()|e.info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return fmt.Errorf("setting the mode of %s: %w", dst, err)
		}
		if err := os.Chtimes(dst, e.info.ModTime(), e.info.ModTime()); err != nil {
			return fmt.Errorf("setting the times of %s: %w", dst, err)
		}
	}
	return nil
}

// chown gives path the source's owner when the process may (as root);
// otherwise the copy keeps the running user's.
func chown(path string, info fs.FileInfo) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		_ = os.Lchown(path, int(st.Uid), int(st.Gid))
	}
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening %s to sync it: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return nil
}

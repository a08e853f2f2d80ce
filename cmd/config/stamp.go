package config

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// RacyWindow is how long after a config file's last change its size and
// times may not tell a later write from it: a file's timestamps come from
// a clock that ticks every few milliseconds (every two seconds on some
// filesystems), so a same-size write in the tick of the read keeps them.
const RacyWindow = 2 * time.Second

// Stamp records the file contents a configuration was read from, so that a
// long-running process (the serve daemon) can tell whether the file still
// holds them.
type Stamp struct {
	Size    int64
	ModTime time.Time
	Mode    fs.FileMode
	// id is the file's identity and change time: a file renamed over it
	// (a new inode), or one whose modification time was set back (cp -p,
	// touch -r), shows there; no program can set a change time back.
	id fileID
	// Read is when the file was stat'ed, just before it was read.
	Read time.Time
	// Data is what was read.
	Data []byte
}

// ReadFile reads file and stamps what it read: the file is stat'ed through
// the descriptor it is read from, before the read, so a write during or
// after the read leaves a newer modification time (or, within RacyWindow,
// other contents).
func ReadFile(file string) (Stamp, error) { return readFile(file, time.Now) }

func readFile(file string, now func() time.Time) (Stamp, error) {
	f, err := os.Open(file)
	if err != nil {
		return Stamp{}, err
	}
	defer f.Close()
	read := now()
	fi, err := f.Stat()
	if err != nil {
		return Stamp{}, err
	}
	var data bytes.Buffer
	data.Grow(int(min(fi.Size(), MaxFileSize)) + bytes.MinRead)
	if _, err := data.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil {
		return Stamp{}, err
	}
	if data.Len() > MaxFileSize {
		return Stamp{}, fmt.Errorf("%s: larger than %d bytes, the most a config file may hold", file, MaxFileSize)
	}
	return Stamp{Size: fi.Size(), ModTime: fi.ModTime(), Mode: fi.Mode(), id: idOf(fi), Read: read, Data: data.Bytes()}, nil
}

// fileID is what a stat tells of a file beyond its size and modification
// time.
type fileID struct {
	dev, ino uint64
	ctime    time.Time
}

func idOf(fi fs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, ctime: time.Unix(st.Ctim.Unix())}
}

// Racy reports whether the file was changed so shortly before it was read
// that a later same-size write could keep its times: only its contents
// tell.
func (s Stamp) Racy() bool {
	last := s.ModTime
	if s.id.ctime.After(last) {
		last = s.id.ctime
	}
	return s.Read.Sub(last) < RacyWindow
}

// same reports whether a stat's figures describe the file s was read
// from, as far as a stat can tell.
func (s Stamp) same(size int64, mtime time.Time, id fileID) bool {
	return size == s.Size && mtime.Equal(s.ModTime) && id == s.id
}

// Unchanged reports whether file still holds what s was read from. When s
// is racy it compares the contents, and answers settled when they matched
// on a read begun so long after the last modification that any later
// write must show in the modification time: the caller may then stop
// comparing contents.
func (s Stamp) Unchanged(file string, racy bool) (same, settled bool) {
	return s.unchanged(file, racy, time.Now)
}

func (s Stamp) unchanged(file string, racy bool, now func() time.Time) (same, settled bool) {
	fi, err := os.Stat(file)
	if err != nil || !s.same(fi.Size(), fi.ModTime(), idOf(fi)) {
		return false, false
	}
	if !racy {
		return true, true
	}
	again, err := readFile(file, now)
	if err != nil || !bytes.Equal(again.Data, s.Data) || !s.same(again.Size, again.ModTime, again.id) {
		return false, false
	}
	return true, !again.Racy()
}

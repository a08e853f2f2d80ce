package config

import (
	"bytes"
	"io/fs"
	"os"
	"time"
)

// RacyWindow is how long after a config file's last modification its size
// and modification time may not tell a later write from it: a file's
// timestamps come from a clock that ticks every few milliseconds (every two
// seconds on some filesystems), so a same-size write in the tick of the
// read keeps both.
const RacyWindow = 2 * time.Second

// Stamp records the file contents a configuration was read from, so that a
// long-running process (the serve daemon) can tell whether the file still
// holds them.
type Stamp struct {
	Size    int64
	ModTime time.Time
	Mode    fs.FileMode
	// Read is when the file was stat'ed, just before it was read.
	Read time.Time
	// Data is what was read.
	Data []byte
}

// ReadFile reads file and stamps what it read: the file is stat'ed through
// the descriptor it is read from, before the read, so a write during or
// after the read leaves a newer modification time (or, within RacyWindow,
// other contents).
func ReadFile(file string) (Stamp, error) {
	f, err := os.Open(file)
	if err != nil {
		return Stamp{}, err
	}
	defer f.Close()
	read := time.Now()
	fi, err := f.Stat()
	if err != nil {
		return Stamp{}, err
	}
	var data bytes.Buffer
	data.Grow(int(min(fi.Size(), 1<<20)) + bytes.MinRead)
	if _, err := data.ReadFrom(f); err != nil {
		return Stamp{}, err
	}
	return Stamp{Size: fi.Size(), ModTime: fi.ModTime(), Mode: fi.Mode(), Read: read, Data: data.Bytes()}, nil
}

// Racy reports whether the file was modified so shortly before it was read
// that a later same-size write could keep its modification time: only its
// contents tell.
func (s Stamp) Racy() bool { return s.Read.Sub(s.ModTime) < RacyWindow }

// Unchanged reports whether file still holds what s was read from. When s
// is racy it compares the contents, and answers settled when they matched
// on a read begun so long after the last modification that any later
// write must show in the modification time: the caller may then stop
// comparing contents.
func (s Stamp) Unchanged(file string, racy bool) (same, settled bool) {
	fi, err := os.Stat(file)
	if err != nil || fi.Size() != s.Size || !fi.ModTime().Equal(s.ModTime) {
		return false, false
	}
	if !racy {
		return true, true
	}
	now, err := ReadFile(file)
	if err != nil || !bytes.Equal(now.Data, s.Data) || now.Size != s.Size || !now.ModTime.Equal(s.ModTime) {
		return false, false
	}
	return true, !now.Racy()
}

package serve

import (
	"os"
	"sync"
)

// logFile is the daemon's `log.file`: records are appended to it, and
// Reopen opens the path again, so that a log rotated by renaming it (what
// logrotate does by default) goes on in a new file at the configured path
// once the daemon gets SIGHUP. The binaries core execs open the file for
// each call and need none of this.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func openLogFile(path string) (*logFile, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &logFile{path: path, f: f}, nil
}

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
}

// Write appends one record (slog's handlers write each record whole).
func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// Reopen opens the path again and writes there from now on. When the path
// cannot be opened, records go on to the file open before, and the error
// says why.
func (l *logFile) Reopen() error {
	f, err := openAppend(l.path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	return old.Close()
}

// Close closes the file open now.
func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

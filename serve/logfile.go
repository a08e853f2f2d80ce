package serve

import (
	"os"
	"sync"

	"github.com/eru-extend/resources/cmd/config"
)

// logFile is the daemon's `log.file`: records are appended to it, and
// Reopen opens the path again, so that a log rotated by renaming it (what
// logrotate does by default) goes on in a new file at the configured path
// once the daemon gets SIGHUP. The binaries core execs open the file for
// each call and need none of this.
type logFile struct {
	cfg *config.Config
	mu  sync.Mutex
	f   *os.File
}

// openLogFile opens cfg's log.file (config.OpenLog: appending, created when
// missing); cfg names one.
func openLogFile(cfg *config.Config) (*logFile, error) {
	f, err := cfg.OpenLog()
	if err != nil {
		return nil, err
	}
	return &logFile{cfg: cfg, f: f}, nil
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
	f, err := l.cfg.OpenLog()
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

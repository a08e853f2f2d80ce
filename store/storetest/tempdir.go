package storetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ProcessTempDir makes a temporary folder for something a test process
// keeps for its whole life (its etcd server, its build of the binaries),
// which no test's cleanup can remove. The folder's name carries the
// process id, and folders of the same prefix whose process is gone are
// removed first: a run leaves at most the folders of processes still
// running, however many test processes came before it.
func ProcessTempDir(prefix string) (string, error) {
	if err := removeStale(prefix); err != nil {
		return "", err
	}
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
}

// RunTempDir is the folder the test processes of one run share under key:
// `go test ./...` starts every package's test process from one go command,
// whose process id the folder's name carries, so it goes as
// ProcessTempDir's do once that command is gone.
func RunTempDir(prefix, key string) (string, error) {
	if err := removeStale(prefix); err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-%s", prefix, os.Getppid(), key))
	return dir, os.MkdirAll(dir, 0o755)
}

// removeStale removes the folders of prefix whose process is gone.
func removeStale(prefix string) error {
	matches, err := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	if err != nil {
		return err
	}
	for _, m := range matches {
		if pid, ok := pidOf(filepath.Base(m), prefix); ok && !alive(pid) {
			_ = os.RemoveAll(m)
		}
	}
	return nil
}

// pidOf reads the process id from a folder name made by ProcessTempDir.
func pidOf(name, prefix string) (int, bool) {
	text, _, ok := strings.Cut(strings.TrimPrefix(name, prefix), "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(text)
	return pid, err == nil && pid > 0
}

// alive reports whether a process with this id exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

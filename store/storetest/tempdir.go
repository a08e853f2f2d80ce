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
	matches, err := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	if err != nil {
		return "", err
	}
	for _, m := range matches {
		if pid, ok := pidOf(filepath.Base(m), prefix); ok && !alive(pid) {
			_ = os.RemoveAll(m)
		}
	}
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
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

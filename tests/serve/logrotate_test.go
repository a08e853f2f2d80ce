package serve_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestSIGHUPReopensTheLogFile rotates the daemon's log.file the way
// logrotate does by default (rename, then SIGHUP): the daemon goes on in a
// new file at the configured path and writes nothing more to the renamed
// one; a path that cannot be opened at the SIGHUP leaves it logging to the
// file it had, and says so there.
func TestSIGHUPReopensTheLogFile(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	writeConfig(t, env, env.ConfigYAML()+"log:\n  file: serve.log\n")
	logPath := filepath.Join(env.Dir, "serve.log")
	read := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return string(data)
	}
	d := env.Serve(t, "")
	require.Eventually(t, func() bool { return strings.Contains(read(logPath), `"msg":"serving"`) }, 10*time.Second, 10*time.Millisecond)

	rotated := logPath + ".1"
	require.NoError(t, os.Rename(logPath, rotated))
	require.NoError(t, os.Mkdir(logPath, 0o755)) // the path cannot be opened as a file
	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(read(rotated), "log.file could not be reopened") }, 10*time.Second, 10*time.Millisecond,
		"a failed reopen is logged to the file the daemon had open")

	require.NoError(t, os.Remove(logPath))
	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(read(logPath), `"msg":"reopened log.file"`) }, 10*time.Second, 10*time.Millisecond,
		"after the SIGHUP the daemon writes to a new file at the configured path")
	d.Stop(t)

	require.Contains(t, read(logPath), `"msg":"shutting down"`)
	require.NotContains(t, read(rotated), "shutting down", "nothing more goes to the renamed file")
	require.NotContains(t, read(rotated), "reopened log.file")
}

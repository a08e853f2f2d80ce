package storetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProcessTempDirRemovesTheFoldersOfProcessesThatAreGone(t *testing.T) {
	prefix := "eru-tempdir-test-" + strconv.Itoa(os.Getpid()) + "-"
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	stale := filepath.Join(os.TempDir(), prefix+strconv.Itoa(gone.Process.Pid)+"-x")
	require.NoError(t, os.MkdirAll(filepath.Join(stale, "data"), 0o755))
	live := filepath.Join(os.TempDir(), prefix+strconv.Itoa(os.Getppid())+"-y")
	require.NoError(t, os.MkdirAll(live, 0o755))
	other := filepath.Join(os.TempDir(), prefix+"not-a-pid")
	require.NoError(t, os.MkdirAll(other, 0o755))
	t.Cleanup(func() {
		for _, d := range []string{stale, live, other} {
			_ = os.RemoveAll(d)
		}
	})

	dir, err := ProcessTempDir(prefix)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	require.NoDirExists(t, stale, "a gone process's folder is removed")
	require.DirExists(t, live, "a running process's folder is kept")
	require.DirExists(t, other, "a folder that names no process is left alone")
	require.Contains(t, filepath.Base(dir), prefix+strconv.Itoa(os.Getpid())+"-")
}

func TestRunTempDirIsOneFolderPerRunAndKey(t *testing.T) {
	prefix := "eru-rundir-test-" + strconv.Itoa(os.Getpid()) + "-"
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	stale := filepath.Join(os.TempDir(), prefix+strconv.Itoa(gone.Process.Pid)+"-k")
	require.NoError(t, os.MkdirAll(stale, 0o755))

	dir, err := RunTempDir(prefix, "k")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir); _ = os.RemoveAll(stale) })
	again, err := RunTempDir(prefix, "k")
	require.NoError(t, err)
	other, err := RunTempDir(prefix, "j")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(other) })

	require.Equal(t, dir, again, "the processes of one run (one parent) share the folder")
	require.NotEqual(t, dir, other, "another key is another folder")
	require.Equal(t, prefix+strconv.Itoa(os.Getppid())+"-k", filepath.Base(dir))
	require.DirExists(t, dir)
	require.NoDirExists(t, stale, "the folder of a run that is gone is removed")
}

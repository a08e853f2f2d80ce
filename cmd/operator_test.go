package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// storageWithNode is a storage binary's command tree on an embedded store
// in a fresh folder, where node n1 has been added: the folder and a run of
// the tree with a command line (every run with n1's add-node request on
// stdin), answering its exit code, stdout and stderr.
func storageWithNode(t *testing.T) (string, func(args ...string) (int, string, string)) {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "plugins.yaml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, "embedded:\n  path: %q\n", filepath.Join(dir, "store.db")), 0o644))
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main("storage", append([]string{"--config", config}, args...), strings.NewReader(`{"nodename":"n1","resource":{"volumes":["/data0:1G"]}}`), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, _, stderr := run("add-node")
	require.Equal(t, 0, code, stderr)
	return dir, run
}

// The replay identity of a --command-id is the command's own flags: every
// flag it declares but --output and --command-id, so a flag added to a
// command cannot be forgotten there.
func TestCommandIDReplaysOnlyTheSameFlags(t *testing.T) {
	dir, run := storageWithNode(t)
	proc := filepath.Join(dir, "proc")
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "sys/kernel/random"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "sys/kernel/random/boot_id"), []byte("boot-1\n"), 0o644))

	drain := []string{"nodes", "drain", "n1", "--command-id", "d1"}
	code, first, stderr := run(drain...)
	require.Equal(t, 0, code, stderr)

	t.Run("the same flags replay the first answer, and stderr says it is a replay", func(t *testing.T) {
		code, again, stderr := run(drain...)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, first, again)
		require.Regexp(t, `^storage: nodes drain: replay of command d1: the answer given at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, nothing written\n$`, stderr)
	})
	t.Run("another output format is the same command, printed from the kept answer", func(t *testing.T) {
		code, table, stderr := run(append(drain, "-o", "table")...)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, table, "DRAINED")
		require.Contains(t, stderr, "replay of command d1")
	})
	for _, c := range []struct{ flag, value string }{
		{"--if-version", "1"},
		{"--wait", "true"},
	} {
		t.Run("another "+c.flag+" is another command: already_exists", func(t *testing.T) {
			args := append(append([]string{}, drain...), c.flag+"="+c.value)
			code, stdout, stderr := run(args...)
			require.Equal(t, types.AlreadyExists.ExitCode(), code, "%s", stdout)
			require.Contains(t, stderr, "storage: nodes drain: already_exists: command id d1 was used for")
		})
	}
	t.Run("heartbeat takes neither --command-id nor --if-version", func(t *testing.T) {
		for _, flag := range []string{"--command-id=h1", "--if-version=1"} {
			code, stdout, stderr := run("nodes", "heartbeat", "n1", "--proc-root", proc, flag)
			require.Equal(t, types.InvalidArgument.ExitCode(), code, "%s", stdout)
			require.Contains(t, stderr, "flag provided but not defined")
		}
	})
	t.Run("an overcommit command is fingerprinted the same way", func(t *testing.T) {
		code, _, stderr := run("overcommit", "set-defaults", "--cpu", "2000", "--memory", "1000", "--command-id", "o1")
		require.Equal(t, 0, code, stderr)
		code, _, stderr = run("overcommit", "set-defaults", "--cpu", "3000", "--memory", "1000", "--command-id", "o1")
		require.Equal(t, types.AlreadyExists.ExitCode(), code)
		require.Contains(t, stderr, `"overcommit set-defaults --cpu=2000 --memory=1000"`)
	})
}

// A --command-id becomes part of a store key: one too long is refused
// as such, on either store, before anything is written.
func TestCommandIDLengthIsBounded(t *testing.T) {
	_, run := storageWithNode(t)
	for _, c := range []struct {
		name  string
		bytes int
		code  int
		want  string
	}{
		{"an id of the bound is taken", 1024, 0, ""},
		{"an id one byte past the bound is invalid_argument naming the bound", 1025, types.InvalidArgument.ExitCode(), "storage: nodes drain: invalid_argument: --command-id is 1025 bytes: want at most 1024\n"},
		{"an id past the embedded store's key limit is invalid_argument, not unavailable", 40000, types.InvalidArgument.ExitCode(), "storage: nodes drain: invalid_argument: --command-id is 40000 bytes: want at most 1024\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := run("nodes", "drain", "n1", "--command-id", strings.Repeat("x", c.bytes))
			require.Equal(t, c.code, code, "%s%s", stdout, stderr)
			if c.want != "" {
				require.Equal(t, c.want, stderr)
				require.Empty(t, stdout)
			}
		})
	}
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

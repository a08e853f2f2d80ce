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

// The replay identity of a --command-id is the command's own flags: every
// flag it declares but --output and --command-id, so a flag added to a
// command cannot be forgotten there.
func TestCommandIDReplaysOnlyTheSameFlags(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "plugins.yaml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, "embedded:\n  path: %q\n", filepath.Join(dir, "store.db")), 0o644))
	proc := filepath.Join(dir, "proc")
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "sys/kernel/random"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "sys/kernel/random/boot_id"), []byte("boot-1\n"), 0o644))
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main("storage", append([]string{"--config", config}, args...), strings.NewReader(`{"nodename":"n1","resource":{"volumes":["/data0:1G"]}}`), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, _, stderr := run("add-node")
	require.Equal(t, 0, code, stderr)

	beat := []string{"nodes", "heartbeat", "n1", "--command-id", "h1", "--proc-root", proc, "--clock-sync", "SYNCHRONIZED", "--ttl", "1m"}
	code, first, stderr := run(beat...)
	require.Equal(t, 0, code, stderr)

	t.Run("the same flags replay the first answer", func(t *testing.T) {
		code, again, stderr := run(beat...)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, first, again)
	})
	t.Run("another output format is the same command, printed from the kept answer", func(t *testing.T) {
		code, table, stderr := run(append(beat, "-o", "table")...)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, table, "CLOCK")
		require.Contains(t, table, "SYNCHRONIZED")
	})
	for _, c := range []struct{ flag, value string }{
		{"--clock-sync", "UNSYNCHRONIZED"},
		{"--ttl", "2m"},
		{"--clock-max-error", "1s"},
		{"--if-version", "1"},
	} {
		t.Run("another "+c.flag+" is another command: already_exists", func(t *testing.T) {
			args := append([]string{}, beat...)
			if i := indexOf(args, c.flag); i >= 0 {
				args[i+1] = c.value
			} else {
				args = append(args, c.flag, c.value)
			}
			code, stdout, stderr := run(args...)
			require.Equal(t, types.AlreadyExists.ExitCode(), code, "%s", stdout)
			require.Contains(t, stderr, "storage: nodes heartbeat: already_exists: command id h1 was used for")
		})
	}
	t.Run("an overcommit command is fingerprinted the same way", func(t *testing.T) {
		code, _, stderr := run("overcommit", "set-defaults", "--cpu", "2000", "--memory", "1000", "--command-id", "o1")
		require.Equal(t, 0, code, stderr)
		code, _, stderr = run("overcommit", "set-defaults", "--cpu", "3000", "--memory", "1000", "--command-id", "o1")
		require.Equal(t, types.AlreadyExists.ExitCode(), code)
		require.Contains(t, stderr, `"overcommit set-defaults --cpu=2000 --memory=1000"`)
	})
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

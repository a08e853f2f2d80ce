package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolCleanupOutlastsTheCallTimeout: etcd.call_timeout bounds each
// store call of `pools cleanup`, not its removals: a removal that lasts
// longer than the budget (the process is stopped while it removes) runs
// to the end and the entry is dropped, and the embedded store stays free
// for other commands meanwhile.
func TestPoolCleanupOutlastsTheCallTimeout(t *testing.T) {
	t.Parallel()
	const budget = time.Second
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		if env.Etcd == nil {
			require.NoError(t, os.WriteFile(filepath.Join(env.Dir, "storage.yaml"), []byte(env.ConfigYAML()+"etcd:\n  call_timeout: 1s\n"), 0o644))
		}
		a := t.TempDir()
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:" + a}})
		const object, dirs = "v-00000000000000ff", 3000
		root := filepath.Join(a, object)
		for i := range dirs {
			d := filepath.Join(root, fmt.Sprintf("d%04d", i))
			require.NoError(t, os.MkdirAll(d, 0o755))
			for j := range 3 {
				require.NoError(t, os.WriteFile(filepath.Join(d, fmt.Sprint(j)), []byte("x"), 0o644))
			}
		}
		// entries is how many subdirectories the object still has: the
		// removal takes them one by one.
		entries := func() int {
			f, err := os.Open(root)
			if err != nil {
				return 0
			}
			defer f.Close()
			names, _ := f.Readdirnames(-1)
			return len(names)
		}
		require.Equal(t, dirs, entries())
		addCleanupEntry(t, env, "ceph-a", object, "moved")

		cmd := exec.Command(testenv.Bin(t, "storage"), "pools", "cleanup", "ceph-a", "--node", "n1")
		cmd.Dir = env.Dir
		cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// Stop the process as soon as its removal began.
		for entries() == dirs {
			select {
			case err := <-exited:
				t.Fatalf("cleanup ended (%v) before its removal could be stopped: %s", err, stderr.String())
			default:
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
		require.NotZero(t, entries(), "stopped while removing")
		time.Sleep(2 * budget)
		t.Run("while the removal runs the store is free for other commands", func(t *testing.T) {
			require.EqualValues(t, 1, poolGet(t, env, "ceph-a").Cleanups)
		})
		require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
		err := <-exited
		require.NoError(t, err, "%s", stderr.String())
		var out cleanedAnswer
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
		require.Len(t, out.Removed, 1)
		require.Equal(t, object, out.Removed[0].Object)
		require.Empty(t, out.Dropped)
		require.NoDirExists(t, root)
		require.Zero(t, poolGet(t, env, "ceph-a").Cleanups)
		noDrift(t, env)
	}, testenv.WithBudget(budget))
}

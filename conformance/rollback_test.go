package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/projecteru2/core/resource/plugins"
	resourcetypes "github.com/projecteru2/core/resource/types"
	"github.com/stretchr/testify/require"
)

// TestCoreRollbackOfADecreaseTheLedgerAbsorbed is issue 18's scenario run
// by core's own resource manager: an isolated node comes back, a new 50G
// workload is placed, core removes an old workload, another plugin fails so
// core rolls storage back by replaying its before, core retries and removes
// another. The node must end holding exactly the new workload, so an 80G
// deploy on its 100G device is refused.
func TestCoreRollbackOfADecreaseTheLedgerAbsorbed(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	ctx := t.Context()
	node := resourcetypes.Resources{
		"cpumem":  {"cpu": 4, "memory": "8G"},
		"compute": {"cpu": 4, "memory": "8G"},
		"storage": {"volumes": []string{"/data0:100G"}},
	}
	_, err := m.AddNode(ctx, "n1", node, engineInfo("engine-n1"))
	require.NoError(t, err)
	old, _, err := m.Alloc(ctx, "n1", 2, deployResources("30G")) // Alloc commits the usage
	require.NoError(t, err)

	operator := func(args ...string) map[string]any {
		t.Helper()
		stdout, stderr, code := e.command(t, "storage", append([]string{"nodes"}, args...), nil)
		require.Equal(t, 0, code, stderr)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &out))
		return out
	}
	ledger := func() any {
		t.Helper()
		return object(t, operator("get", "n1")["released"])["storage"]
	}
	operator("isolate", "n1")
	proc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "sys/kernel/random"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "sys/kernel/random/boot_id"), []byte("boot-2\n"), 0o644))
	require.Equal(t, "READY", operator("heartbeat", "n1", "--proc-root", proc, "--clock-sync", "SYNCHRONIZED", "--clock-max-error", "1ms")["status"])

	fresh, _, err := m.Alloc(ctx, "n1", 1, deployResources("50G"))
	require.NoError(t, err)
	full := ledger()

	step(t, "a removal another plugin refuses is rolled back in storage, ledger included", func(t *testing.T) {
		refused := resourcetypes.Resources{"cpumem": old[0]["cpumem"], "storage": old[0]["storage"], "compute": {"cpu_request_millis": "lots"}}
		_, _, err := m.SetNodeResourceUsage(ctx, "n1", nil, nil, []resourcetypes.Resources{refused}, true, plugins.Decr)
		require.Error(t, err, "compute refuses the malformed workload, so core rolls the others back")
		require.Equal(t, full, ledger(), "the ledger is as it was before the removal")
	})
	step(t, "the retry and the next removal leave exactly the new workload", func(t *testing.T) {
		_, _, err := m.SetNodeResourceUsage(ctx, "n1", nil, nil, old, true, plugins.Decr)
		require.NoError(t, err)
		require.Nil(t, ledger(), "the ledger is used up")
		_, usage, diffs, err := m.GetNodeResourceInfo(ctx, "n1", workloadsOf(fresh), false)
		require.NoError(t, err)
		require.Empty(t, diffs)
		require.Equal(t, map[string]int64{"/data0": 50 * GiB}, asStorageNode(t, usage["storage"]).Volumes)
	})
	step(t, "an 80G deploy on the 100G device is refused", func(t *testing.T) {
		_, _, err := m.Alloc(ctx, "n1", 1, deployResources("80G"))
		require.Error(t, err)
	})
}

package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/projecteru2/core/resource/plugins"
	"github.com/stretchr/testify/require"
)

// refusingPlugin is a plugin that answers everything and refuses
// remove-node, so core's resource manager undoes the removal in the others.
const refusingPlugin = `#!/bin/sh
cat >/dev/null
case "$1" in
name) echo '"refuser"' ;;
remove-node) echo "refuser: remove-node: refused on purpose" >&2; exit 1 ;;
get-node-resource-info) echo '{"capacity":{},"usage":{},"diffs":[]}' ;;
get-metrics-description|get-metrics) echo '[]' ;;
*) echo '{}' ;;
esac
`

// TestCoreUndoOfARemoveNodeRestoresTheRegistration is issue 18's undo run
// by core's own resource manager: a remove-node another plugin refuses is
// undone with set-node-resource-info of what core read, and the node must
// come back as it was — still draining, still isolated with its ledger.
func TestCoreUndoOfARemoveNodeRestoresTheRegistration(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	ctx := t.Context()
	operator := func(args ...string) map[string]any {
		t.Helper()
		stdout, stderr, code := e.command(t, "storage", append([]string{"nodes"}, args...), nil)
		require.Equal(t, 0, code, stderr)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &out))
		return out
	}
	for _, n := range []string{"d1", "i1"} {
		_, err := m.AddNode(ctx, n, nodeResources("100G"), engineInfo("engine-"+n))
		require.NoError(t, err)
	}
	_, _, err := m.Alloc(ctx, "d1", 1, deployResources("30G"))
	require.NoError(t, err)
	require.Equal(t, "DRAINING", operator("drain", "d1")["status"])
	held, _, err := m.Alloc(ctx, "i1", 1, deployResources("60G"))
	require.NoError(t, err)
	operator("isolate", "i1")

	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "refuser"), []byte(refusingPlugin), 0o755))
	undoing := e.manager(t)

	step(t, "a DRAINING node comes back DRAINING and takes no work", func(t *testing.T) {
		require.Error(t, undoing.RemoveNode(ctx, "d1"))
		stored, _ := e.record(t, "storage", "d1")
		require.NotNil(t, stored, "core's undo wrote the record back")
		got := operator("get", "d1")
		require.Equal(t, "DRAINING", got["status"])
		require.Equal(t, true, got["drain"])
		capacities, _, err := m.GetNodesDeployCapacity(ctx, []string{"d1"}, deployResources("1G"))
		require.NoError(t, err)
		require.Empty(t, capacities)
	})
	step(t, "an isolated node comes back with its ledger, and core's cleanup is absorbed", func(t *testing.T) {
		require.Error(t, undoing.RemoveNode(ctx, "i1"))
		got := operator("get", "i1")
		require.Equal(t, true, got["isolated"])
		require.NotNil(t, object(t, got["released"])["storage"])
		_, _, err := m.SetNodeResourceUsage(ctx, "i1", nil, nil, held, true, plugins.Decr)
		require.NoError(t, err, "the removal of the dead host's workload draws the ledger down, never below zero")
		require.Nil(t, object(t, operator("get", "i1")["released"])["storage"])
	})
}

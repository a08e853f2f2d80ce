package engine_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

// interloper is a store whose first transaction is preceded by another
// writer's: the write the test names lands between the caller's read and
// its commit, so the commit conflicts and the caller reads again.
type interloper struct {
	store.Store
	once   sync.Once
	before func()
}

func (s *interloper) Txn(ctx context.Context, conds []store.Cond, ops []store.Op) error {
	s.once.Do(s.before)
	return s.Store.Txn(ctx, conds, ops)
}

// TestAFixWhoseNodesUsageMovesUnderItErasesNothing: fix-node-resource
// writes the caller's sum of the workloads. When a usage write lands
// between its read and its commit, someone placed or removed work the
// caller's list does not hold: the fix must answer aborted and leave that
// write in place, not retry and overwrite it (RELIABILITY.md, "A repair
// never erases work"). The process-level TestFixRacingWritersLosesNothing
// races fixes with capacity writes only, so no usage moves under a fix
// there.
func TestAFixWhoseNodesUsageMovesUnderItErasesNothing(t *testing.T) {
	ctx := context.Background()
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "fix.db"), boltstore.Options{Prefix: "/eru", Create: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bolt.Close() })
	other := newEngine(bolt)
	_, err = other.Call(ctx, "add-node", &types.Request{Nodename: "n1", Resource: raw(t, map[string]any{"volumes": []string{"/data0:1T"}})})
	require.NoError(t, err)
	use := func(size string) {
		t.Helper()
		_, err := other.Call(ctx, "set-node-resource-usage", &types.Request{Nodename: "n1", Delta: true, Incr: true,
			ResourceRequest: raw(t, map[string]any{"volumes": []string{"/data0:" + size}})})
		require.NoError(t, err)
	}
	use("10G") // usage the empty list of workloads says is drift

	racing := &interloper{Store: bolt}
	racing.before = func() { use("5G") } // work placed while the fix runs
	_, err = newEngine(racing).Call(ctx, "fix-node-resource", &types.Request{Nodename: "n1", WorkloadsResource: raw(t, []any{})})

	t.Run("the fix answers aborted", func(t *testing.T) {
		require.Equal(t, types.Aborted, types.ClassOf(err), "%v", err)
	})
	t.Run("the usage written under it is still there", func(t *testing.T) {
		out, err := other.Call(ctx, "get-node-resource-info", &types.Request{Nodename: "n1"})
		require.NoError(t, err)
		info, ok := out.(types.NodeResourceInfo)
		require.True(t, ok, "%T", out)
		usage := string(raw(t, info.Usage))
		require.Contains(t, usage, `"/data0":16106127360`, "10G + 5G on /data0: %s", usage)
	})
}

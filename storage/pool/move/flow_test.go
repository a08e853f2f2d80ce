package move

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/storage/pool"
)

// TestMoveFlow runs a whole move as the operator command will: the store
// transitions of package pool around a real copy between two temporary
// directories standing for the pools' mounts, with the counters checked
// against the records after every step.
func TestMoveFlow(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	capacity := int64(1 << 40)
	start := func(t *testing.T) (string, string, map[string]*pool.Record, map[string]pool.Objects, pool.MoveRequest) {
		from, to := pools(t)
		makeTree(t, from)
		records := map[string]*pool.Record{
			"ceph-a": {ID: "ceph-a", Capacity: &capacity, Reserved: 1 << 30, Objects: 1, DeclaredAt: now},
			"nfs1":   {ID: "nfs1", Capacity: &capacity, DeclaredAt: now},
		}
		nodes := map[string]pool.Objects{"n1": {obj: {Pool: "ceph-a", Bytes: 1 << 30, Held: true}}}
		r := pool.MoveRequest{Node: "n1", Reach: map[string]bool{"ceph-a": true, "nfs1": true}, Holder: "n1",
			Objects: nodes["n1"], ID: obj, From: "ceph-a", To: "nfs1", CommandID: "m1", Pools: records}
		return from, to, records, nodes, r
	}
	store := func(t *testing.T, records map[string]*pool.Record, nodes map[string]pool.Objects, r *pool.MoveRequest, out pool.MoveOutcome) {
		t.Helper()
		nodes[r.Holder] = out.Objects
		for id, rec := range out.Pools {
			records[id] = rec
		}
		r.Objects = out.Objects
		for _, d := range pool.Check(records, nodes) {
			require.False(t, d.Drifted(), "%+v", d)
		}
	}
	t.Run("start, copy, settle, remove the source and drop the cleanup", func(t *testing.T) {
		from, to, records, nodes, r := start(t)
		want := snapshot(t, filepath.Join(from, obj))
		out, err := pool.StartMove(r)
		require.NoError(t, err)
		store(t, records, nodes, &r, out)
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{}))
		out, err = pool.SettleMove(r, now)
		require.NoError(t, err)
		store(t, records, nodes, &r, out)
		require.DirExists(t, filepath.Join(from, obj), "the source stays until the cleanup")
		require.Len(t, records["ceph-a"].Cleanups, 1, "the source pool keeps a cleanup entry for the old copy")
		require.NoError(t, Remove(from, obj))
		rec, dropped := pool.DropCleanup(records["ceph-a"], obj)
		require.True(t, dropped)
		records["ceph-a"] = rec
		require.NoDirExists(t, filepath.Join(from, obj))
		require.Equal(t, want, snapshot(t, filepath.Join(to, obj)))
		require.Equal(t, "nfs1", nodes["n1"][obj].Pool)
		require.Equal(t, int64(0), records["ceph-a"].Reserved)
		require.Equal(t, int64(1<<30), records["nfs1"].Reserved)
	})
	t.Run("a move killed mid-copy is resumed by the same command and settles", func(t *testing.T) {
		from, to, records, nodes, r := start(t)
		out, err := pool.StartMove(r)
		require.NoError(t, err)
		store(t, records, nodes, &r, out)
		killMidway(t, from, to, 1<<20)
		out, err = pool.StartMove(r)
		require.NoError(t, err)
		require.True(t, out.Done, "the resumed command does not reserve twice")
		require.NoError(t, Copy(context.Background(), from, to, obj, Options{}))
		out, err = pool.SettleMove(r, now)
		require.NoError(t, err)
		store(t, records, nodes, &r, out)
		require.Equal(t, snapshot(t, filepath.Join(from, obj)), snapshot(t, filepath.Join(to, obj)))
	})
	t.Run("an aborted move removes the target copy and releases the target", func(t *testing.T) {
		from, to, records, nodes, r := start(t)
		out, err := pool.StartMove(r)
		require.NoError(t, err)
		store(t, records, nodes, &r, out)
		killMidway(t, from, to, 1<<20)
		out, err = pool.AbortMove(r, now)
		require.NoError(t, err)
		store(t, records, nodes, &r, out)
		require.NoError(t, Abort(from, to, obj))
		rec, dropped := pool.DropCleanup(records["nfs1"], obj)
		require.True(t, dropped)
		records["nfs1"] = rec
		require.Empty(t, entries(t, to))
		require.Equal(t, int64(0), records["nfs1"].Reserved)
		require.Equal(t, "ceph-a", nodes["n1"][obj].Pool)
		require.DirExists(t, filepath.Join(from, obj))
	})
}

package pool

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestMoveTransitions(t *testing.T) {
	const obj = "v-00000000000000bb"
	start := func() (*world, MoveRequest) {
		w := newWorld()
		w.nodes["n1"] = Objects{obj: {Pool: "ceph-a", Bytes: 100 * gib, Held: true}}
		w.pools["ceph-a"].Reserved, w.pools["ceph-a"].Objects = 100*gib, 1
		return w, MoveRequest{Node: "n1", Reach: w.reach["n1"], Holder: "n1", Objects: w.nodes["n1"], ID: obj, From: "ceph-a", To: "nfs1", CommandID: "m1", Pools: w.pools}
	}
	apply := func(w *world, r *MoveRequest, out MoveOutcome) {
		w.nodes[r.Holder] = out.Objects
		for p, rec := range out.Pools {
			w.pools[p] = rec
		}
		r.Objects, r.Pools = w.nodes[r.Holder], w.pools
	}
	t.Run("a settled move reserves in both pools while copying, then lives in the target with a cleanup in the source", func(t *testing.T) {
		w, r := start()
		out, err := StartMove(r)
		require.NoError(t, err)
		apply(w, &r, out)
		require.Equal(t, Object{Pool: "ceph-a", Bytes: 100 * gib, Held: true, MovingTo: "nfs1", MoveCommandID: "m1"}, w.nodes["n1"][obj])
		require.Equal(t, 100*gib, w.pools["ceph-a"].Reserved)
		require.Equal(t, 100*gib, w.pools["nfs1"].Reserved)
		require.Equal(t, "MOVING", ObjectState(w.nodes["n1"][obj], w.pools["ceph-a"]))
		w.requireNoDrift(t)

		again, err := StartMove(r)
		require.NoError(t, err)
		require.True(t, again.Done, "the same command resumes without a second reservation")
		require.Empty(t, again.Pools)

		out, err = SettleMove(r, t0)
		require.NoError(t, err)
		apply(w, &r, out)
		require.Equal(t, Object{Pool: "nfs1", Bytes: 100 * gib, Held: true}, w.nodes["n1"][obj])
		require.Equal(t, int64(0), w.pools["ceph-a"].Reserved)
		require.Equal(t, []Cleanup{{Object: obj, Reason: CleanupMoved, CommandID: "m1", Bytes: 100 * gib, Since: t0}}, w.pools["ceph-a"].Cleanups)
		w.requireNoDrift(t)

		replay, err := SettleMove(r, t0)
		require.NoError(t, err)
		require.True(t, replay.Done, "a replayed settle changes nothing")

		cleaned, dropped := DropCleanup(w.pools["ceph-a"], obj)
		require.True(t, dropped)
		require.Empty(t, cleaned.Cleanups)
		_, dropped = DropCleanup(cleaned, obj)
		require.False(t, dropped)
	})
	t.Run("an aborted move releases the target and leaves a cleanup for the partial copy", func(t *testing.T) {
		w, r := start()
		out, err := StartMove(r)
		require.NoError(t, err)
		apply(w, &r, out)
		out, err = AbortMove(r, t0)
		require.NoError(t, err)
		apply(w, &r, out)
		require.Equal(t, Object{Pool: "ceph-a", Bytes: 100 * gib, Held: true}, w.nodes["n1"][obj])
		require.Equal(t, int64(0), w.pools["nfs1"].Reserved)
		require.Len(t, w.pools["nfs1"].Cleanups, 1)
		w.requireNoDrift(t)
		replay, err := AbortMove(r, t0)
		require.NoError(t, err)
		require.True(t, replay.Done)

		r.CommandID = "m2"
		_, err = StartMove(r)
		require.Equal(t, types.Unavailable, types.ClassOf(err), "the target still keeps the earlier copy")
		require.ErrorContains(t, err, "still keeps an earlier copy")
	})
	refusals := []struct {
		name  string
		setup func(w *world, r *MoveRequest)
		class types.Class
		err   string
	}{
		{"an object held by another node is refused", func(w *world, r *MoveRequest) { r.Node = "n2" }, types.FailedPrecondition, "held by node n1"},
		{"a target without room is refused", func(w *world, r *MoveRequest) { w.pools["nfs1"].Capacity = ptr(50 * gib) }, types.ResourceExhausted, "pool nfs1 has 50 GiB free, 100 GiB asked"},
		{"a target without capacity is refused", func(w *world, r *MoveRequest) { w.pools["nfs1"].Capacity = nil }, types.FailedPrecondition, "no capacity set"},
		{"a lost target is refused", func(w *world, r *MoveRequest) { w.pools["nfs1"].LostAt = &t0 }, types.FailedPrecondition, "declared lost"},
		{"an unknown target is not found", func(w *world, r *MoveRequest) { r.To = "ghost" }, types.NotFound, "never declared"},
		{"a node that does not reach both pools is refused", func(w *world, r *MoveRequest) { r.Reach = map[string]bool{"ceph-a": true} }, types.FailedPrecondition, "does not reach both"},
		{"an object moving under another command answers unavailable", func(w *world, r *MoveRequest) {
			o := r.Objects[obj]
			o.MovingTo, o.MoveCommandID = "nfs1", "other"
			r.Objects[obj] = o
		}, types.Unavailable, "already moving"},
		{"an unknown object is not found", func(w *world, r *MoveRequest) { r.ID = oid(99) }, types.NotFound, "does not exist"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			w, r := start()
			tc.setup(w, &r)
			_, err := StartMove(r)
			require.Equal(t, tc.class, types.ClassOf(err), "%v", err)
			require.ErrorContains(t, err, tc.err)
		})
	}
	t.Run("an unheld object may be moved by any node reaching both pools", func(t *testing.T) {
		w, r := start()
		w.nodes["n1"], _, _ = Isolate(w.nodes["n1"])
		r.Objects, r.Node, r.Reach = w.nodes["n1"], "n2", w.reach["n2"]
		_, err := StartMove(r)
		require.NoError(t, err)
	})
	t.Run("an object already in the target is answered at once", func(t *testing.T) {
		_, r := start()
		r.To = "ceph-a"
		out, err := StartMove(r)
		require.NoError(t, err)
		require.True(t, out.Done)
	})
	t.Run("every step refuses an object found in another pool than the move began with", func(t *testing.T) {
		// The command found the object in pool p3; it has since moved to
		// ceph-a (another command), and a move to nfs1 under this
		// command's id was started from there meanwhile.
		_, r := start()
		r.From = "p3"
		steps := map[string]func(MoveRequest) (MoveOutcome, error){
			"start":  StartMove,
			"settle": func(r MoveRequest) (MoveOutcome, error) { return SettleMove(r, t0) },
			"abort":  func(r MoveRequest) (MoveOutcome, error) { return AbortMove(r, t0) },
		}
		for name, step := range steps {
			for _, moving := range []bool{false, true} {
				if !moving && name != "start" {
					continue // settle and abort of an unmoving object are answered before the pool matters
				}
				o := r.Objects.Clone()
				if moving {
					o[obj] = Object{Pool: "ceph-a", Bytes: 100 * gib, Held: true, MovingTo: "nfs1", MoveCommandID: "m1"}
				}
				rr := r
				rr.Objects = o
				out, err := step(rr)
				require.Equal(t, types.Aborted, types.ClassOf(err), "%s (moving %v): %v", name, moving, err)
				require.EqualError(t, err, "object "+obj+" moved to pool ceph-a after this move found it in pool p3; run the move again")
				require.False(t, out.Done)
				require.Empty(t, out.Pools, "nothing to store")
			}
		}
	})
	t.Run("a settle of a move that is not in progress is refused", func(t *testing.T) {
		_, r := start()
		_, err := SettleMove(r, t0)
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
	})
}

package pool

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// world is a store in memory: pool records and each node's objects.
type world struct {
	pools    map[string]*Record
	nodes    map[string]Objects
	isolated map[string]bool
	reach    map[string]map[string]bool
}

// newWorld: n1 and n2 reach ceph-a (300 GiB) and nfs1 (1 TiB); n3 reaches
// only nfs1.
func newWorld() *world {
	both := func() map[string]bool { return map[string]bool{"ceph-a": true, "nfs1": true} }
	return &world{
		pools: map[string]*Record{
			"ceph-a": {ID: "ceph-a", Capacity: ptr(300 * gib), DeclaredAt: t0},
			"nfs1":   {ID: "nfs1", Capacity: ptr(1024 * gib), DeclaredAt: t0},
		},
		nodes:    map[string]Objects{"n1": {}, "n2": {}, "n3": {}},
		isolated: map[string]bool{},
		reach:    map[string]map[string]bool{"n1": both(), "n2": both(), "n3": {"nfs1": true}},
	}
}

func oid(i int) string { return fmt.Sprintf("v-%016x", i) }

// usage runs one usage write on node as the verb would, storing its
// outcome when admitted. from names the nodes whose records an attach
// reads.
func (w *world) usage(node string, ch Change, restore bool, attaching []string, from ...string) (Outcome, error) {
	wr := Write{Node: node, Isolated: w.isolated[node], Reach: w.reach[node], Before: w.nodes[node], Change: ch,
		Attaching: attaching, From: map[string]string{}, Others: map[string]Objects{}, Pools: w.pools, Restore: restore}
	for _, n := range from {
		wr.Others[n] = w.nodes[n]
	}
	if len(from) == 1 {
		for _, id := range attaching {
			wr.From[id] = from[0]
		}
	}
	out, err := Admit(wr)
	if err != nil {
		return out, err
	}
	w.nodes[node] = out.After
	for n, o := range out.Others {
		w.nodes[n] = o
	}
	for p, rec := range out.Pools {
		w.pools[p] = rec
	}
	return out, nil
}

func (w *world) requireNoDrift(t *testing.T) {
	t.Helper()
	for _, d := range Check(w.pools, w.nodes) {
		require.False(t, d.Drifted(), "pool %s drifted: %+v", d.Pool, d)
	}
}

func incr(objs map[string]Amount) Change { return Change{Mode: Incr, Objects: objs} }
func decr(objs map[string]Amount) Change { return Change{Mode: Decr, Objects: objs} }
func abs(objs map[string]Amount) Change  { return Change{Mode: Absolute, Objects: objs} }

func TestAdmitPlacesUntilThePoolIsFull(t *testing.T) {
	t.Run("three 100 GiB objects land through two nodes and the fourth is refused naming the pool", func(t *testing.T) {
		w := newWorld()
		for i, node := range []string{"n1", "n2", "n1"} {
			_, err := w.usage(node, incr(map[string]Amount{oid(i): {"ceph-a", 100 * gib}}), false, nil)
			require.NoError(t, err)
		}
		require.Equal(t, 300*gib, w.pools["ceph-a"].Reserved)
		require.Equal(t, int64(3), w.pools["ceph-a"].Objects)
		_, err := w.usage("n2", incr(map[string]Amount{oid(9): {"ceph-a", 100 * gib}}), false, nil)
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
		require.EqualError(t, err, "pool ceph-a has 0 B free, 100 GiB asked (0 bytes free, 107374182400 asked)")
		require.NotContains(t, w.nodes["n2"], oid(9), "nothing of the refused write is stored")
		w.requireNoDrift(t)
	})
	t.Run("the refusal says what is free and what is asked in human units and bytes", func(t *testing.T) {
		w := newWorld()
		w.pools["ceph-a"].Reserved = 100 * gib
		w.nodes["n3"] = Objects{oid(1): {Pool: "ceph-a", Bytes: 100 * gib, Held: false}}
		_, err := w.usage("n1", incr(map[string]Amount{oid(2): {"ceph-a", 150 * gib}, oid(3): {"ceph-a", 150 * gib}}), false, nil)
		require.EqualError(t, err, "pool ceph-a has 200 GiB free, 300 GiB asked (214748364800 bytes free, 322122547200 asked)")
	})
}

func TestAdmitDerivesDeltas(t *testing.T) {
	// Every case starts from n1 holding oid(1) (100 GiB in ceph-a) and n2
	// holding oid(2) (50 GiB in ceph-a), so the counters read 150 GiB.
	cases := []struct {
		name       string
		node       string
		change     Change
		restore    bool
		capacity   int64
		wantObjs   Objects
		wantDeltas map[string]Delta
	}{
		{"an incr of a new object creates it held and reserves its bytes", "n1",
			incr(map[string]Amount{oid(3): {"nfs1", 10 * gib}}), false, 0,
			Objects{oid(1): {Pool: "ceph-a", Bytes: 100 * gib, Held: true}, oid(3): {Pool: "nfs1", Bytes: 10 * gib, Held: true}},
			map[string]Delta{"nfs1": {10 * gib, 1}}},
		{"an incr of a known object grows it", "n1",
			incr(map[string]Amount{oid(1): {"ceph-a", 20 * gib}}), false, 0,
			Objects{oid(1): {Pool: "ceph-a", Bytes: 120 * gib, Held: true}},
			map[string]Delta{"ceph-a": {20 * gib, 0}}},
		{"a negative incr shrinks an object", "n1",
			incr(map[string]Amount{oid(1): {"ceph-a", -30 * gib}}), false, 0,
			Objects{oid(1): {Pool: "ceph-a", Bytes: 70 * gib, Held: true}},
			map[string]Delta{"ceph-a": {-30 * gib, 0}}},
		{"a decr of part of an object keeps the rest", "n1",
			decr(map[string]Amount{oid(1): {"ceph-a", 40 * gib}}), false, 0,
			Objects{oid(1): {Pool: "ceph-a", Bytes: 60 * gib, Held: true}},
			map[string]Delta{"ceph-a": {-40 * gib, 0}}},
		{"a decr to 0 deletes the object and releases its bytes", "n1",
			decr(map[string]Amount{oid(1): {"ceph-a", 100 * gib}}), false, 0,
			Objects{}, map[string]Delta{"ceph-a": {-100 * gib, -1}}},
		{"a decr of an object this node does not have is a no-op", "n1",
			decr(map[string]Amount{oid(2): {"ceph-a", 50 * gib}}), false, 0,
			Objects{oid(1): {Pool: "ceph-a", Bytes: 100 * gib, Held: true}}, map[string]Delta{}},
		{"an absolute write replaces this node's objects and moves only by its own diff", "n1",
			abs(map[string]Amount{oid(4): {"ceph-a", 10 * gib}}), false, 0,
			Objects{oid(4): {Pool: "ceph-a", Bytes: 10 * gib, Held: true}},
			map[string]Delta{"ceph-a": {-90 * gib, 0}}},
		{"an absolute restore of nothing releases this node's objects only", "n1",
			abs(nil), true, 0, Objects{}, map[string]Delta{"ceph-a": {-100 * gib, -1}}},
		{"an absolute restore may exceed the capacity: a rollback never fails", "n1",
			abs(map[string]Amount{oid(1): {"ceph-a", 100 * gib}, oid(5): {"ceph-a", 500 * gib}}), true, 0,
			Objects{oid(1): {Pool: "ceph-a", Bytes: 100 * gib, Held: true}, oid(5): {Pool: "ceph-a", Bytes: 500 * gib, Held: true}},
			map[string]Delta{"ceph-a": {500 * gib, 1}}},
		{"an absolute write that names a known object in another pool replaces it", "n1",
			abs(map[string]Amount{oid(1): {"nfs1", 100 * gib}}), false, 0,
			Objects{oid(1): {Pool: "nfs1", Bytes: 100 * gib, Held: true}},
			map[string]Delta{"ceph-a": {-100 * gib, -1}, "nfs1": {100 * gib, 1}}},
		{"an absolute write of 0 bytes drops the object", "n1",
			abs(map[string]Amount{oid(1): {"ceph-a", 0}}), false, 0,
			Objects{}, map[string]Delta{"ceph-a": {-100 * gib, -1}}},
		{"a shrink passes while the pool is over its capacity", "n2",
			incr(map[string]Amount{oid(2): {"ceph-a", -10 * gib}}), false, 100 * gib,
			Objects{oid(2): {Pool: "ceph-a", Bytes: 40 * gib, Held: true}},
			map[string]Delta{"ceph-a": {-10 * gib, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.nodes["n1"] = Objects{oid(1): {Pool: "ceph-a", Bytes: 100 * gib, Held: true}}
			w.nodes["n2"] = Objects{oid(2): {Pool: "ceph-a", Bytes: 50 * gib, Held: true}}
			w.pools["ceph-a"].Reserved, w.pools["ceph-a"].Objects = 150*gib, 2
			if tc.capacity != 0 {
				w.pools["ceph-a"].Capacity = ptr(tc.capacity)
			}
			out, err := w.usage(tc.node, tc.change, tc.restore, nil)
			require.NoError(t, err)
			require.Equal(t, tc.wantObjs, out.After)
			require.Equal(t, tc.wantDeltas, out.Deltas)
			require.Len(t, out.Pools, len(tc.wantDeltas), "only pools with a delta are rewritten")
			w.requireNoDrift(t)
		})
	}
}

func TestAdmitRefusals(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(w *world)
		node    string
		change  Change
		restore bool
		class   types.Class
		err     string
	}{
		{"an absolute write above the capacity is refused unless it is a restore", nil, "n1",
			abs(map[string]Amount{oid(1): {"ceph-a", 400 * gib}}), false, types.ResourceExhausted, "pool ceph-a has 300 GiB free, 400 GiB asked"},
		{"growth on an isolated node is refused", func(w *world) { w.isolated["n1"] = true }, "n1",
			incr(map[string]Amount{oid(1): {"ceph-a", gib}}), false, types.FailedPrecondition, "node is isolated"},
		{"growth into a lost pool is refused", func(w *world) { w.pools["ceph-a"].LostAt = &t0 }, "n1",
			incr(map[string]Amount{oid(1): {"ceph-a", gib}}), false, types.FailedPrecondition, "pool ceph-a was declared lost"},
		{"growth into a pool without capacity is refused", func(w *world) { w.pools["ceph-a"].Capacity = nil }, "n1",
			incr(map[string]Amount{oid(1): {"ceph-a", gib}}), false, types.FailedPrecondition, "pool ceph-a has no capacity set"},
		{"growth through an unavailable attachment is refused", func(w *world) { w.reach["n1"]["ceph-a"] = false }, "n1",
			incr(map[string]Amount{oid(1): {"ceph-a", gib}}), false, types.FailedPrecondition, "attachment to pool ceph-a is unavailable"},
		{"growth into a pool the node does not declare is refused", nil, "n3",
			incr(map[string]Amount{oid(1): {"ceph-a", gib}}), false, types.FailedPrecondition, "does not declare pool ceph-a"},
		{"growth into a pool with no record is refused", nil, "n1",
			incr(map[string]Amount{oid(1): {"ghost", gib}}), false, types.FailedPrecondition, "pool ghost is not declared by any node"},
		{"an incr naming another pool than the object's is refused", func(w *world) {
			w.nodes["n1"] = Objects{oid(1): {Pool: "nfs1", Bytes: gib, Held: true}}
		}, "n1", incr(map[string]Amount{oid(1): {"ceph-a", gib}}), false, types.InvalidArgument, "lives in pool nfs1, not ceph-a"},
		{"a shrink below nothing is refused", func(w *world) {
			w.nodes["n1"] = Objects{oid(1): {Pool: "nfs1", Bytes: gib, Held: true}}
		}, "n1", incr(map[string]Amount{oid(1): {"nfs1", -2 * gib}}), false, types.InvalidArgument, "less than nothing"},
		{"a new object paid for by a shrink still needs the pool declared on the node", func(w *world) {
			w.nodes["n3"] = Objects{oid(1): {Pool: "ceph-a", Bytes: 10 * gib, Held: true}}
		}, "n3", incr(map[string]Amount{oid(1): {"ceph-a", -5 * gib}, oid(2): {"ceph-a", gib}}), false, types.FailedPrecondition, "does not declare pool ceph-a"},
		{"a new object on an isolated node is refused even when the write frees more", func(w *world) {
			w.nodes["n1"] = Objects{oid(1): {Pool: "ceph-a", Bytes: 10 * gib, Held: true}}
			w.isolated["n1"] = true
		}, "n1", incr(map[string]Amount{oid(1): {"ceph-a", -5 * gib}, oid(2): {"ceph-a", gib}}), false, types.FailedPrecondition, "node is isolated"},
		{"an amount beyond 8 PiB is refused", nil, "n1",
			incr(map[string]Amount{oid(1): {"ceph-a", 1 << 60}}), false, types.InvalidArgument, "out of range"},
		{"growth of an object past 8 PiB is refused", func(w *world) {
			w.pools["ceph-a"].Capacity = ptr(int64(1) << 53)
			w.nodes["n1"] = Objects{oid(1): {Pool: "ceph-a", Bytes: 1 << 52, Held: true}}
		}, "n1", incr(map[string]Amount{oid(1): {"ceph-a", 1<<52 + 1}}), false, types.InvalidArgument, "out of range"},
		{"a negative decr is refused", nil, "n1",
			decr(map[string]Amount{oid(1): {"ceph-a", -1}}), false, types.InvalidArgument, "negative"},
		{"a bad object id is refused", nil, "n1",
			incr(map[string]Amount{"v-1": {"ceph-a", 1}}), false, types.InvalidArgument, "object id"},
		{"growing a moving object answers unavailable", func(w *world) {
			w.nodes["n1"] = Objects{oid(1): {Pool: "ceph-a", Bytes: gib, Held: true, MovingTo: "nfs1", MoveCommandID: "m1"}}
		}, "n1", incr(map[string]Amount{oid(1): {"ceph-a", gib}}), false, types.Unavailable, "is moving to pool nfs1 (command m1)"},
		{"deleting a moving object answers unavailable", func(w *world) {
			w.nodes["n1"] = Objects{oid(1): {Pool: "ceph-a", Bytes: gib, Held: true, MovingTo: "nfs1", MoveCommandID: "m1"}}
		}, "n1", decr(map[string]Amount{oid(1): {"ceph-a", gib}}), false, types.Unavailable, "is moving"},
		{"an absolute write dropping a moving object answers unavailable", func(w *world) {
			w.nodes["n1"] = Objects{oid(1): {Pool: "ceph-a", Bytes: gib, Held: true, MovingTo: "nfs1", MoveCommandID: "m1"}}
		}, "n1", abs(nil), false, types.Unavailable, "is moving"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			if tc.setup != nil {
				tc.setup(w)
			}
			before := fmt.Sprint(w.nodes, w.pools["ceph-a"], w.pools["nfs1"])
			_, err := w.usage(tc.node, tc.change, tc.restore, nil)
			require.Equal(t, tc.class, types.ClassOf(err), "%v", err)
			require.ErrorContains(t, err, tc.err)
			require.Equal(t, before, fmt.Sprint(w.nodes, w.pools["ceph-a"], w.pools["nfs1"]), "a refusal changes nothing")
		})
	}
}

func TestAttach(t *testing.T) {
	const obj = "v-00000000000000aa"
	start := func() *world {
		w := newWorld()
		w.nodes["n1"] = Objects{obj: {Pool: "ceph-a", Bytes: 100 * gib, Held: false}}
		w.pools["ceph-a"].Reserved, w.pools["ceph-a"].Objects = 100*gib, 1
		w.isolated["n1"] = true
		return w
	}
	attach := func(w *world, node string, bytes int64) (Outcome, error) {
		return w.usage(node, incr(map[string]Amount{obj: {"ceph-a", bytes}}), false, []string{obj}, "n1")
	}
	t.Run("an object released by an isolation moves to the attaching node with the reservation unchanged", func(t *testing.T) {
		w := start()
		out, err := attach(w, "n2", 100*gib)
		require.NoError(t, err)
		require.Equal(t, Objects{obj: {Pool: "ceph-a", Bytes: 100 * gib, Held: true, AttachedFrom: "n1"}}, w.nodes["n2"])
		require.Equal(t, Objects{}, w.nodes["n1"], "the old holder's record loses it in the same outcome")
		require.Equal(t, map[string]Objects{"n1": {}}, out.Others)
		require.Empty(t, out.Deltas)
		require.Empty(t, out.Pools, "no pool record is rewritten")
		require.Equal(t, 100*gib, w.pools["ceph-a"].Reserved)
		w.requireNoDrift(t)
	})
	t.Run("the dead node's later decr of the attached object is a no-op, never a second release", func(t *testing.T) {
		w := start()
		_, err := attach(w, "n2", 100*gib)
		require.NoError(t, err)
		out, err := w.usage("n1", decr(map[string]Amount{obj: {"ceph-a", 100 * gib}}), false, nil)
		require.NoError(t, err)
		require.Empty(t, out.Deltas)
		require.Equal(t, 100*gib, w.pools["ceph-a"].Reserved)
		require.Contains(t, w.nodes["n2"], obj)
		w.requireNoDrift(t)
	})
	t.Run("the dead node's decr of an object still in its ledger deletes it and releases its bytes", func(t *testing.T) {
		w := start()
		_, err := w.usage("n1", decr(map[string]Amount{obj: {"ceph-a", 100 * gib}}), false, nil)
		require.NoError(t, err)
		require.Equal(t, int64(0), w.pools["ceph-a"].Reserved)
		require.Equal(t, int64(0), w.pools["ceph-a"].Objects)
		w.requireNoDrift(t)
	})
	t.Run("core's rollback of the attaching deploy gives the object back to its donor, unheld and still reserved", func(t *testing.T) {
		w := start()
		_, err := attach(w, "n2", 100*gib)
		require.NoError(t, err)
		rollback := abs(map[string]Amount{})
		require.Equal(t, []string{"n1"}, Donors(w.nodes["n2"], rollback))
		out, err := w.usage("n2", rollback, true, nil, "n1")
		require.NoError(t, err)
		require.Empty(t, out.After)
		require.Equal(t, Objects{obj: {Pool: "ceph-a", Bytes: 100 * gib}}, w.nodes["n1"])
		require.Empty(t, out.Deltas)
		require.Equal(t, 100*gib, w.pools["ceph-a"].Reserved)
		w.requireNoDrift(t)
		_, err = attach(w, "n2", 100*gib)
		require.NoError(t, err, "the failover can be tried again")
	})
	t.Run("a rollback whose donor record is gone keeps the object here, unheld", func(t *testing.T) {
		w := start()
		_, err := attach(w, "n2", 100*gib)
		require.NoError(t, err)
		delete(w.nodes, "n1")
		out, err := w.usage("n2", abs(map[string]Amount{}), true, nil)
		require.NoError(t, err)
		require.Equal(t, Objects{obj: {Pool: "ceph-a", Bytes: 100 * gib}}, out.After)
		require.Empty(t, out.Deltas)
		w.requireNoDrift(t)
	})
	t.Run("a decrease of an attached object still deletes it: only a restore gives objects back", func(t *testing.T) {
		w := start()
		_, err := attach(w, "n2", 100*gib)
		require.NoError(t, err)
		require.Empty(t, Donors(w.nodes["n2"], decr(map[string]Amount{obj: {"ceph-a", 100 * gib}})))
		_, err = w.usage("n2", decr(map[string]Amount{obj: {"ceph-a", 100 * gib}}), false, nil, "n1")
		require.NoError(t, err)
		require.Empty(t, w.nodes["n2"])
		require.Empty(t, w.nodes["n1"])
		require.Zero(t, w.pools["ceph-a"].Reserved)
		w.requireNoDrift(t)
	})
	t.Run("a restore that keeps the attached object names no donor and leaves it held", func(t *testing.T) {
		w := start()
		_, err := attach(w, "n2", 100*gib)
		require.NoError(t, err)
		keep := abs(map[string]Amount{obj: {"ceph-a", 100 * gib}})
		require.Empty(t, Donors(w.nodes["n2"], keep))
		out, err := w.usage("n2", keep, true, nil)
		require.NoError(t, err)
		require.True(t, out.After[obj].Held)
		w.requireNoDrift(t)
	})
	t.Run("core's rollback of a node taking its own object back leaves the object unheld, as its snapshot has it", func(t *testing.T) {
		w := start()
		w.isolated["n1"] = false
		_, err := w.usage("n1", incr(map[string]Amount{obj: {"ceph-a", 0}}), false, []string{obj})
		require.NoError(t, err)
		require.True(t, w.nodes["n1"][obj].Held)
		rollback := Change{Mode: Absolute, Objects: map[string]Amount{obj: {"ceph-a", 100 * gib}}, Unheld: map[string]bool{obj: true}}
		out, err := w.usage("n1", rollback, true, nil)
		require.NoError(t, err)
		require.Equal(t, Objects{obj: {Pool: "ceph-a", Bytes: 100 * gib}}, out.After)
		require.Empty(t, out.Deltas)
		w.requireNoDrift(t)
		_, err = attach(w, "n2", 100*gib)
		require.NoError(t, err, "another node may attach it again")
	})
	t.Run("a restore whose snapshot has the object held never holds an object isolated since", func(t *testing.T) {
		w := start()
		out, err := w.usage("n1", abs(map[string]Amount{obj: {"ceph-a", 100 * gib}}), true, nil)
		require.NoError(t, err)
		require.False(t, out.After[obj].Held)
	})
	t.Run("a restore recreating an object its snapshot has unheld recreates it unheld", func(t *testing.T) {
		w := newWorld()
		out, err := w.usage("n1", Change{Mode: Absolute, Objects: map[string]Amount{obj: {"ceph-a", gib}}, Unheld: map[string]bool{obj: true}}, true, nil)
		require.NoError(t, err)
		require.Equal(t, Objects{obj: {Pool: "ceph-a", Bytes: gib}}, out.After)
		require.Equal(t, map[string]Delta{"ceph-a": {gib, 1}}, out.Deltas)
		w.requireNoDrift(t)
	})
	t.Run("an attach given as an absolute write also moves the object", func(t *testing.T) {
		w := start()
		_, err := w.usage("n2", abs(map[string]Amount{obj: {"ceph-a", 100 * gib}}), false, []string{obj}, "n1")
		require.NoError(t, err)
		require.True(t, w.nodes["n2"][obj].Held)
		require.Empty(t, w.nodes["n1"])
		w.requireNoDrift(t)
	})
	t.Run("a node back with a new incarnation takes its own unheld object back", func(t *testing.T) {
		w := start()
		w.isolated["n1"] = false
		out, err := w.usage("n1", incr(map[string]Amount{obj: {"ceph-a", 100 * gib}}), false, []string{obj})
		require.NoError(t, err)
		require.True(t, out.After[obj].Held)
		require.Empty(t, out.Deltas)
		w.requireNoDrift(t)
	})
	t.Run("a restore naming an object another node's workload holds leaves it there", func(t *testing.T) {
		w := start()
		_, err := attach(w, "n2", 100*gib)
		require.NoError(t, err)
		out, err := w.usage("n1", abs(map[string]Amount{obj: {"ceph-a", 100 * gib}}), true, nil, "n2")
		require.NoError(t, err)
		require.Empty(t, out.After)
		require.True(t, w.nodes["n2"][obj].Held)
		require.Empty(t, out.Deltas)
		w.requireNoDrift(t)
	})
	t.Run("a restore of an unheld object found on another node takes it back", func(t *testing.T) {
		w := start()
		w.isolated["n1"] = false
		out, err := w.usage("n2", abs(map[string]Amount{obj: {"ceph-a", 100 * gib}}), true, nil, "n1")
		require.NoError(t, err)
		require.True(t, out.After[obj].Held)
		require.Empty(t, w.nodes["n1"])
		w.requireNoDrift(t)
	})
	t.Run("a restore of an attach whose object exists nowhere recreates it and reserves it again", func(t *testing.T) {
		w := start()
		w.nodes["n1"] = Objects{}
		w.pools["ceph-a"].Reserved, w.pools["ceph-a"].Objects = 0, 0
		out, err := w.usage("n2", abs(map[string]Amount{obj: {"ceph-a", 100 * gib}}), true, []string{obj}, "n1")
		require.NoError(t, err)
		require.Equal(t, map[string]Delta{"ceph-a": {100 * gib, 1}}, out.Deltas)
		w.requireNoDrift(t)
	})
	refusals := []struct {
		name  string
		setup func(w *world)
		node  string
		bytes int64
		class types.Class
		err   string
	}{
		{"an object held by another node is refused naming the holder", func(w *world) {
			o := w.nodes["n1"][obj]
			o.Held = true
			w.nodes["n1"][obj] = o
		}, "n2", 100 * gib, types.FailedPrecondition, "object " + obj + " is held by node n1"},
		{"a moving object answers unavailable", func(w *world) {
			o := w.nodes["n1"][obj]
			o.MovingTo, o.MoveCommandID = "nfs1", "m1"
			w.nodes["n1"][obj] = o
		}, "n2", 100 * gib, types.Unavailable, "is moving to pool nfs1"},
		{"a lost object is refused", func(w *world) {
			w.pools["ceph-a"].LostAt, w.pools["ceph-a"].Reserved = &t0, 0
		}, "n2", 100 * gib, types.FailedPrecondition, "is LOST"},
		{"an object no longer where the plan found it is a stale plan, aborted", func(w *world) { w.nodes["n1"] = Objects{} }, "n2", 100 * gib, types.Aborted,
			"object " + obj + " is no longer in node n1's record, where the deploy's plan found it (attached elsewhere or deleted since); plan the deploy again"},
		{"an attach on an isolated node is refused", func(w *world) { w.isolated["n2"] = true }, "n2", 100 * gib, types.FailedPrecondition, "node is isolated"},
		{"an attach on a node that does not reach the pool is refused", nil, "n3", 100 * gib, types.FailedPrecondition, "does not declare"},
		{"an attach through an unavailable attachment is refused", func(w *world) { w.reach["n2"]["ceph-a"] = false }, "n2", 100 * gib, types.FailedPrecondition, "unavailable"},
		{"an attach whose plan disagrees with the object's size is refused", nil, "n2", 50 * gib, types.FailedPrecondition, "has 107374182400 bytes, the plan says 53687091200"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			w := start()
			if tc.setup != nil {
				tc.setup(w)
			}
			_, err := attach(w, tc.node, tc.bytes)
			require.Equal(t, tc.class, types.ClassOf(err), "%v", err)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestIsolateAndLoss(t *testing.T) {
	t.Run("isolation unholds every object, keeps them reserving, and counts what it released once", func(t *testing.T) {
		objs := Objects{oid(1): {Pool: "ceph-a", Bytes: 10, Held: true}, oid(2): {Pool: "nfs1", Bytes: 5, Held: true}}
		after, n, bytes := Isolate(objs)
		require.Equal(t, 2, n)
		require.Equal(t, int64(15), bytes)
		require.False(t, after[oid(1)].Held)
		require.True(t, objs[oid(1)].Held, "the input is not changed in place")
		require.Empty(t, Deltas([]Objects{objs}, []Objects{after}), "isolation moves no counter")
		_, n, bytes = Isolate(after)
		require.Zero(t, n)
		require.Zero(t, bytes)
	})
	t.Run("a pool is declared lost only when every member is isolated", func(t *testing.T) {
		w := newWorld()
		_, _, err := DeclareLost(w.pools["ceph-a"], []Member{{"n1", true}, {"n2", false}, {"n0", false}}, w.nodes, t0)
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
		require.EqualError(t, err, "pool ceph-a still has members that are not isolated: n0, n2")
	})
	t.Run("declaring lost releases the reservation, bumps the version and counts objects and cleanups", func(t *testing.T) {
		w := newWorld()
		w.nodes["n1"] = Objects{oid(1): {Pool: "ceph-a", Bytes: 100 * gib}, oid(2): {Pool: "nfs1", Bytes: gib}}
		w.nodes["n2"] = Objects{oid(3): {Pool: "ceph-a", Bytes: 50 * gib}}
		rec := w.pools["ceph-a"]
		rec.Reserved, rec.Objects, rec.Version = 150*gib, 2, 4
		w.pools["nfs1"].Reserved, w.pools["nfs1"].Objects = gib, 1
		w.requireNoDrift(t)
		rec.Cleanups = []Cleanup{{Object: oid(7), Reason: CleanupMoved, Bytes: 1, Since: t0}}
		lost, counts, err := DeclareLost(rec, []Member{{"n1", true}, {"n2", true}}, w.nodes, t0)
		require.NoError(t, err)
		require.Equal(t, LostCounts{LostVolumes: 2, DiscardedCleanups: 1}, counts)
		require.Equal(t, &t0, lost.LostAt)
		require.Equal(t, int64(0), lost.Reserved)
		require.Equal(t, int64(5), lost.Version)
		require.Empty(t, lost.Cleanups)
		require.Equal(t, "LOST", ObjectState(w.nodes["n1"][oid(1)], lost))
		w.pools["ceph-a"] = lost
		w.requireNoDrift(t)

		_, _, err = DeclareLost(lost, nil, w.nodes, t0)
		require.ErrorContains(t, err, "already declared lost")

		out, err := w.usage("n1", decr(map[string]Amount{oid(1): {"ceph-a", 100 * gib}}), false, nil)
		require.NoError(t, err)
		require.NotContains(t, out.After, oid(1), "a decr deletes a lost object")
		require.NotContains(t, out.Pools, "ceph-a", "without touching the counter")
		_, err = w.usage("n2", incr(map[string]Amount{oid(3): {"ceph-a", gib}}), false, nil)
		require.ErrorContains(t, err, "declared lost", "growing a lost object is refused")
		_, err = w.usage("n2", abs(map[string]Amount{oid(3): {"ceph-a", 70 * gib}}), true, nil)
		require.NoError(t, err, "a restore passes")
		require.Equal(t, int64(0), w.pools["ceph-a"].Reserved, "and a lost pool reserves nothing")
		w.requireNoDrift(t)
	})
	t.Run("a pool without members can be declared lost", func(t *testing.T) {
		_, counts, err := DeclareLost(&Record{ID: "p", DeclaredAt: t0}, nil, nil, t0)
		require.NoError(t, err)
		require.Equal(t, LostCounts{}, counts)
	})
}

func TestSetCapacity(t *testing.T) {
	lost := &Record{ID: "p", DeclaredAt: t0, Version: 2, LostAt: &t0}
	fresh := &Record{ID: "p", DeclaredAt: t0, Version: 2, Reserved: 500}
	cases := []struct {
		name      string
		rec       *Record
		size      int64
		ifVersion *int64
		class     types.Class
		err       string
		version   int64
	}{
		{"the capacity is set and the version advances", fresh, 1000, ptr(int64(2)), "", "", 3},
		{"a capacity below what is reserved is set and evicts nothing", fresh, 100, ptr(int64(2)), "", "", 3},
		{"a missing if-version is refused", fresh, 1000, nil, types.InvalidArgument, "--if-version is mandatory", 0},
		{"a stale if-version is aborted", fresh, 1000, ptr(int64(1)), types.Aborted, "at version 2, not 1", 0},
		{"a size of 0 is refused", fresh, 0, ptr(int64(2)), types.InvalidArgument, "out of range", 0},
		{"a lost pool is refused", lost, 1000, ptr(int64(2)), types.FailedPrecondition, "declared lost", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetCapacity(tc.rec, tc.size, tc.ifVersion)
			if tc.err != "" {
				require.Equal(t, tc.class, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.size, *got.Capacity)
			require.Equal(t, tc.version, got.Version)
			require.Equal(t, tc.rec.Reserved, got.Reserved)
			require.Nil(t, tc.rec.Capacity, "the input is not changed in place")
		})
	}
	t.Run("setting the capacity the pool already has keeps the version", func(t *testing.T) {
		rec := &Record{ID: "p", DeclaredAt: t0, Version: 3, Capacity: ptr(int64(10))}
		got, err := SetCapacity(rec, 10, ptr(int64(3)))
		require.NoError(t, err)
		require.Equal(t, int64(3), got.Version)
	})
}

func TestCheckAndRepair(t *testing.T) {
	pools := map[string]*Record{
		"ceph-a": {ID: "ceph-a", Reserved: 100, Objects: 1, DeclaredAt: t0},
		"nfs1":   {ID: "nfs1", Reserved: 70, Objects: 2, DeclaredAt: t0},
	}
	nodes := map[string]Objects{
		"n1": {oid(1): {Pool: "ceph-a", Bytes: 60, Held: true}},
		"n2": {oid(2): {Pool: "ceph-a", Bytes: 40}, oid(3): {Pool: "nfs1", Bytes: 30, MovingTo: "ceph-a", MoveCommandID: "m"}},
		"n3": {oid(4): {Pool: "ghost", Bytes: 5}},
	}
	got := Check(pools, nodes)
	t.Run("every pool is recomputed from the node records, moving-in bytes included", func(t *testing.T) {
		require.Equal(t, []Drift{
			{Pool: "ceph-a", Reserved: 100, Recomputed: 130, DriftBytes: -30, Objects: 1, RecomputedObjects: 2},
			{Pool: "ghost", Recomputed: 5, DriftBytes: -5, RecomputedObjects: 1, NoRecord: true},
			{Pool: "nfs1", Reserved: 70, Recomputed: 30, DriftBytes: 40, Objects: 2, RecomputedObjects: 1},
		}, got)
	})
	t.Run("repair writes the recomputed counters", func(t *testing.T) {
		fixed := Repair(pools["ceph-a"], got[0])
		require.Equal(t, int64(130), fixed.Reserved)
		require.Equal(t, int64(2), fixed.Objects)
		require.Equal(t, int64(100), pools["ceph-a"].Reserved, "the input is not changed in place")
	})
}

func TestWorkedFlows(t *testing.T) {
	t.Run("core's replay of node A's before leaves the share B placed meanwhile", func(t *testing.T) {
		w := newWorld()
		_, err := w.usage("n1", incr(map[string]Amount{oid(1): {"ceph-a", 100 * gib}}), false, nil)
		require.NoError(t, err)
		_, err = w.usage("n2", incr(map[string]Amount{oid(2): {"ceph-a", 50 * gib}}), false, nil)
		require.NoError(t, err)
		_, err = w.usage("n1", abs(nil), true, nil)
		require.NoError(t, err)
		require.Equal(t, 50*gib, w.pools["ceph-a"].Reserved)
		require.Equal(t, int64(1), w.pools["ceph-a"].Objects)
		w.requireNoDrift(t)
	})
	t.Run("a half-failed deploy leaves an orphan that fix releases with exact counters", func(t *testing.T) {
		w := newWorld()
		w.pools["ceph-a"].Capacity = ptr(150 * gib)
		// Workload w1 already runs on n1; a deploy of two more commits
		// on n1 and is refused on n2, and core does not roll n1 back.
		_, err := w.usage("n1", incr(map[string]Amount{oid(1): {"ceph-a", 50 * gib}}), false, nil)
		require.NoError(t, err)
		_, err = w.usage("n1", incr(map[string]Amount{oid(2): {"ceph-a", 50 * gib}}), false, nil)
		require.NoError(t, err)
		_, err = w.usage("n2", incr(map[string]Amount{oid(3): {"ceph-a", 100 * gib}}), false, nil)
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
		// fix recomputes n1 from its workloads (only w1) and writes it.
		out, err := w.usage("n1", abs(map[string]Amount{oid(1): {"ceph-a", 50 * gib}}), true, nil)
		require.NoError(t, err)
		require.Equal(t, map[string]Delta{"ceph-a": {-50 * gib, -1}}, out.Deltas)
		require.Equal(t, 50*gib, w.pools["ceph-a"].Reserved)
		w.requireNoDrift(t)
	})
	t.Run("capacity lowered during placement stops growth and lets shrinks pass", func(t *testing.T) {
		w := newWorld()
		_, err := w.usage("n1", incr(map[string]Amount{oid(1): {"ceph-a", 100 * gib}}), false, nil)
		require.NoError(t, err)
		lowered, err := SetCapacity(w.pools["ceph-a"], 50*gib, ptr(int64(0)))
		require.NoError(t, err)
		w.pools["ceph-a"] = lowered
		_, err = w.usage("n2", incr(map[string]Amount{oid(2): {"ceph-a", 1}}), false, nil)
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
		_, err = w.usage("n1", incr(map[string]Amount{oid(1): {"ceph-a", -10 * gib}}), false, nil)
		require.NoError(t, err)
		require.Equal(t, 90*gib, w.pools["ceph-a"].Reserved)
		w.requireNoDrift(t)
	})
}

package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// propertyCases is how many random cases each property checks: 3,000, or a
// tenth of that under -short.
func propertyCases() int {
	if testing.Short() {
		return 300
	}
	return 3000
}

// requestJSON is a workload request of bindings bs and a flat storage
// budget, as core sends it.
func requestJSON(bs []*VolumeBinding, storage int64) string {
	list := make([]string, len(bs))
	for i, b := range bs {
		list[i] = fmt.Sprintf("%q", b.String())
	}
	return fmt.Sprintf(`{"volumes":[%s],"storage":%d}`, strings.Join(list, ","), storage)
}

// randomNode builds a node of 1 to 64 volume devices under /data/gN/, some
// unused, some partly or fully used, and 0 to 4 disks whose mounts cover
// some of them, with random quotas and quota usage.
func randomNode(r *rand.Rand) *Node {
	n := NewNode()
	devices := 1 + r.IntN(64)
	for i := range devices {
		name := fmt.Sprintf("/data/g%d/v%02d", i%4, i)
		capacity := 1 + r.Int64N(5000)
		if r.IntN(10) == 0 {
			capacity = 1 + r.Int64N(100)
		}
		n.Capacity.Volumes[name] = capacity
		switch r.IntN(3) {
		case 0:
			n.Usage.Volumes[name] = 0
			if r.IntN(3) == 0 { // it hosts bindings charged no bytes: not unused
				if n.Usage.ZeroByte == nil {
					n.Usage.ZeroByte = map[string]int64{}
				}
				n.Usage.ZeroByte[name] = 1 + r.Int64N(3)
			}
		case 1:
			n.Usage.Volumes[name] = r.Int64N(capacity + 1)
		default:
			n.Usage.Volumes[name] = capacity - r.Int64N(min(capacity, 50)+1)
		}
	}
	mounts := []string{"/", "/data", "/data/g0", "/data/g1", "/data/g2", "/data/g3", "/data/g1/v01", "/data/g2/v02", "/database", "/data/g"}
	for i := range r.IntN(5) {
		d := Disk{Device: fmt.Sprintf("/dev/sd%c", 'a'+i)}
		for range 1 + r.IntN(3) {
			d.Mounts = append(d.Mounts, mounts[r.IntN(len(mounts))])
		}
		var q, used Quota
		for j := range q {
			q[j] = r.Int64N(300)
			used[j] = r.Int64N(q[j] + 1)
		}
		d.SetQuota(q)
		n.Capacity.Disks = append(n.Capacity.Disks, d)
		u := Disk{Device: d.Device, Mounts: d.Mounts}
		u.SetQuota(used)
		n.Usage.Disks = append(n.Usage.Disks, u)
	}
	n.Capacity.Storage = n.Capacity.volumeTotal() + r.Int64N(100000)
	n.Usage.Storage = r.Int64N(n.Capacity.Storage + 1)
	return n
}

// randomBindings draws 1 to 6 bindings of all four kinds; with io false
// none asks IO quota.
func randomBindings(r *rand.Rand, io bool) []*VolumeBinding {
	var out []*VolumeBinding
	quota := func() Quota {
		var q Quota
		if io && r.IntN(3) == 0 {
			for j := range q {
				if r.IntN(2) == 0 {
					q[j] = r.Int64N(60)
				}
			}
		}
		return q
	}
	for i := range 1 + r.IntN(6) {
		b := &VolumeBinding{Source: "AUTO", Destination: fmt.Sprintf("/b%d", i), Flags: "rw"}
		switch r.IntN(4) {
		case 0:
			b.Size = 1 + r.Int64N(1500)
			b.Quota = quota()
		case 1:
			b.Flags = "mrw"
			b.Size = 1 + r.Int64N(1500)
			b.Quota = quota()
		case 2:
			// unlimited
		default:
			b.Source = []string{"/data/g1/x", "/data/g2/v02/y", "/etc/z", "/database/w"}[r.IntN(4)]
			b.Size = r.Int64N(100)
			b.Quota = quota()
		}
		out = append(out, b)
	}
	return out
}

// checkPlans asserts the invariants every set of plans keeps on a host.
func checkPlans(t *testing.T, n *Node, h *Host, bs []*VolumeBinding, plans []Plan, limit int, ctx string) {
	require.LessOrEqual(t, len(plans), limit, "%s: more plans than the limit", ctx)
	dev := map[string]int{}
	for i, d := range h.Devices {
		dev[d.Name] = i
	}
	placed := make([]int64, len(h.Devices))
	charged := make([]Quota, len(h.Disks))
	monoDevices := map[string]bool{}
	for pi, p := range plans {
		require.Len(t, p.Device, len(bs), ctx)
		monoDev, monoSum := "", int64(0)
		for bi, b := range bs {
			name := p.Device[bi]
			switch b.Kind() {
			case Mount:
				require.Empty(t, name, "%s: a mount binding is never placed", ctx)
				if b.Quota.IsZero() {
					require.Equal(t, -1, p.Disk[bi], ctx)
				} else {
					require.Equal(t, n.Capacity.coveringDisk(b.Source), p.Disk[bi], "%s: mount IO goes to the covering disk", ctx)
				}
			case Normal:
				require.Contains(t, dev, name, ctx)
				require.Equal(t, b.Size, p.Size[bi], "%s: a normal binding is charged its size", ctx)
				require.False(t, monoDevices[name], "%s: a normal binding on a monopoly device", ctx)
			case Monopoly:
				require.Contains(t, dev, name, ctx)
				require.True(t, h.Devices[dev[name]].Unused, "%s: a monopoly group takes an unused device", ctx)
				require.GreaterOrEqual(t, p.Size[bi], b.Size, "%s: a monopoly share is at least its binding's size", ctx)
				if monoDev == "" {
					monoDev = name
				}
				require.Equal(t, monoDev, name, "%s: one group, one device", ctx)
				monoSum += p.Size[bi]
			case Unlimited:
				require.Contains(t, dev, name, ctx)
				require.Zero(t, p.Size[bi], "%s: an unlimited binding is charged nothing", ctx)
			}
			if name != "" {
				placed[dev[name]] += p.Size[bi]
				require.Equal(t, h.Devices[dev[name]].Disk, p.Disk[bi], "%s: a placed binding is charged to its device's disk", ctx)
			}
			if p.Disk[bi] >= 0 {
				charged[p.Disk[bi]] = charged[p.Disk[bi]].Plus(b.Quota)
			} else {
				require.True(t, b.Quota.IsZero(), "%s: plan %d binding %s asks IO but no disk is charged", ctx, pi, b)
			}
		}
		if monoDev != "" {
			require.False(t, monoDevices[monoDev], "%s: two monopoly groups on %s", ctx, monoDev)
			monoDevices[monoDev] = true
			require.Equal(t, n.Capacity.Volumes[monoDev], monoSum, "%s: the group's shares sum to the device", ctx)
		}
	}
	for i, d := range h.Devices {
		require.LessOrEqual(t, placed[i], d.Free, "%s: device %s over-placed", ctx, d.Name)
	}
	for i, left := range h.Disks {
		require.True(t, left.Covers(charged[i]), "%s: disk %d charged %v with %v left", ctx, i, charged[i], left)
	}
}

func uncoveredMount(n *Node, bs []*VolumeBinding) bool {
	for _, b := range bs {
		if b.Kind() == Mount && !b.Quota.IsZero() && n.Capacity.coveringDisk(b.Source) < 0 {
			return true
		}
	}
	return false
}

func TestSchedulePlansKeepTheirInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for c := range propertyCases() {
		n := randomNode(r)
		require.NoError(t, n.Validate())
		h := hostOf(n)
		bs := randomBindings(r, r.IntN(2) == 0)
		limit := 1 + r.IntN(50)
		ctx := fmt.Sprintf("case %d", c)

		plans, _, err := Schedule(context.Background(), h, &n.Capacity, bs, limit, limit)
		if uncoveredMount(n, bs) {
			var u errUncovered
			require.True(t, errors.As(err, &u), "%s: an uncovered mount is an error", ctx)
			continue
		}
		require.NoError(t, err, ctx)
		checkPlans(t, n, h, bs, plans, limit, ctx)

		count, err := Count(context.Background(), h, &n.Capacity, bs, limit, limit)
		require.NoError(t, err)
		// Schedule(limit) makes as many as its own search finds; Count also
		// tries each next count as a deploy of it would (IO quota), so it
		// may answer more, never less.
		require.GreaterOrEqual(t, count, len(plans), "%s: Count(limit) is at least the plans Schedule(limit) makes", ctx)
	}
}

// Count is the capacity query: it weighs a node's full potential, while a
// deploy of fewer opens fewer unused devices. A deploy of any count up to
// what Count answers succeeds, with or without IO quota.
func TestScheduleOfFewerThanCountSucceeds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for c := range 2 * propertyCases() {
		n := randomNode(r)
		h := hostOf(n)
		bs := randomBindings(r, c%2 == 0)
		if uncoveredMount(n, bs) {
			continue
		}
		count, err := Count(context.Background(), h, &n.Capacity, bs, 100, 100)
		require.NoError(t, err)
		for _, want := range []int{1, count / 2, count} {
			if want == 0 || want > count {
				continue
			}
			plans, _, err := Schedule(context.Background(), h, &n.Capacity, bs, want, 100)
			require.NoError(t, err)
			require.Len(t, plans, want, "case %d: Count(100) = %d but Schedule(%d) fell short", c, count, want)
			checkPlans(t, n, h, bs, plans, want, fmt.Sprintf("case %d", c))
		}
	}
}

func TestDeployCapacityNeverExceedsTheBudget(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for c := range propertyCases() {
		n := randomNode(r)
		bs := randomBindings(r, r.IntN(2) == 0)
		flat := r.Int64N(3000)
		w := mustRequest(t, requestJSON(bs, flat), false)
		maxDeploy := 1 + r.IntN(100)
		got, err := n.DeployCapacity(context.Background(), w, maxDeploy)
		require.NoError(t, err)
		ctx := fmt.Sprintf("case %d", c)
		require.GreaterOrEqual(t, got.Capacity, 0, ctx)
		require.LessOrEqual(t, got.Capacity, maxDeploy, ctx)
		if w.StorageRequest > 0 {
			require.LessOrEqual(t, int64(got.Capacity), (n.Capacity.Storage-n.Usage.Storage)/w.StorageRequest, "%s: above the storage budget", ctx)
		}
		if got.Capacity < n.budget(w, maxDeploy) {
			// the answer is the most: a deploy of one more finds no plans.
			_, err := n.Deploy(context.Background(), w, got.Capacity+1, maxDeploy)
			require.Error(t, err, "%s: capacity answered %d, but a deploy of %d succeeds", ctx, got.Capacity, got.Capacity+1)
		}
		if got.Capacity == 0 {
			continue
		}
		// a deploy of the count answered never asks more than the node has.
		wls, err := n.Deploy(context.Background(), w, got.Capacity, maxDeploy)
		require.NoError(t, err, "%s: a deploy of the capacity answered fails", ctx)
		after, err := nextUsage(n, nil, nil, mustJSON(t, wls), true, true)
		require.NoError(t, err)
		_, err = after.Settle()
		require.NoError(t, err, "%s: committing %d deployed workloads breaks the record", ctx, len(wls))
	}
}

// A realloc of a deployed workload either is refused with a reason, or its
// delta commits cleanly and moves the node's usage from the old workload's
// holdings to the new one's.
func TestReallocDeltaMovesUsageFromOldToNew(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	reallocs := 0
	for c := 0; c < propertyCases(); c++ {
		ctx := fmt.Sprintf("case %d", c)
		n := randomNode(r)
		bs := randomBindings(r, r.IntN(2) == 0)
		if uncoveredMount(n, bs) {
			continue
		}
		w := mustRequest(t, requestJSON(bs, r.Int64N(100)), false)
		wls, err := n.Deploy(context.Background(), w, 1, 10)
		if err != nil {
			continue
		}
		old := wls[0]
		n = usageAfter(t, n, old)

		var deltas []string
		for _, b := range bs {
			if r.IntN(2) == 0 {
				continue
			}
			size := r.Int64N(b.Size+600) - b.Size
			if b.Kind() == Unlimited {
				size = 0
			}
			var q Quota
			for i := range q {
				if b.Quota[i] > 0 && r.IntN(2) == 0 {
					q[i] = r.Int64N(2*b.Quota[i]+1) - b.Quota[i]
				}
			}
			d := *b
			d.Size, d.Quota = size, q
			deltas = append(deltas, fmt.Sprintf("%q", d.String()))
		}
		if r.IntN(3) == 0 {
			deltas = append(deltas, fmt.Sprintf("%q", fmt.Sprintf("AUTO:/new:rw:%d", 1+r.Int64N(2000))))
		}
		req := mustRequest(t, fmt.Sprintf(`{"volumes":[%s],"storage":%d}`, strings.Join(deltas, ","), r.Int64N(200)-50), true)
		res, err := n.Realloc(context.Background(), old, req)
		if err != nil {
			var e *types.Error
			require.ErrorAs(t, err, &e, ctx)
			require.Contains(t, []types.Class{types.InvalidArgument, types.ResourceExhausted}, e.Class, "%s: %v", ctx, err)
			continue
		}
		reallocs++

		out := mustJSON(t, res.Workload)
		_, err = DecodeWorkload(out)
		require.NoError(t, err, "%s: the new resource decodes", ctx)

		next, err := nextUsage(n, nil, nil, mustJSON(t, []*Workload{res.Delta}), true, true)
		require.NoError(t, err, ctx)
		committed, err := next.Settle()
		require.NoError(t, err, "%s: the delta commits", ctx)

		oldHeld, err := sumWorkloads([]*Workload{old})
		require.NoError(t, err)
		newHeld, err := sumWorkloads([]*Workload{res.Workload})
		require.NoError(t, err)
		want, ok := n.Held().Add(newHeld.amounts())
		require.True(t, ok)
		for k, v := range oldHeld.amounts() {
			want[k] -= v
		}
		got := committed.Held()
		for k := range want {
			require.Equal(t, want[k], got[k], "%s: usage of %s", ctx, k)
		}
	}
	require.Greater(t, reallocs, propertyCases()/10, "too few reallocs succeeded to say anything")
}

package pool

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const gib = int64(1) << 30

func TestSlots(t *testing.T) {
	withCap := func(capacity, reserved int64) *Record {
		return &Record{ID: "p", Capacity: &capacity, Reserved: reserved, DeclaredAt: t0}
	}
	lost := withCap(300*gib, 0)
	lost.LostAt = &t0
	cases := []struct {
		name      string
		rec       *Record
		available bool
		per       int64
		want      int
	}{
		{"free bytes over the bytes per workload, rounded down", withCap(300*gib, 50*gib), true, 100 * gib, 2},
		{"an exact fit counts", withCap(300*gib, 0), true, 100 * gib, 3},
		{"a pool without capacity takes nothing", &Record{ID: "p", DeclaredAt: t0}, true, gib, 0},
		{"a lost pool takes nothing", lost, true, gib, 0},
		{"an unavailable attachment takes nothing", withCap(300*gib, 0), false, gib, 0},
		{"an absent pool record takes nothing", nil, true, gib, 0},
		{"a pool over its capacity takes nothing", withCap(100*gib, 200*gib), true, gib, 0},
		{"a huge count is capped", withCap(1<<52, 0), true, 1, 1<<31 - 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Slots(tc.rec, tc.available, tc.per))
		})
	}
}

func TestApportion(t *testing.T) {
	cases := []struct {
		name  string
		cands []Candidate
		slots map[string]int
		want  map[string]int
	}{
		{"slots are dealt round-robin in node name order",
			[]Candidate{{"n2", 10, []string{"a"}}, {"n1", 10, []string{"a"}}, {"n3", 10, []string{"a"}}},
			map[string]int{"a": 10}, map[string]int{"n1": 4, "n2": 3, "n3": 3}},
		{"a node at its own limit leaves the rest to the others",
			[]Candidate{{"n1", 1, []string{"a"}}, {"n2", 10, []string{"a"}}},
			map[string]int{"a": 10}, map[string]int{"n1": 1, "n2": 9}},
		{"the pool bounds the sum when the nodes could take more",
			[]Candidate{{"n1", 100, []string{"a"}}, {"n2", 100, []string{"a"}}},
			map[string]int{"a": 3}, map[string]int{"n1": 2, "n2": 1}},
		{"the limits bound the sum when the pool has more",
			[]Candidate{{"n1", 2, []string{"a"}}, {"n2", 1, []string{"a"}}},
			map[string]int{"a": 30}, map[string]int{"n1": 2, "n2": 1}},
		{"a node reaching two pools takes from both",
			[]Candidate{{"n1", 10, []string{"a", "b"}}, {"n2", 10, []string{"a"}}, {"n3", 10, []string{"b"}}},
			map[string]int{"a": 3, "b": 4}, map[string]int{"n1": 2, "n2": 1, "n3": 2}},
		{"a pool unknown to the slots gives nothing",
			[]Candidate{{"n1", 10, []string{"zz"}}}, map[string]int{}, map[string]int{"n1": 0}},
		{"a node without pools keeps its limit",
			[]Candidate{{"n1", 7, nil}, {"n2", 5, []string{"a"}}}, map[string]int{"a": 2}, map[string]int{"n1": 7, "n2": 2}},
		{"a pool named twice by a node counts once",
			[]Candidate{{"n1", 10, []string{"a", "a"}}}, map[string]int{"a": 4}, map[string]int{"n1": 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Apportion(tc.cands, tc.slots))
		})
	}
}

// dealOneByOne is the rule as written: one slot at a time, round-robin in
// node name order, to nodes below their limit whose every pool has a slot.
func dealOneByOne(cands []Candidate, slots map[string]int) map[string]int {
	order := slices.Clone(cands)
	slices.SortFunc(order, func(a, b Candidate) int { return strings.Compare(a.Node, b.Node) })
	left := map[string]int{}
	for p, n := range slots {
		left[p] = n
	}
	got := map[string]int{}
	for _, c := range order {
		got[c.Node] = 0
		if len(c.Pools) == 0 {
			got[c.Node] = c.Limit
		}
	}
	for dealt := true; dealt; {
		dealt = false
		for _, c := range order {
			if len(c.Pools) == 0 || got[c.Node] >= c.Limit {
				continue
			}
			ok := true
			for _, p := range c.Pools {
				ok = ok && left[p] > 0
			}
			if ok {
				got[c.Node]++
				for _, p := range c.Pools {
					left[p]--
				}
				dealt = true
			}
		}
	}
	return got
}

func TestApportionProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pools := []string{"a", "b", "c"}
	for i := range 500 {
		var cands []Candidate
		for n := range 1 + rng.IntN(8) {
			var ps []string
			for _, p := range pools {
				if rng.IntN(3) == 0 {
					ps = append(ps, p)
				}
			}
			cands = append(cands, Candidate{Node: fmt.Sprintf("n%02d", n), Limit: rng.IntN(40), Pools: ps})
		}
		slots := map[string]int{}
		for _, p := range pools {
			slots[p] = rng.IntN(60)
		}
		got := Apportion(cands, slots)
		t.Run(fmt.Sprintf("case %d deals what one-by-one dealing deals and keeps every bound", i), func(t *testing.T) {
			require.Equal(t, dealOneByOne(cands, slots), got)
			used := map[string]int{}
			for _, c := range cands {
				require.LessOrEqual(t, got[c.Node], c.Limit, "node %s stays within its own limit", c.Node)
				for _, p := range c.Pools {
					used[p] += got[c.Node]
				}
			}
			for p, n := range used {
				require.LessOrEqual(t, n, slots[p], "Σ over the nodes reaching %s stays within its slots", p)
			}
			for _, c := range cands {
				if len(c.Pools) == 0 || got[c.Node] == c.Limit {
					continue
				}
				starved := true
				for _, p := range c.Pools {
					if used[p] == slots[p] {
						starved = false
					}
				}
				require.False(t, starved, "node %s below its limit has a pool with nothing left", c.Node)
			}
		})
	}
	t.Run("a thousand nodes sharing ten pools with a million slots are dealt quickly and exactly", func(t *testing.T) {
		var cands []Candidate
		for n := range 1000 {
			cands = append(cands, Candidate{Node: fmt.Sprintf("n%04d", n), Limit: 5000, Pools: []string{fmt.Sprintf("p%d", n%10)}})
		}
		slots := map[string]int{}
		for p := range 10 {
			slots[fmt.Sprintf("p%d", p)] = 100_003
		}
		got := Apportion(cands, slots)
		total := 0
		for _, n := range got {
			total += n
		}
		require.Equal(t, 10*100_003, total)
		require.Equal(t, 1001, got["n0000"])
		require.Equal(t, 1000, got["n0999"])
	})
}

package pool

import (
	"math"
	"slices"
	"strings"
)

// Slots is how many workloads asking perWorkload bytes each pool rec still
// takes through one node: floor((capacity − reserved) / perWorkload); 0
// when the pool has no record or capacity, is lost, or the node's
// attachment is absent or unavailable (available false).
func Slots(rec *Record, available bool, perWorkload int64) int {
	if rec == nil || !available || perWorkload <= 0 {
		return 0
	}
	n := rec.Free() / perWorkload
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}

// Candidate is one node of a capacity answer: its own limit (devices,
// storage budget, registry, … everything but the pools) and the pools the
// request uses that it reaches.
type Candidate struct {
	Node  string
	Limit int
	Pools []string
}

// Apportion deals every pool's slots among the candidates that reach it,
// because core sums per-node capacities: one slot at a time, round-robin in
// node name order, to nodes still below their own limit whose every pool
// has a slot left. The answer is each node's capacity: never above its
// limit, and Σ over the nodes reaching pool P ≤ slots[P] (a pool missing
// from slots has none). A node without pools keeps its limit.
//
// Rounds in which every eligible node takes a slot are dealt in bulk, so
// the cost grows with the number of nodes and pools, not with the slots.
func Apportion(cands []Candidate, slots map[string]int) map[string]int {
	order := slices.Clone(cands)
	for i := range order {
		ps := slices.Clone(order[i].Pools)
		slices.Sort(ps)
		order[i].Pools = slices.Compact(ps)
	}
	slices.SortFunc(order, func(a, b Candidate) int { return strings.Compare(a.Node, b.Node) })
	left := map[string]int{}
	for _, c := range order {
		for _, p := range c.Pools {
			left[p] = max(slots[p], 0)
		}
	}
	got := make(map[string]int, len(order))
	eligible := func(c Candidate) bool {
		if got[c.Node] >= c.Limit {
			return false
		}
		for _, p := range c.Pools {
			if left[p] <= 0 {
				return false
			}
		}
		return true
	}
	for _, c := range order {
		got[c.Node] = 0
		if len(c.Pools) == 0 {
			got[c.Node] = max(c.Limit, 0)
		}
	}
	pooled := slices.DeleteFunc(slices.Clone(order), func(c Candidate) bool { return len(c.Pools) == 0 })
	for {
		var live []Candidate
		for _, c := range pooled {
			if eligible(c) {
				live = append(live, c)
			}
		}
		if len(live) == 0 {
			return got
		}
		// Bulk: r full rounds in which every live node takes one slot
		// and no pool runs short.
		sharing := map[string]int{}
		r := math.MaxInt
		for _, c := range live {
			r = min(r, c.Limit-got[c.Node])
			for _, p := range c.Pools {
				sharing[p]++
			}
		}
		for p, n := range sharing {
			r = min(r, left[p]/n)
		}
		if r > 0 {
			for _, c := range live {
				got[c.Node] += r
				for _, p := range c.Pools {
					left[p] -= r
				}
			}
			continue
		}
		// One round dealt one slot at a time: some pool cannot serve
		// every node that shares it.
		for _, c := range live {
			if eligible(c) {
				got[c.Node]++
				for _, p := range c.Pools {
					left[p]--
				}
			}
		}
	}
}

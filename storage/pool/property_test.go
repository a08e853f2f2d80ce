package pool

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdmitKeepsTheInvariant drives random usage writes, isolations and
// attaches from three nodes into two pools and checks after each step that
// the counters equal what the node records add up to, and that no admitted
// (non-restore) write leaves a pool above its capacity.
func TestAdmitKeepsTheInvariant(t *testing.T) {
	for seed := range 40 {
		t.Run(fmt.Sprintf("random run %d keeps the counters equal to the records and within capacity", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			w := newWorld()
			w.pools["ceph-a"].Capacity = ptr(int64(1000))
			w.pools["nfs1"].Capacity = ptr(int64(600))
			nodes := []string{"n1", "n2", "n3"}
			pools := []string{"ceph-a", "nfs1"}
			admitted, refused := 0, 0
			for step := range 200 {
				node := nodes[rng.IntN(3)]
				id := oid(rng.IntN(12))
				amt := Amount{Pool: pools[rng.IntN(2)], Bytes: int64(1 + rng.IntN(300))}
				if obj, ok := w.nodes[node][id]; ok {
					amt.Pool = obj.Pool
				}
				elsewhere := false
				for _, n := range nodes {
					if _, ok := w.nodes[n][id]; ok && n != node {
						elsewhere = true
					}
				}
				op := rng.IntN(6)
				if elsewhere && (op == 0 || op == 2) {
					// Ids are minted at random: a write never creates
					// an id another record has, except by attaching.
					op = 3
				}
				reservedBefore := map[string]int64{}
				for p, rec := range w.pools {
					reservedBefore[p] = rec.Reserved
				}
				var err error
				restore := false
				switch op {
				case 0:
					_, err = w.usage(node, incr(map[string]Amount{id: amt}), false, nil)
				case 1:
					_, err = w.usage(node, decr(map[string]Amount{id: amt}), false, nil)
				case 2:
					restore = rng.IntN(2) == 0
					_, err = w.usage(node, abs(map[string]Amount{id: amt}), restore, nil)
				case 3:
					var others []string
					for _, n := range nodes {
						if n != node {
							others = append(others, n)
						}
					}
					for _, n := range others {
						if obj, ok := w.nodes[n][id]; ok {
							amt = Amount{Pool: obj.Pool, Bytes: obj.Bytes}
						}
					}
					_, err = w.usage(node, incr(map[string]Amount{id: amt}), false, []string{id}, others...)
				case 4:
					w.nodes[node], _, _ = Isolate(w.nodes[node])
					w.isolated[node] = true
				case 5:
					w.isolated[node] = false
				}
				if op < 4 {
					if err == nil {
						admitted++
					} else {
						refused++
					}
				}
				w.requireNoDrift(t)
				seen := map[string]string{}
				for n, objs := range w.nodes {
					for id := range objs {
						require.Empty(t, seen[id], "step %d: object %s is in two records (%s and %s)", step, id, seen[id], n)
						seen[id] = n
					}
				}
				for p, rec := range w.pools {
					if err == nil && !restore && rec.Reserved > reservedBefore[p] {
						require.LessOrEqual(t, rec.Reserved, *rec.Capacity, "step %d: an admitted write grew pool %s past its capacity", step, p)
					}
				}
			}
			require.Positive(t, admitted, "the run admitted writes")
			require.Positive(t, refused, "the run refused writes")
		})
	}
}

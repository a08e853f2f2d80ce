package flowcontrol

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func relDiff(a, b float64) float64 {
	den := math.Max(math.Abs(a), math.Abs(b))
	if den == 0 {
		return 0
	}
	return math.Abs(a-b) / den
}

// partition splits x into n random non-negative parts.
func partition(rng *rand.Rand, n int, x float64) []float64 {
	cuts := make([]float64, n-1)
	for i := range cuts {
		cuts[i] = rng.Float64()
	}
	slices.Sort(cuts)
	parts := make([]float64, n)
	last := 0.0
	for i, c := range cuts {
		parts[i] = (c - last) * x
		last = c
	}
	parts[n-1] = (1 - last) * x
	return parts
}

func TestTheAllocationSolverIsExactOnTenThousandSeededProblems(t *testing.T) {
	rng := rand.New(rand.NewPCG(1234567890, 1))
	styles := map[string]int{}
	for n := range 10_000 {
		size := []int{0, 1, 2, 3, 4, 6, 9}[rng.IntN(7)]
		items := make([]allocItem, size)
		var required float64
		style := "empty"
		if size > 0 {
			switch rng.IntN(20) {
			case 0:
				style = "bound from below"
				required = float64(rng.IntN(size * 3))
				for j, x := range partition(rng, size, required) {
					items[j] = allocItem{lower: x, target: x + 2*rng.Float64(), upper: x + 3*rng.Float64()}
				}
			case 1:
				style = "bound from above"
				required = float64(rng.IntN(size*3) + 1)
				for j, x := range partition(rng, size, required) {
					lower := x * math.Max(0, 1.25*rng.Float64()-1)
					items[j] = allocItem{upper: x, lower: lower, target: lower + rng.Float64()}
				}
			default:
				style = "between the bounds"
				var low, high float64
				for j := range items {
					x := math.Max(0, 5*rng.Float64()-1)
					items[j] = allocItem{lower: x, target: x + 2*rng.Float64(), upper: x + 3*rng.Float64()}
					low += items[j].lower
					high += items[j].upper
				}
				required = math.Round(low + (high-low)*rng.Float64())
			}
		}
		for rng.Float64() < 0.25 { // levels with no demand at all
			items = append(items, allocItem{upper: rng.Float64() + 1e-5})
			if len(items) > 1 {
				m := rng.IntN(len(items))
				items[m], items[len(items)-1] = items[len(items)-1], items[m]
			}
		}
		styles[style]++
		var low, high float64
		for _, it := range items {
			low += it.lower
			high += it.upper
		}
		allocs, p, err := allocate(required, items)
		if low-required > 1e-10 || required-high > 1e-10 {
			require.Error(t, err, "problem %d (%s): infeasible bounds are refused", n, style)
			continue
		}
		require.NoError(t, err, "problem %d (%s)", n, style)
		sum := 0.0
		for _, a := range allocs {
			sum += a
		}
		require.LessOrEqual(t, relDiff(required, sum), 1e-10, "problem %d (%s): allocations %v sum to %v, want %v", n, style, allocs, sum, required)
		for i, it := range items {
			fair := p * math.Max(it.target, minTarget)
			switch {
			case fair <= it.lower:
				require.Equal(t, it.lower, allocs[i], "problem %d item %d sits on its lower bound", n, i)
			case fair >= it.upper:
				require.Equal(t, it.upper, allocs[i], "problem %d item %d sits on its upper bound", n, i)
			default:
				require.LessOrEqual(t, relDiff(fair, allocs[i]), 1e-10, "problem %d item %d is proportional to its target", n, i)
			}
		}
	}
	t.Logf("10000 problems: %v", styles)
}

func TestTheAllocationSolverRefusesInconsistentItems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		items []allocItem
		sum   float64
	}{
		{"a negative lower bound is refused", []allocItem{{target: 1, lower: -1, upper: 2}}, 1},
		{"an upper bound below the lower bound is refused", []allocItem{{target: 3, lower: 3, upper: 2}}, 2},
		{"a target below the lower bound is refused", []allocItem{{target: 1, lower: 2, upper: 3}}, 2},
		{"a sum above the upper bounds is refused", []allocItem{{target: 1, lower: 0, upper: 2}}, 3},
		{"a sum below the lower bounds is refused", []allocItem{{target: 2, lower: 2, upper: 3}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := allocate(tc.sum, tc.items)
			require.Error(t, err)
		})
	}
}

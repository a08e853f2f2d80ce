package concurrency_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// A ledger accounts a load's writes by what each caller was told: landed
// (exit 0), outcome unknown (the serve daemon died holding the call, under
// ERU_TEST_SERVE=kill), or refused. Each write moves one dimension of the
// node by sign × (unit + tag), its tag a small number of its own, so that
// the final state must be the initial one, plus every landed write, plus
// some subset of the unknown ones, each once: a lost write, a refused one
// that landed, or one applied twice shows as a residual no subset makes.
type ledger struct {
	mu       sync.Mutex
	landed   map[string]int64  // dimension -> sum of the landed writes
	unknown  map[string][]move // dimension -> writes whose outcome is unknown
	counts   [3]int            // landed, unknown, refused
	refusals []string
}

// move is one write's change of its dimension: sign × (unit + tag).
type move struct {
	sign      int64 // +1 or -1
	unit, tag int64
}

func (m move) delta() int64 { return m.sign * (m.unit + m.tag) }

func newLedger() *ledger {
	return &ledger{landed: map[string]int64{}, unknown: map[string][]move{}}
}

// record files a finished call that moves dim by m, and reports whether it
// landed.
func (l *ledger) record(res testenv.Result, dim string, m move) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case res.Code == 0:
		l.landed[dim] += m.delta()
		l.counts[0]++
		return true
	case testenv.OutcomeUnknown(res):
		l.unknown[dim] = append(l.unknown[dim], m)
		l.counts[1]++
	default:
		l.counts[2]++
		l.refusals = append(l.refusals, strings.TrimSpace(res.Stderr))
	}
	return false
}

// requireExact asserts that dimension dim went from before to after by
// exactly its landed writes and a subset of its unknown ones.
func (l *ledger) requireExact(t *testing.T, dim string, before, after int64, what string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	rest := after - before - l.landed[dim]
	require.True(t, subsetSum(rest, l.unknown[dim]), "%s: %d before, %d after, %d moved by the landed writes: the other %d is no subset of the %d writes whose outcome is unknown",
		what, before, after, l.landed[dim], rest, len(l.unknown[dim]))
}

// subsetSum reports whether some subset of moves, each taken at most
// once, adds up to want. All moves of a dimension share one unit, so a
// subset is known by how many units it adds (n, from -k to k) and the sum
// of its signed tags (s): a table of bit sets, one per n, over s.
func subsetSum(want int64, moves []move) bool {
	if len(moves) == 0 {
		return want == 0
	}
	k := len(moves)
	unit := moves[0].unit
	var span int64
	for _, m := range moves {
		if m.unit != unit || m.tag < 0 {
			panic("moves of one dimension share their unit and have tags of at least 0")
		}
		span += m.tag
	}
	width := int(2*span + 1) // s from -span to span
	rows := make([]bitset, 2*k+1)
	for i := range rows {
		rows[i] = newBitset(width)
	}
	rows[k].set(int(span)) // the empty subset: n 0, s 0
	for _, m := range moves {
		if m.sign > 0 {
			for n := 2*k - 1; n >= 0; n-- { // from the top: each move once
				rows[n+1].orShifted(rows[n], int(m.tag))
			}
		} else {
			for n := 1; n <= 2*k; n++ {
				rows[n-1].orShifted(rows[n], -int(m.tag))
			}
		}
	}
	for n := -k; n <= k; n++ {
		s := want - int64(n)*unit
		if s >= -span && s <= span && rows[n+k].has(int(s+span)) {
			return true
		}
	}
	return false
}

type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// orShifted sets b |= src shifted by d bits (up for d > 0, down for d < 0);
// bits shifted past either end are dropped.
func (b bitset) orShifted(src bitset, d int) {
	words, shift := d/64, uint(d%64)
	if d < 0 {
		words, shift = (-d)/64, uint((-d)%64)
	}
	for i := range b {
		var w uint64
		if d >= 0 {
			j := i - words
			if j >= 0 {
				w = src[j] << shift
				if shift > 0 && j > 0 {
					w |= src[j-1] >> (64 - shift)
				}
			}
		} else {
			j := i + words
			if j < len(src) {
				w = src[j] >> shift
				if shift > 0 && j+1 < len(src) {
					w |= src[j+1] << (64 - shift)
				}
			}
		}
		b[i] |= w
	}
}

func TestSubsetSumFindsExactlyTheReachableResiduals(t *testing.T) {
	up := func(tag int64) move { return move{sign: 1, unit: 1000, tag: tag} }
	down := func(tag int64) move { return move{sign: -1, unit: 1000, tag: tag} }
	for _, c := range []struct {
		name  string
		want  int64
		moves []move
		ok    bool
	}{
		{"nothing unknown and nothing left is exact", 0, nil, true},
		{"nothing unknown and something left is not", 1000, nil, false},
		{"none of the unknown writes landed", 0, []move{up(1), down(2)}, true},
		{"one unknown write landed", 1002, []move{up(1), up(2), down(3)}, true},
		{"an increase and a decrease landed", 1001 - 1003, []move{up(1), up(2), down(3)}, true},
		{"every unknown write landed", 1001 + 1002 - 1003, []move{up(1), up(2), down(3)}, true},
		{"one write landed twice", 2 * 1002, []move{up(1), up(2), down(3)}, false},
		{"a landed write was lost", -1005, []move{up(1), up(2), down(3)}, false},
		{"a residual off by a byte", 1002, []move{up(1), up(3)}, false},
		{"tags crossing word boundaries", 1000 + 200 + 1000 + 70, []move{up(200), down(130), up(70), up(1)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.ok, subsetSum(c.want, c.moves))
		})
	}
}

package shufflesharding

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// fallingFactorial is n·(n-1)·…·(n-m+1).
func fallingFactorial(n, m int) int {
	f := 1
	for i := n; i > n-m; i-- {
		f *= i
	}
	return f
}

func TestEveryHandIsDealtEquallyOftenOverAllHashes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deck, hand int
	}{
		{name: "128 queues with hands of 3", deck: 128, hand: 3},
		{name: "50 queues with hands of 4", deck: 50, hand: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDealer(tc.deck, tc.hand)
			require.NoError(t, err)
			deals := fallingFactorial(tc.deck, tc.hand) // ordered hands
			perms := fallingFactorial(tc.hand, tc.hand)
			hashes := deals // every hash below the falling factorial, each once
			n := float64(hashes) / float64(deals)
			lo, hi := perms*int(math.Floor(n)), perms*int(math.Ceil(n))
			// counts is indexed by the sorted hand read as a number in base deck.
			counts := make([]uint16, int(math.Pow(float64(tc.deck), float64(tc.hand))))
			hand := make([]int, 0, tc.hand)
			sorted := make([]int, tc.hand)
			duplicates, outOfRange := 0, 0
			for h := range uint64(hashes) {
				hand = d.Deal(h, hand)
				copy(sorted, hand)
				slices.Sort(sorted)
				key := 0
				for i, c := range sorted {
					if c < 0 || c >= tc.deck {
						outOfRange++
						c = 0
					}
					if i > 0 && sorted[i-1] == c {
						duplicates++
					}
					key = key*tc.deck + c
				}
				counts[key]++
			}
			require.Zero(t, outOfRange, "cards outside the deck")
			require.Zero(t, duplicates, "hands with a card dealt twice")
			seen, bad := 0, 0
			for _, c := range counts {
				if c == 0 {
					continue
				}
				seen++
				if int(c) < lo || int(c) > hi {
					bad++
				}
			}
			require.Equal(t, deals/perms, seen, "every unordered hand is dealt")
			require.Zero(t, bad, "hands dealt outside [%d, %d] times", lo, hi)
			t.Logf("%d deals: %d hands, each dealt within [%d, %d] times", hashes, seen, lo, hi)
		})
	}
}

func TestDealerRefusesBadSizes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deck, hand int
		want       string
	}{
		{name: "entropy over 60 bits is refused", deck: 128, hand: 9, want: "63 bits of entropy, more than 60"},
		{name: "a hand larger than the deck is refused", deck: 4, hand: 5, want: "exceeds the 4 queues"},
		{name: "an empty hand is refused", deck: 4, hand: 0, want: "at least 1"},
		{name: "an empty deck is refused", deck: 0, hand: 1, want: "at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDealer(tc.deck, tc.hand)
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("exactly 60 bits is accepted", func(t *testing.T) {
		_, err := NewDealer(1024, 6)
		require.NoError(t, err)
	})
}

func TestMiceAlwaysFindAQueueOutsideAnElephantsHand(t *testing.T) {
	d, err := NewDealer(128, 6)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	elephant := d.Deal(rng.Uint64(), nil)
	full := map[int]bool{}
	for _, c := range elephant {
		full[c] = true
	}
	hand := make([]int, 0, 6)
	for i := range 100_000 {
		hand = d.Deal(rng.Uint64(), hand)
		free := 0
		for _, c := range hand {
			if !full[c] {
				free++
			}
		}
		require.Positive(t, free, "mouse %d (hand %v) has a queue outside the elephant's %v", i, hand, elephant)
	}
}

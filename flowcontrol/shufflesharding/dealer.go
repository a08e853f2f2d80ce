// Package shufflesharding deals a flow a small hand of queues out of a deck,
// using a hash of the flow as the only source of randomness, so that two
// flows rarely share their whole hand and one heavy flow cannot fill every
// queue another flow may use.
package shufflesharding

import (
	"fmt"
	"math"
)

// MaxHashBits is the most hash entropy a deal may consume. Above it the last
// card would be noticeably biased (a 64-bit hash is not a multiple of the
// deck's falling factorial); 60 bits keeps that bias under 1/32.
const MaxHashBits = 60

// maxHandSize bounds a hand so the dealer needs no allocation.
const maxHandSize = 16

// EntropyBits is the number of hash bits dealing handSize cards out of
// deckSize consumes: ceil(handSize × log2(deckSize)), a slight overestimate.
func EntropyBits(deckSize, handSize int) int {
	return int(math.Ceil(math.Log2(float64(deckSize)) * float64(handSize)))
}

// Dealer deals hands of a fixed size from a deck of a fixed size. It holds no
// mutable state and is safe for concurrent use.
type Dealer struct {
	deck, hand int
}

// NewDealer checks the sizes: both positive, hand ≤ deck, hand ≤ 16, and at
// most MaxHashBits of entropy.
func NewDealer(deckSize, handSize int) (Dealer, error) {
	switch {
	case deckSize < 1:
		return Dealer{}, fmt.Errorf("deck of %d queues: must be at least 1", deckSize)
	case handSize < 1:
		return Dealer{}, fmt.Errorf("hand of %d queues: must be at least 1", handSize)
	case handSize > deckSize:
		return Dealer{}, fmt.Errorf("hand of %d queues exceeds the %d queues", handSize, deckSize)
	case handSize > maxHandSize:
		return Dealer{}, fmt.Errorf("hand of %d queues exceeds the maximum of %d", handSize, maxHandSize)
	case EntropyBits(deckSize, handSize) > MaxHashBits:
		return Dealer{}, fmt.Errorf("hand of %d out of %d queues needs %d bits of entropy, more than %d",
			handSize, deckSize, EntropyBits(deckSize, handSize), MaxHashBits)
	}
	return Dealer{deck: deckSize, hand: handSize}, nil
}

// HandSize is the number of cards in a hand.
func (d Dealer) HandSize() int { return d.hand }

// Deal returns the hand for hash, appended to dst[:0]: distinct cards in
// [0, deck). The hash is read as a number in the mixed radix
// (deck, deck-1, …): digit i picks the digit-th card still in the deck, which
// makes every ordered hand equally likely for a uniform hash.
func (d Dealer) Deal(hash uint64, dst []int) []int {
	hand := dst[:0]
	var taken [maxHandSize]int // cards dealt so far, ascending
	for i := 0; i < d.hand; i++ {
		left := uint64(d.deck - i)
		card := int(hash % left)
		hash /= left
		// Skip over the cards already dealt: card is an index among the rest.
		pos := 0
		for ; pos < i && taken[pos] <= card; pos++ {
			card++
		}
		copy(taken[pos+1:i+1], taken[pos:i])
		taken[pos] = card
		hand = append(hand, card)
	}
	return hand
}

package types

import (
	"math"
)

// Amounts is a node's usage of one resource flattened into named integer
// components ("storage", "volume:/data0", "cpu_millis", ...). The node
// registry works on Amounts so that it can hold, release and absorb usage of
// any plugin without knowing its shape.
type Amounts map[string]int64

// IsZero reports whether every component is zero.
func (a Amounts) IsZero() bool {
	for _, v := range a {
		if v != 0 {
			return false
		}
	}
	return true
}

// Clone returns a copy of a.
func (a Amounts) Clone() Amounts {
	c := make(Amounts, len(a))
	for k, v := range a {
		c[k] = v
	}
	return c
}

// Add returns a + b, component by component, or false when a sum overflows.
func (a Amounts) Add(b Amounts) (Amounts, bool) {
	sum := a.Clone()
	for k, v := range b {
		s, ok := AddInt64(sum[k], v)
		if !ok {
			return nil, false
		}
		sum[k] = s
	}
	return sum, true
}

// Keys returns the component names in order.
func (a Amounts) Keys() []string {
	return SortedKeys(a)
}

// AddInt64 adds two int64s and reports false on overflow.
func AddInt64(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// MulInt64 multiplies two int64s and reports false on overflow.
func MulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	if a == math.MinInt64 || b == math.MinInt64 {
		return 0, false
	}
	p := a * b
	if p/b != a {
		return 0, false
	}
	return p, true
}

// MulSat multiplies two int64s, saturating at the largest (or smallest)
// int64 instead of overflowing.
func MulSat(a, b int64) int64 {
	if p, ok := MulInt64(a, b); ok {
		return p
	}
	if (a < 0) != (b < 0) {
		return math.MinInt64
	}
	return math.MaxInt64
}

// MaxExact is the largest integer this project stores: core decodes every
// answer through float64, so larger counts would come back changed (2^53, 8
// PiB as bytes).
const MaxExact = 1 << 53

package flowcontrol

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// allocItem is one Limited level in the division of seats: it should get an
// amount proportional to target, but never below lower nor above upper.
type allocItem struct {
	target, lower, upper float64
}

// minTarget stands in for a zero target so that every level has a direction.
const minTarget = 0.001

// allocSlack is the floating-point slack of the feasibility checks.
const allocSlack = 1e-7

// allocate divides required among items: it finds the fair proportion p such
// that the allocations clamp(p × target, lower, upper) sum to required, and
// returns them with p. Every item must have 0 ≤ lower ≤ target and
// lower ≤ upper; the bounds must admit the sum.
func allocate(required float64, items []allocItem) ([]float64, float64, error) {
	if required < 0 {
		return nil, 0, fmt.Errorf("required sum %v is negative", required)
	}
	targets := make([]float64, len(items))
	var lowSum, highSum float64
	for i, it := range items {
		switch {
		case it.lower < 0:
			return nil, 0, fmt.Errorf("item %d: lower bound %v is negative", i, it.lower)
		case it.upper < it.lower:
			return nil, 0, fmt.Errorf("item %d: upper bound %v is below lower bound %v", i, it.upper, it.lower)
		case it.target < it.lower:
			return nil, 0, fmt.Errorf("item %d: target %v is below lower bound %v", i, it.target, it.lower)
		}
		targets[i] = math.Max(it.target, minTarget)
		lowSum += it.lower
		highSum += it.upper
	}
	if lowSum-required > allocSlack {
		return nil, 0, fmt.Errorf("lower bounds sum to %v, above the required %v", lowSum, required)
	}
	if required-highSum > allocSlack {
		return nil, 0, fmt.Errorf("upper bounds sum to %v, below the required %v", highSum, required)
	}
	out := make([]float64, len(items))
	if len(items) == 0 {
		if required > allocSlack {
			return nil, 0, errors.New("nothing to allocate to")
		}
		return out, 0, nil
	}
	// The sum is a non-decreasing, piecewise-linear function of p whose
	// kinks are the items' lower/target and upper/target.
	sumAt := func(p float64) float64 {
		s := 0.0
		for i, it := range items {
			s += math.Min(it.upper, math.Max(it.lower, p*targets[i]))
		}
		return s
	}
	kinks := make([]float64, 0, 2*len(items))
	for i, it := range items {
		kinks = append(kinks, it.lower/targets[i], it.upper/targets[i])
	}
	slices.Sort(kinks)
	kinks = slices.Compact(kinks)
	var p float64
	switch {
	case required <= lowSum:
		p = kinks[0]
		for i, it := range items {
			out[i] = it.lower
		}
		return out, p, nil
	case required >= highSum:
		p = kinks[len(kinks)-1]
		for i, it := range items {
			out[i] = it.upper
		}
		return out, p, nil
	}
	// Find the segment [lo, hi] of p where the sum crosses required; on it
	// only the items strictly between their bounds move, linearly in p.
	lo := kinks[0]
	for _, hi := range kinks[1:] {
		if sumAt(hi) < required {
			lo = hi
			continue
		}
		fixed, slope := 0.0, 0.0
		mid := (lo + hi) / 2
		for i, it := range items {
			switch v := mid * targets[i]; {
			case v <= it.lower:
				fixed += it.lower
			case v >= it.upper:
				fixed += it.upper
			default:
				slope += targets[i]
			}
		}
		p = (required - fixed) / slope
		break
	}
	for i, it := range items {
		out[i] = math.Min(it.upper, math.Max(it.lower, p*targets[i]))
	}
	return out, p, nil
}

package queueset

import (
	"math"
	"time"

	"github.com/eru-extend/resources/flowcontrol/clock"
)

// Integrator follows a piecewise-constant quantity over time and reports its
// time-weighted average, standard deviation and maximum since the last Reset.
// It is not safe for concurrent use; its owner serializes access.
type Integrator struct {
	clk         clock.Clock
	start       time.Time
	last        time.Time
	x           float64
	max         float64
	sumX, sumX2 float64 // ∫x dt and ∫x² dt, in seconds
}

// Results summarizes an Integrator's period.
type Results struct {
	Duration  float64 // seconds
	Average   float64
	Deviation float64 // standard deviation; 0 for an empty period
	Max       float64
}

// NewIntegrator starts integrating 0 at the clock's now.
func NewIntegrator(clk clock.Clock) *Integrator {
	now := clk.Now()
	return &Integrator{clk: clk, start: now, last: now}
}

func (ig *Integrator) advance() {
	now := ig.clk.Now()
	dt := now.Sub(ig.last).Seconds()
	if dt > 0 {
		ig.sumX += ig.x * dt
		ig.sumX2 += ig.x * ig.x * dt
		ig.last = now
	}
}

// Set changes the quantity from now on.
func (ig *Integrator) Set(x float64) {
	ig.advance()
	ig.x = x
	ig.max = math.Max(ig.max, x)
}

// Add changes the quantity by dx from now on.
func (ig *Integrator) Add(dx float64) { ig.Set(ig.x + dx) }

// Value is the current quantity.
func (ig *Integrator) Value() float64 { return ig.x }

// Results reports the period so far.
func (ig *Integrator) Results() Results {
	ig.advance()
	r := Results{Duration: ig.last.Sub(ig.start).Seconds(), Max: ig.max}
	if r.Duration > 0 {
		r.Average = ig.sumX / r.Duration
		variance := ig.sumX2/r.Duration - r.Average*r.Average
		if variance > 0 {
			r.Deviation = math.Sqrt(variance)
		}
	}
	return r
}

// Reset reports the period so far and starts a new one at the current value.
func (ig *Integrator) Reset() Results {
	r := ig.Results()
	ig.start = ig.last
	ig.sumX, ig.sumX2 = 0, 0
	ig.max = ig.x
	return r
}

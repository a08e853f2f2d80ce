package flowcontrol

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
)

// TestLimitsBeforeTheFirstReDivision: a controller just built has seen no
// demand, so re-dividing then would lend every idle level's seats away; a
// new level starts at NominalCL − LendableCL/2 (as Kubernetes starts it),
// and a reload keeps a kept level's current limit within its new bounds.
func TestLimitsBeforeTheFirstReDivision(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	cfg := DefaultConfig()
	cfg.ServerConcurrency = ptr(8)
	c, err := New(cfg, clk, nil)
	require.NoError(t, err)
	defer c.Close()
	for _, want := range []struct {
		level                 string
		nominal, current, min int
	}{
		{"placement", 5, 5, 4}, // lendable round(5 × 25%) = 1, 1/2 = 0
		{"operator", 2, 2, 1},  // lendable 1
		{"metrics", 2, 1, 0},   // lendable round(2 × 90%) = 2
		{"catch-all", 1, 1, 1}, // lends nothing
	} {
		l, ok := c.Limits(want.level)
		require.True(t, ok)
		require.Equal(t, want.nominal, l.Nominal, want.level)
		require.Equal(t, want.current, l.Current, want.level)
		require.Equal(t, want.min, l.Min, want.level)
	}
	cfg.ServerConcurrency = ptr(80)
	require.NoError(t, c.Reload(cfg))
	l, _ := c.Limits("placement")
	require.Equal(t, 50, l.Nominal)
	require.Equal(t, 37, l.Min, "lendable round(50 × 25%) = 13")
	require.Equal(t, 37, l.Current, "the kept limit of 5, raised to the new MinCL")
	clk.Advance(AdjustPeriod)
	l, _ = c.Limits("placement")
	require.True(t, l.Min <= l.Current && l.Current <= l.Max, "the first re-division keeps it within [MinCL, MaxCL]: %+v", l)
}

package nodes

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOffsetBetween(t *testing.T) {
	sent := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name                string
		nodeTime, received  time.Time
		offset, uncertainty time.Duration
	}{
		{"a node on the daemon's clock read at the midpoint has no offset", sent.Add(10 * time.Millisecond), sent.Add(20 * time.Millisecond), 0, 10 * time.Millisecond},
		{"a node ahead has a positive offset", sent.Add(3 * time.Second), sent.Add(2 * time.Millisecond), 3*time.Second - time.Millisecond, time.Millisecond},
		{"a node behind has a negative offset", sent.Add(-2 * time.Second), sent.Add(4 * time.Millisecond), -2*time.Second - 2*time.Millisecond, 2 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := OffsetBetween(c.nodeTime, sent, c.received)
			require.Equal(t, ClockOffset{Offset: c.offset, Uncertainty: c.uncertainty}, got)
		})
	}
}

func TestAMeasuredOffsetBeyondToleranceExceedsIt(t *testing.T) {
	const tolerance = 500 * time.Millisecond
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name                string
		offset, uncertainty time.Duration
		exceeds             bool
		reason              string
	}{
		{"an offset within tolerance does not", 400 * time.Millisecond, time.Millisecond, false, ""},
		{"an offset beyond tolerance does", 2 * time.Second, 3 * time.Millisecond, true, "SYNCHRONIZED, offset +2000ms ± 3ms beyond 500ms"},
		{"a negative offset beyond tolerance does", -2 * time.Second, 3 * time.Millisecond, true, "SYNCHRONIZED, offset -2000ms ± 3ms beyond 500ms"},
		{"an offset the uncertainty may explain does not", 700 * time.Millisecond, 300 * time.Millisecond, false, ""},
		{"the uncertainty is rounded up, never to zero", 501*time.Millisecond + 400*time.Microsecond, 100 * time.Microsecond, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := Measurement{ClockSync: ClockSynchronized, Offset: &ClockOffset{Offset: c.offset, Uncertainty: c.uncertainty}}
			o := m.observe(nil, now, 0)
			require.NotNil(t, o.Clock.UncertaintyMs)
			require.Positive(t, *o.Clock.UncertaintyMs)
			require.Equal(t, c.exceeds, o.ClockExceeds(tolerance))
			if c.exceeds {
				require.Equal(t, c.reason, o.clockReason(tolerance))
			}
		})
	}
	t.Run("a heartbeat written directly records no offset", func(t *testing.T) {
		o := Measurement{ClockSync: ClockSynchronized}.observe(nil, now, 0)
		require.Nil(t, o.Clock.OffsetMs)
		require.Nil(t, o.Clock.UncertaintyMs)
		require.False(t, o.ClockExceeds(tolerance))
	})
}

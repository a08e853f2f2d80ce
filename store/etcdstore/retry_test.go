package etcdstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetryPause: the pause before a read is sent again after an
// election's answer grows with each resend, and never takes the time the
// resend itself needs.
func TestRetryPause(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		n           int
		left        time.Duration
		least, most time.Duration
		ok          bool
	}{
		{"the first resend with time to spare waits 25 to 50 ms", 0, time.Second, 25 * time.Millisecond, 50 * time.Millisecond, true},
		{"the fourth resend with time to spare waits 200 to 225 ms", 3, time.Second, 200 * time.Millisecond, 225 * time.Millisecond, true},
		{"a later resend waits no longer than the fourth", 9, time.Second, 200 * time.Millisecond, 225 * time.Millisecond, true},
		{"a fourth resend with 310 ms left waits at most 210 ms, leaving the resend its 100 ms", 3, 310 * time.Millisecond, 185 * time.Millisecond, 210 * time.Millisecond, true},
		{"a resend with exactly 100 ms left goes at once", 3, minRetryTry, 0, 0, true},
		{"a read with less than 100 ms left is not sent again", 0, 99 * time.Millisecond, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range 200 { // the jitter is random: every draw is in bounds
				pause, ok := retryPause(c.n, c.left)
				require.Equal(t, c.ok, ok)
				require.GreaterOrEqual(t, pause, c.least)
				require.LessOrEqual(t, pause, c.most)
			}
		})
	}
}

package serve

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/types"
)

// TestTheDaemonMeasuresTheNodeClockBetweenItsOwnTimestamps drives the
// two-step exchange with the daemon's clock injected: the offset is the
// node's reading minus the midpoint of the daemon's answer and the
// heartbeat's arrival, the uncertainty half of that round trip.
func TestTheDaemonMeasuresTheNodeClockBetweenItsOwnTimestamps(t *testing.T) {
	daemonNow := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := newStamper(func() time.Time { return daemonNow })
	rec := httptest.NewRecorder()
	s.clock(rec, httptest.NewRequest("GET", "/v1/clock", nil))
	var stamp cmd.ClockStamp
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &stamp))
	require.True(t, stamp.DaemonTime.Equal(daemonNow))

	sent := daemonNow
	for _, c := range []struct {
		name      string
		nodeTime  time.Time
		received  time.Duration // after sent
		want      nodes.ClockOffset
		class     types.Class
		wantError string
	}{
		{"a node 3s ahead", sent.Add(3*time.Second + 20*time.Millisecond), 40 * time.Millisecond, nodes.ClockOffset{Offset: 3 * time.Second, Uncertainty: 20 * time.Millisecond}, "", ""},
		{"a node 1s behind", sent.Add(-time.Second), 2 * time.Millisecond, nodes.ClockOffset{Offset: -time.Second - time.Millisecond, Uncertainty: time.Millisecond}, "", ""},
		{"a stamp too old to measure anything", sent, MaxStampAge + time.Second, nodes.ClockOffset{}, types.Aborted, "old"},
		{"a stamp from the future", sent, -time.Second, nodes.ClockOffset{}, types.Aborted, "old"},
		{"no node time", time.Time{}, time.Millisecond, nodes.ClockOffset{}, types.InvalidArgument, "node_time is missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.measure(stamp.Stamp, c.nodeTime, sent.Add(c.received))
			if c.class != "" {
				require.Equal(t, c.class, types.ClassOf(err))
				require.ErrorContains(t, err, c.wantError)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}

	t.Run("a stamp of another daemon or altered is refused as aborted, which the agent retries", func(t *testing.T) {
		other := newStamper(func() time.Time { return daemonNow })
		good := []byte(s.stamp(daemonNow))
		if good[10] == 'B' { // another base64 letter: the sealed time altered
			good[10] = 'C'
		} else {
			good[10] = 'B'
		}
		for _, forged := range []string{other.stamp(daemonNow), string(good)} {
			_, err := s.measure(forged, daemonNow, daemonNow.Add(time.Millisecond))
			require.Equal(t, types.Aborted, types.ClassOf(err), "stamp %q", forged)
			require.ErrorContains(t, err, "take a fresh one")
		}
	})
	t.Run("what is no stamp at all is invalid", func(t *testing.T) {
		for _, bad := range []string{"", "not base64!", "c2hvcnQ"} {
			_, err := s.measure(bad, daemonNow, daemonNow.Add(time.Millisecond))
			require.Equal(t, types.InvalidArgument, types.ClassOf(err), "stamp %q", bad)
		}
	})
}

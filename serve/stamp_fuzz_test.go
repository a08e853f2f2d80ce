package serve

import (
	"strings"
	"testing"
	"time"

	"github.com/eru-extend/resources/types"
)

// FuzzHeartbeatStamp: the stamp and node time a heartbeat's body brings
// back are measured or refused with one invalid_argument or aborted line;
// a stamp this daemon did not seal never measures, and a measurement's
// uncertainty is half a round trip of at most MaxStampAge.
func FuzzHeartbeatStamp(f *testing.F) {
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano()
	f.Add("", true, base, int64(3e9), int64(40e6))
	f.Add("", true, base, int64(-1e9), int64(2e6))
	f.Add("", true, base, int64(0), int64(11e9))
	f.Add("", true, base, int64(0), int64(-1e9))
	f.Add("", true, int64(-1<<63), int64(1<<63-1), int64(1<<63-1))
	f.Add("", true, int64(1<<63-1), int64(-1<<63), int64(5e9))
	f.Add("AAAAAAAAAAA", false, base, int64(0), int64(0))
	f.Add("not a stamp\n", false, base, int64(0), int64(0))
	f.Add(strings.Repeat("A", 54), false, base, int64(1), int64(1))
	f.Fuzz(func(t *testing.T, stamp string, sealed bool, sentNS, nodeFromSent, receivedFromSent int64) {
		sent := time.Unix(0, sentNS)
		s := newStamper(func() time.Time { return sent })
		if sealed {
			stamp = s.stamp(sent)
		}
		received := sent.Add(time.Duration(receivedFromSent))
		nodeTime := sent.Add(time.Duration(nodeFromSent))
		off, err := s.measure(stamp, nodeTime, received)
		if err != nil {
			class := types.ClassOf(err)
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || class != types.InvalidArgument && class != types.Aborted {
				t.Fatalf("stamp %q refused not in one invalid_argument or aborted line: %s %q", stamp, class, msg)
			}
			return
		}
		if !sealed && stamp != s.stamp(sent) {
			t.Fatalf("stamp %q, not sealed by this daemon, measured %+v", stamp, off)
		}
		if off.Uncertainty < 0 || off.Uncertainty > MaxStampAge/2 {
			t.Fatalf("measured uncertainty %s out of [0, %s]", off.Uncertainty, MaxStampAge/2)
		}
	})
}

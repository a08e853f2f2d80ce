package queueset

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
)

// TestMisuseNeitherPanicsNorCountsTwice: a daemon must not die of a caller's
// mistake, and seats are returned exactly once.
func TestMisuseNeitherPanicsNorCountsTwice(t *testing.T) {
	qs, err := New(clock.NewFake(t0), Config{Queues: 1, HandSize: 1, QueueLengthLimit: 2}, 2)
	require.NoError(t, err)
	r := &Request{Hash: 1, Width: 1}
	out, _ := qs.Start(r)
	require.Equal(t, Dispatched, out)

	t.Run("a request started twice is rejected and its first start keeps its seat", func(t *testing.T) {
		out, reason := qs.Start(r)
		require.Equal(t, Rejected, out)
		require.Equal(t, ReasonReused, reason)
		require.Equal(t, 1, qs.SeatsInUse())
	})
	t.Run("a request finished twice returns its seat once", func(t *testing.T) {
		qs.Finish(r)
		qs.Finish(r)
		require.Equal(t, 0, qs.SeatsInUse())
	})
}

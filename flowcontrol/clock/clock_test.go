package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTheFakeClockRunsFunctionsInTimeOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	var got []string
	note := func(s string) func() {
		return func() { got = append(got, s+"@"+f.Now().Sub(start).String()) }
	}
	f.AfterFunc(2*time.Second, note("b"))
	f.AfterFunc(time.Second, note("a1"))
	f.AfterFunc(time.Second, note("a2"))
	stopped := f.AfterFunc(1500*time.Millisecond, note("never"))
	f.AfterFunc(time.Second, func() { f.AfterFunc(0, note("nested")) })
	require.True(t, stopped.Stop(), "a pending function can be stopped")
	require.False(t, stopped.Stop(), "only once")

	f.Advance(1500 * time.Millisecond)
	require.Equal(t, []string{"a1@1s", "a2@1s", "nested@1s"}, got, "ties run in the order scheduled")
	require.Equal(t, start.Add(1500*time.Millisecond), f.Now(), "Advance moves the time even without events")
	require.Equal(t, 1, f.Pending())
	f.Run()
	require.Equal(t, "b@2s", got[len(got)-1])
	require.Zero(t, f.Pending())
	f.RunUntil(start) // never backwards
	require.Equal(t, start.Add(2*time.Second), f.Now())
}

func TestTheRealClockFiresAfterFunc(t *testing.T) {
	done := make(chan struct{})
	Real{}.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the real clock never fired")
	}
	require.False(t, Real{}.Now().IsZero())
}

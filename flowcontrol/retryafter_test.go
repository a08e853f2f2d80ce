package flowcontrol

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryAfterFollowsKubernetesBackOffForTheSameDropPattern(t *testing.T) {
	tr := newDropTracker()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		second, drops int
		want          int
	}{
		{0, 5, 1}, {1, 11, 2}, {2, 1, 2}, {3, 11, 4}, {4, 1, 4}, {7, 1, 8},
		{11, 1, 8}, {15, 1, 7}, {17, 1, 6}, {21, 14, 5}, {22, 1, 10},
	}
	var got []int
	for _, s := range steps {
		now := start.Add(time.Duration(s.second) * time.Second)
		for range s.drops {
			tr.record("pl", now)
		}
		got = append(got, int(tr.retryAfter("pl")/time.Second))
	}
	want := []int{1, 2, 2, 4, 4, 8, 8, 7, 6, 5, 10}
	require.Equal(t, want, got)
}

func TestRetryAfterOfOneLevelDoesNotMoveAnother(t *testing.T) {
	tr := newDropTracker()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 10 {
		tr.record(fmt.Sprintf("pl-%d", i), now)
	}
	now = now.Add(time.Second)
	for i := range 10 {
		tr.record(fmt.Sprintf("pl-%d", i), now)
		require.Equal(t, time.Second, tr.retryAfter(fmt.Sprintf("pl-%d", i)))
	}
	for range 5 {
		tr.record("pl-0", now)
	}
	now = now.Add(time.Second)
	for i := range 10 {
		tr.record(fmt.Sprintf("pl-%d", i), now)
		want := time.Second
		if i == 0 {
			want = 2 * time.Second
		}
		require.Equal(t, want, tr.retryAfter(fmt.Sprintf("pl-%d", i)), "level pl-%d", i)
	}
	require.Equal(t, time.Second, tr.retryAfter("never-dropped"))
}

func TestRetryAfterNeverExceeds32Seconds(t *testing.T) {
	tr := newDropTracker()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for s := range 300 {
		for range 200 {
			tr.record("pl", now.Add(time.Duration(s)*time.Second))
		}
		require.LessOrEqual(t, tr.retryAfter("pl"), 32*time.Second)
	}
	require.Equal(t, 32*time.Second, tr.retryAfter("pl"))
}

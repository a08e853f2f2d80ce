package cmd

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestColdGCCollectsAtItsLimitUntilMuchIsLiveThenRunsAtGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	// A limit whose half is 8 MiB above what this test process holds.
	limit := 2 * (int64(live[0].Value.Uint64()) + 8<<20)
	coldGC(limit)
	cold := func() bool {
		return debug.SetGCPercent(-1) == ColdGCPercent && debug.SetGCPercent(ColdGCPercent) == -1 && debug.SetMemoryLimit(-1) == limit
	}
	require.True(t, cold(), "no collection before the limit")
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // the cleanup runs after the collection
	require.True(t, cold(), "a collection that finds little alive keeps the limit")
	held := make([]byte, 16<<20)
	for i := range held {
		held[i] = byte(i)
	}
	runtime.GC()
	require.Eventually(t, func() bool {
		return debug.SetGCPercent(-1) == GCPercent && debug.SetGCPercent(GCPercent) == -1 && debug.SetMemoryLimit(-1) == math.MaxInt64
	}, 5*time.Second, time.Millisecond, "a collection that finds more than half the limit alive lifts it and sets the ordinary target")
	runtime.KeepAlive(held)
}

func TestColdGCLeavesAnOperatorsGOGCAndGOMEMLIMITAlone(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env+" set keeps the process's collector as the runtime set it", func(t *testing.T) {
			t.Setenv(env, "150")
			defer debug.SetGCPercent(debug.SetGCPercent(123))
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
			ColdGC()
			require.Equal(t, 123, debug.SetGCPercent(123))
			require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
		})
	}
}

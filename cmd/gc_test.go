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

func TestTheCollectorWaitsForItsLimitUntilMuchIsLiveThenRunsAtItsTarget(t *testing.T) {
	for _, c := range []struct {
		name   string
		set    func(limit int64)
		target int
	}{
		{"a plugin process (ColdGC) then runs at GCPercent", coldGC, GCPercent},
		{"the daemon (DaemonGC) then runs at Go's default", func(limit int64) { gcFloor(limit, DaemonGCPercent) }, DaemonGCPercent},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer debug.SetGCPercent(debug.SetGCPercent(100))
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
			runtime.GC()
			live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			metrics.Read(live)
			// A limit whose half is 8 MiB above what this test process holds.
			limit := 2 * (int64(live[0].Value.Uint64()) + 8<<20)
			c.set(limit)
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
				return debug.SetGCPercent(-1) == c.target && debug.SetGCPercent(c.target) == -1 && debug.SetMemoryLimit(-1) == math.MaxInt64
			}, 5*time.Second, time.Millisecond, "a collection that finds more than half the limit alive lifts it and sets the target")
			runtime.KeepAlive(held)
		})
	}
}

func TestDaemonGCCollectsFirstAtItsFloor(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	DaemonGC()
	require.Equal(t, int64(DaemonMemoryFloor), debug.SetMemoryLimit(-1))
	require.Equal(t, ColdGCPercent, debug.SetGCPercent(ColdGCPercent))
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
			DaemonGC()
			require.Equal(t, 123, debug.SetGCPercent(123), "nor does DaemonGC")
			require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
		})
	}
}

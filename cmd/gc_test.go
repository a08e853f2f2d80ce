package cmd

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestColdGCCollectsLateUntilTheFirstCollectionThenRunsAtGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	ColdGC()
	require.Equal(t, ColdGCPercent, debug.SetGCPercent(ColdGCPercent), "the first collection comes late")
	runtime.GC()
	require.Eventually(t, func() bool {
		return debug.SetGCPercent(ColdGCPercent) == GCPercent && debug.SetGCPercent(GCPercent) == ColdGCPercent
	}, 5*time.Second, time.Millisecond, "the first collection sets the ordinary target")
}

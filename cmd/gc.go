package cmd

import (
	"runtime"
	"runtime/debug"
)

// ColdGCPercent is the garbage collector's target until a plugin process's
// first collection (see ColdGC): Go starts collecting at a heap of 4 MiB
// times the target over 100, so 800 lets the heap reach 32 MiB first.
const ColdGCPercent = 800

// ColdGC sets the garbage collector of one short plugin process: no
// collection until the heap reaches 32 MiB, which a call about one node or
// a thousand never does, so it spends nothing on collection (at 1,000
// nodes, collecting at GCPercent from the start cost a tenth to a quarter
// of the CPU); from the first collection on, the target is GCPercent,
// which keeps the peak of a many-node read a small multiple of its live
// data as before. It is a process option, for main: the serve daemon keeps
// Go's default.
func ColdGC() {
	debug.SetGCPercent(ColdGCPercent)
	// The first collection finds the sentinel unreachable and runs its
	// cleanup, which hands the process to the ordinary target.
	sentinel := new([64]byte)
	runtime.AddCleanup(sentinel, func(int) { debug.SetGCPercent(GCPercent) }, 0)
}

package cmd

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
)

// ColdGCPercent is the garbage collector's target while a plugin process
// holds little (see ColdGC): Go starts collecting at a heap of 4 MiB times
// the target over 100, so 800 puts the first collection at 32 MiB, past
// ColdMemoryLimit.
const ColdGCPercent = 800

// ColdMemoryLimit is the Go memory (heap, stacks, the runtime's own) a
// plugin process collects garbage at while what it holds is small: a call
// about one node or a thousand never reaches it (a 1,000-node capacity
// query peaks near 11 MiB above the process's start), and a many-node
// read, which decodes page by page and drops each page, collects whenever
// it does, so its peak stays near it however many nodes it reads.
const ColdMemoryLimit = 24 << 20

// ColdGC sets the garbage collector of one short plugin process: no
// collection until its Go memory reaches ColdMemoryLimit, which a call
// about one node or a thousand never does, so it spends nothing on
// collection (at 1,000 nodes, collecting at GCPercent from the start cost
// a tenth to a quarter of the CPU); a read of many nodes, which holds a
// few pages at a time, collects at the limit, a few times. A process that
// comes to hold more than half the limit (a verb that keeps every node it
// read) would collect ever more often at it: the first collection that
// finds that much alive lifts the limit and sets the target to GCPercent,
// which keeps its peak a small multiple of what it holds. It is a process
// option, for main (the serve daemon has DaemonGC). An operator who
// sets GOGC or GOMEMLIMIT for the plugin gets exactly that instead.
func ColdGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	coldGC(ColdMemoryLimit)
}

func coldGC(limit int64) { gcFloor(limit, GCPercent) }

// DaemonMemoryFloor is the Go memory the serve daemon first collects
// garbage at while what it holds is small (see DaemonGC).
const DaemonMemoryFloor = 64 << 20

// DaemonGCPercent is the daemon's target once it holds more than half of
// DaemonMemoryFloor: Go's default.
const DaemonGCPercent = 100

// DaemonGC sets the garbage collector of the serve daemon, a long-running
// process: Go's default target once it holds much, but no collection
// before its Go memory reaches DaemonMemoryFloor while it holds less than
// half of it. A daemon caching a small cluster holds a few MiB, and at Go's
// default target collected every 4 MiB or so allocated: at 1,000 nodes a
// collection (some 1.5 ms of CPU) every 65 forwarded calls, a twentieth of
// the daemon's CPU per call. A daemon caching a large cluster is past the
// floor from its first list and runs at Go's default. An operator who sets
// GOGC or GOMEMLIMIT for the daemon gets exactly that instead. It is a
// process option, for the daemon's main.
func DaemonGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	gcFloor(DaemonMemoryFloor, DaemonGCPercent)
}

// gcFloor collects at limit (and at ColdGCPercent) until a collection finds
// more than half of it alive, then at percent without a limit.
func gcFloor(limit int64, percent int) {
	debug.SetGCPercent(ColdGCPercent)
	debug.SetMemoryLimit(limit)
	watchLive(uint64(limit/2), percent)
}

// watchLive looks at the heap after each collection (a sentinel's cleanup
// runs once the collection has found it unreachable) and hands the process
// to the target percent, without a limit, once it exceeds most. The heap
// is read with runtime.ReadMemStats, once per collection: package
// runtime/metrics, which reads the live heap exactly, builds its table of
// every metric at its initialisation, a tenth of a millisecond of every
// plugin process's start; what the heap holds right after a collection is
// what it found alive, give or take what was allocated since.
func watchLive(most uint64, percent int) {
	runtime.AddCleanup(new([64]byte), func(most uint64) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc <= most {
			watchLive(most, percent)
			return
		}
		debug.SetMemoryLimit(math.MaxInt64)
		debug.SetGCPercent(percent)
	}, most)
}

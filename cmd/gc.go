package cmd

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
// option, for main: the serve daemon keeps Go's default. An operator who
// sets GOGC or GOMEMLIMIT for the plugin gets exactly that instead.
func ColdGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	coldGC(ColdMemoryLimit)
}

func coldGC(limit int64) {
	debug.SetGCPercent(ColdGCPercent)
	debug.SetMemoryLimit(limit)
	watchLive(uint64(limit / 2))
}

// watchLive looks at the live heap after each collection (a sentinel's
// cleanup runs once the collection has found it unreachable) and hands
// the process to the ordinary target, without a limit, once it exceeds
// most.
func watchLive(most uint64) {
	runtime.AddCleanup(new([64]byte), func(most uint64) {
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(live)
		if live[0].Value.Kind() == metrics.KindUint64 && live[0].Value.Uint64() <= most {
			watchLive(most)
			return
		}
		debug.SetMemoryLimit(math.MaxInt64)
		debug.SetGCPercent(GCPercent)
	}, most)
}

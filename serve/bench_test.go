package serve

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The daemon's side of issue 15's goals, in process (tools/bench times the
// whole calls against the binaries run cold):
//
//	go test ./serve -run XXX -bench . -benchtime 10x

// BenchmarkCapacityQuery is a capacity query over every node as the daemon
// runs a forwarded one (records decoded in the cache) and as the binary
// runs it (its own read of etcd, every record decoded).
func BenchmarkCapacityQuery(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		c := newCluster(b, n)
		in := c.capacityRequest(b, c.names)
		for _, side := range []struct {
			name string
			run  func(binary, verb, stdin string) (int, string, string)
		}{{"daemon", c.served}, {"cold", c.cold}} {
			b.Run(fmt.Sprintf("%d nodes/%s", n, side.name), func(b *testing.B) {
				b.ReportAllocs()
				cpu := cpuTime(b)
				for b.Loop() {
					code, _, errb := side.run("storage", "get-nodes-deploy-capacity", in)
					require.Equal(b, 0, code, errb)
				}
				cpu()
			})
		}
	}
}

// BenchmarkMetricsScrape renders every node's series as /metrics does
// after a change: sampled from the decoded records, no store read.
func BenchmarkMetricsScrape(b *testing.B) {
	c := newCluster(b, 10000)
	ctx := context.Background()
	reads := c.d.Cache().Stats().EtcdReads
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		c.d.samples = nil // render again, as after a change
		snap, err := c.d.nodeSamples(ctx)
		require.NoError(b, err)
		require.NoError(b, writeNodeMetrics(io.Discard, snap))
	}
	cpu()
	require.Equal(b, reads, c.d.Cache().Stats().EtcdReads, "a scrape reads nothing from etcd")
}

// cpuTime reports, when the returned function is called, the process's CPU
// time per operation since cpuTime was: a figure a loaded machine moves
// less than the wall time (etcd runs in the process too, so a read of etcd
// counts in it).
func cpuTime(b *testing.B) func() {
	now := func() time.Duration {
		var ru syscall.Rusage
		require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := now()
	return func() {
		b.ReportMetric(float64(now()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}
}

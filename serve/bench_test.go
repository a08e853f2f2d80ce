package serve

import (
	"context"
	"fmt"
	"io"
	"testing"

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
				for b.Loop() {
					code, _, errb := side.run("storage", "get-nodes-deploy-capacity", in)
					require.Equal(b, 0, code, errb)
				}
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
	for b.Loop() {
		c.d.samples = nil // render again, as after a change
		snap, err := c.d.nodeSamples(ctx)
		require.NoError(b, err)
		require.NoError(b, writeNodeMetrics(io.Discard, snap))
	}
	require.Equal(b, reads, c.d.Cache().Stats().EtcdReads, "a scrape reads nothing from etcd")
}

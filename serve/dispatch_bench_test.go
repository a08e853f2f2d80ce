package serve

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/store/storetest"
)

// BenchmarkAForwardedSingleNodeCall times one forwarded
// get-node-resource-info on etcd from the client's connect to its last
// byte read: the daemon's whole request path (accept, peer check, request
// decoding, admission, the linearizable read, the answer), without the
// process start of the binary that forwards it.
//
//	go test ./serve -run '^$' -bench AForwarded -cpuprofile cpu.out
func BenchmarkAForwardedSingleNodeCall(b *testing.B) {
	etcd := storetest.SharedEtcd(b)
	dir := b.TempDir()
	file := filepath.Join(dir, "storage.yaml")
	// A prefix of its own for each run: -count runs the benchmark again on
	// the same etcd, where the node of the run before is still registered.
	prefix := fmt.Sprintf("/bench-forward-%d-%d", os.Getpid(), clusters.Add(1))
	require.NoError(b, os.WriteFile(file, []byte(fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %s\n", etcd.Endpoint, prefix)), 0o644))
	cfg, err := config.Load(file, "storage")
	require.NoError(b, err)
	sc, err := LoadConfig(file, dir)
	require.NoError(b, err)
	d, err := New(context.Background(), "storage", dir, cfg, sc, slog.New(slog.DiscardHandler), nil)
	require.NoError(b, err)
	require.NoError(b, d.Listen())
	go d.ServeSocket()
	b.Cleanup(func() {
		require.NoError(b, d.Shutdown(5e9))
		d.Close()
	})
	b.Chdir(dir)
	b.Setenv(forward.EnvPath, "")
	call := func(verb, stdin string) (int, string) {
		var out, errb bytes.Buffer
		o := forward.Forward(forward.Call{Binary: "storage", Args: []string{verb}, Stdin: bytes.NewReader([]byte(stdin)), Stdout: &out, Stderr: &errb})
		require.True(b, o.Handled, "the daemon took the call")
		return o.Code, out.String() + errb.String()
	}
	code, out := call("add-node", `{"nodename":"n1","resource":{"volumes":["/data0:1T"],"storage":"2T"}}`)
	require.Equal(b, 0, code, out)
	before := d.Cache().Stats()
	b.ResetTimer()
	for b.Loop() {
		code, out := call("get-node-resource-info", `{"nodename":"n1","workloads_resource":[]}`)
		if code != 0 {
			b.Fatal(out)
		}
	}
	after := d.Cache().Stats()
	b.ReportMetric(float64(after.Cached+after.Direct-before.Cached-before.Direct)/float64(b.N), "store-reads/op")
}

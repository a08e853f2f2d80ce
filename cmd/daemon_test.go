package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store/storetest"
)

// A long-running process (the serve daemon) calls Main again and again,
// from many goroutines at once. Nothing a call uses may outlive it:
// goroutines, open files, memory.

// daemonScript is one worker's round of calls on its own node: every verb
// of both binaries, ending with the node removed so the next round starts
// afresh. Each call must succeed.
func daemonScript(node string) []daemonCall {
	var out []daemonCall
	for _, bin := range []string{"storage", "compute"} {
		for _, verb := range []string{
			"name", "get-metrics-description", "add-node", "get-nodes-deploy-capacity", "set-node-resource-capacity",
			"set-node-resource-usage", "get-node-resource-info", "get-most-idle-node", "calculate-deploy",
			"calculate-realloc", "calculate-remap", "get-metrics", "fix-node-resource", "set-node-resource-info",
			"remove-node",
		} {
			req := strings.NewReplacer(`"n1"`, `"`+node+`"`, `"n2"`, `"`+node+`x"`).Replace(validRequests[bin][verb])
			out = append(out, daemonCall{bin: bin, args: []string{verb}, stdin: req})
		}
	}
	return out
}

type daemonCall struct {
	bin   string
	args  []string
	stdin string
}

// usage is what the process holds.
type usage struct {
	goroutines int
	files      int
	heap       uint64
}

func measure(t *testing.T) usage {
	t.Helper()
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return usage{goroutines: runtime.NumGoroutine(), files: len(fds), heap: m.HeapAlloc}
}

// settle waits for what closing clients leave behind to finish (gRPC ends
// its goroutines asynchronously) and returns the usage once within
// tolerance of base, or the last one measured.
func settle(t *testing.T, base usage, tol usage) usage {
	t.Helper()
	var now usage
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		now = measure(t)
		if now.goroutines <= base.goroutines+tol.goroutines && now.files <= base.files+tol.files && now.heap <= base.heap+tol.heap {
			break
		}
	}
	return now
}

func TestMainLeavesNothingBehind(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts open files in /proc/self/fd")
	}
	calls := 10000
	if testing.Short() {
		calls = 1000
	}
	const workers = 16
	dir := t.TempDir()
	configs := map[string]string{
		"embedded": fmt.Sprintf("embedded:\n  path: %q\n  lock_timeout: 60s\n", filepath.Join(dir, "store.db")),
		"etcd":     fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %q\n  dial_timeout: 30s\n  call_timeout: 30s\n", storetest.SharedEtcd(t).Endpoint, fmt.Sprintf("/daemon-%d-%d", os.Getpid(), inProcessPrefix.Add(1))),
	}
	for _, name := range []string{"embedded", "etcd"} {
		config := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(config, []byte(configs[name]), 0o644))
		run := func(c daemonCall) (int, string, string) {
			var stdout, stderr bytes.Buffer
			code := Main(c.bin, append([]string{"--config", config}, c.args...), strings.NewReader(c.stdin), &stdout, &stderr)
			return code, stdout.String(), stderr.String()
		}
		t.Run(fmt.Sprintf("%d verbs from %d goroutines on the %s store", calls, workers, name), func(t *testing.T) {
			// Warm up: the first calls load what stays loaded for the
			// process's life (code, gRPC's resolvers, the config's caches).
			for _, c := range daemonScript("warmup") {
				code, _, stderr := run(c)
				require.Equal(t, 0, code, "%s %v: %s", c.bin, c.args, stderr)
			}
			base := measure(t)

			var done, failed atomic.Int64
			var firstFailure atomic.Value
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					script := daemonScript(fmt.Sprintf("w%02d", w))
					for i := 0; done.Add(1) <= int64(calls); i++ {
						c := script[i%len(script)]
						code, stdout, stderr := run(c)
						if code != 0 || stderr != "" || stdout == "" {
							failed.Add(1)
							firstFailure.CompareAndSwap(nil, fmt.Sprintf("%s %v exited %d: %s", c.bin, c.args, code, stderr))
						}
					}
				})
			}
			wg.Wait()
			require.Zero(t, failed.Load(), "calls failed; the first: %v", firstFailure.Load())

			// A leak of one goroutine or one file a call shows far beyond
			// these margins, and so does 2 KiB of heap a call over the full
			// run's 10,000 calls (the quick loop's 1,000 show a leak of
			// 4 KiB a call on the embedded store, 16 KiB on etcd). The etcd
			// server runs in this process too and keeps its raft log in
			// memory until its next snapshot (some 600 bytes a write here),
			// so its store gets the larger heap margin.
			tol := usage{goroutines: 8, files: 8, heap: 4 << 20}
			if name == "etcd" {
				tol.heap = 16 << 20
			}
			after := settle(t, base, tol)
			require.LessOrEqual(t, after.goroutines, base.goroutines+tol.goroutines, "goroutines: %d before, %d after", base.goroutines, after.goroutines)
			require.LessOrEqual(t, after.files, base.files+tol.files, "open files: %d before, %d after", base.files, after.files)
			require.LessOrEqual(t, after.heap, base.heap+tol.heap, "heap: %d bytes before, %d after", base.heap, after.heap)
			t.Logf("goroutines %d -> %d, open files %d -> %d, heap %d KiB -> %d KiB", base.goroutines, after.goroutines, base.files, after.files, base.heap>>10, after.heap>>10)
		})
	}
}

package serve_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/forward"
)

// TestAReadThroughAStoppedDaemonIsRunByTheBinary: with the daemon stopped
// (SIGSTOP, as a debugger or a stuck host would leave it), a read through
// the binary answers what a local run answers once the daemon has been
// silent for forward.ReadStall, well inside core's call timeout (30 s),
// instead of waiting for it; once the daemon runs again, calls go through
// it again.
func TestAReadThroughAStoppedDaemonIsRunByTheBinary(t *testing.T) {
	t.Parallel() // waits on a stopped daemon of its own
	env, d := servedEmbedded(t)
	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": []string{"/data0:1T"}, "storage": "2T"}}, nil)
	req := obj{"nodename": "n1", "workloads_resource": []any{}}
	want := local(t, env, "storage", mustJSON(t, req), "get-node-resource-info")
	require.Equal(t, 0, want.Code, want.Stderr)
	forwarded := d.Forwarded(t)

	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGSTOP))
	stopped := true
	cont := func() {
		if stopped {
			require.NoError(t, d.Cmd.Process.Signal(syscall.SIGCONT))
			stopped = false
		}
	}
	t.Cleanup(cont) // before the daemon's own cleanup stops it
	start := time.Now()
	got := env.Verb(t, "storage", "get-node-resource-info", req)
	took := time.Since(start)
	require.Equal(t, [3]any{want.Code, want.Stdout, want.Stderr}, [3]any{got.Code, got.Stdout, got.Stderr}, "the binary answered the read itself")
	require.GreaterOrEqual(t, took, forward.ReadStall, "it waited for the daemon first")
	require.Less(t, took, 3*forward.ReadStall, "it did not wait for core's call timeout")

	cont()
	again := env.Verb(t, "storage", "get-node-resource-info", req)
	require.Equal(t, [3]any{want.Code, want.Stdout, want.Stderr}, [3]any{again.Code, again.Stdout, again.Stderr})
	require.Eventually(t, func() bool { return d.Forwarded(t) >= forwarded+1 }, 10*time.Second, 50*time.Millisecond,
		"the daemon serves calls again once it runs")
}

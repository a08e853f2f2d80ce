package serve_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/tests/testenv"
)

// TestADaemonHoldsNoMoreAfterCallsThanBefore runs every verb of both
// plugins through a daemon many times, successes and refusals, with the
// operator API's reads beside them, and then
// requires the daemon's open files and goroutines, as its own /metrics
// reports them (process_open_fds, go_goroutines), to come back to what it
// held before the calls: a long-running daemon must not keep a connection,
// a file, a lease's goroutine or a timer per call.
func TestADaemonHoldsNoMoreAfterCallsThanBefore(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		d := serveWithHTTP(t, env)
		// One pass first: what the daemon sets up once (the store's
		// connections, the cache's records, flow control's levels) is not
		// a leak.
		run := func() {
			for _, s := range scenario {
				env.Exec(t, s.bin, []byte(s.stdin), s.verb)
			}
			for _, path := range []string{"/v1/nodes", "/v1/nodes/n1", "/v1/nodes/n9", "/v1/clock", "/v1/overcommit/defaults", "/v1/pools", "/healthz", "/readyz"} {
				d.Get(t, path)
			}
		}
		run()
		settled := func(name string) float64 {
			var v float64
			prev := -1.0
			require.Eventually(t, func() bool {
				v = sumMetric(t, d, name+" ")
				same := v == prev
				prev = v
				return same
			}, 10*time.Second, 200*time.Millisecond, "%s never held still", name)
			return v
		}
		fds, goroutines := settled("process_open_fds"), settled("go_goroutines")
		require.Positive(t, fds, "the daemon reports its open files")
		require.Positive(t, goroutines, "the daemon reports its goroutines")
		const passes = 5
		before := d.Forwarded(t)
		for range passes {
			run()
		}
		calls := passes * len(scenario)
		verbs := 0
		for _, s := range scenario {
			if !forward.NoInput(s.verb) {
				verbs++
			}
		}
		require.Equal(t, passes*verbs, d.Forwarded(t)-before, "every call that reads a request went through the daemon")
		require.Eventually(t, func() bool {
			return sumMetric(t, d, "process_open_fds ") <= fds && sumMetric(t, d, "go_goroutines ") <= goroutines
		}, 10*time.Second, 100*time.Millisecond,
			"after %d more calls the daemon holds %v open files (%v before) and %v goroutines (%v before)",
			calls, sumMetric(t, d, "process_open_fds "), fds, sumMetric(t, d, "go_goroutines "), goroutines)
	})
}

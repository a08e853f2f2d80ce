package serve_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestADaemonKilledAtRandomLosesNoWriteAndAppliesNoneTwice runs writers
// that each add 1 GiB of usage to one node while the daemon is SIGKILLed
// and restarted at random moments (calls run through it, locally while it
// is down, or die with it). Every acknowledged write is in the final
// record (none lost); every write that landed was acknowledged or answered
// "outcome unknown" (none applied twice, none reported failed yet landed).
func TestADaemonKilledAtRandomLosesNoWriteAndAppliesNoneTwice(t *testing.T) {
	testenv.BackendsInTurn(t, func(t *testing.T, env *testenv.Env) {
		if d := env.Daemon(); d != nil {
			d.Stop(t)
		}
		const writers = 8
		total := 400
		if testing.Short() {
			total = 120
		}
		env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": []string{"/data0:100T"}, "storage": "0"}}, nil)
		before := storedUsage(t, env)
		req := obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true}

		var acked, unknown, failed atomic.Int64
		var wg sync.WaitGroup
		var next, made atomic.Int64
		for range writers {
			wg.Go(func() {
				// total writes, and on (up to four times as many) until one
				// has died with the daemon: a load whose kills all fell
				// between calls checks nothing of a kill mid-call.
				for {
					if i := next.Add(1); i > int64(total) && (unknown.Load() > 0 || i > 4*int64(total)) {
						return
					}
					made.Add(1)
					res := env.Verb(t, "storage", "set-node-resource-usage", req)
					switch {
					case res.Code == 0:
						acked.Add(1)
					case testenv.OutcomeUnknown(res):
						unknown.Add(1)
					default:
						failed.Add(1)
						t.Logf("refused: %s", strings.TrimSpace(res.Stderr))
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		kills := env.KillDaemonAtRandom(t, uint64(time.Now().UnixNano()), done)
		if d := env.Daemon(); d != nil {
			d.Stop(t)
		}
		landed := (storedUsage(t, env) - before) >> 30
		t.Logf("%s: %d writes, %d daemon kills: %d acknowledged, %d outcome unknown, %d refused; %d landed",
			env.Kind, made.Load(), kills, acked.Load(), unknown.Load(), failed.Load(), landed)
		require.GreaterOrEqual(t, landed, acked.Load(), "an acknowledged write was lost")
		require.LessOrEqual(t, landed, acked.Load()+unknown.Load(), "a write landed twice, or one reported failed landed")
		require.Positive(t, kills)
		// While the daemon is down the calls run locally: a refusal is no
		// outcome of a kill, and a load that is mostly refused would meet
		// both bounds above with nothing acknowledged.
		require.LessOrEqual(t, failed.Load(), made.Load()/100, "at most one write in a hundred is refused")
		// A kill between calls proves nothing: some write must have died
		// with the daemon holding it.
		require.Positive(t, unknown.Load(), "no write died with the daemon: the kills never landed mid-call")
	})
}

func storedUsage(t *testing.T, env *testenv.Env) int64 {
	t.Helper()
	var info struct {
		Usage struct {
			Volumes map[string]int64 `json:"volumes"`
		} `json:"usage"`
	}
	res := local(t, env, "storage", mustJSON(t, obj{"nodename": "n1"}), "get-node-resource-info")
	require.Equal(t, 0, res.Code, res.Stderr)
	require.NoError(t, jsonUnmarshal(res.Stdout, &info))
	return info.Usage.Volumes["/data0"]
}

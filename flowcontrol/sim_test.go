package flowcontrol

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
	"github.com/eru-extend/resources/flowcontrol/queueset"
)

// sim drives a Controller on a simulated clock: closed-loop clients that
// call, execute for a while, think, and call again.
type sim struct {
	t        *testing.T
	clk      *clock.Fake
	c        *Controller
	start    time.Time
	rejected map[string]int // by reason
}

func newSim(t *testing.T, cfg Config) *sim {
	start := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	c, err := New(cfg, clk, nil)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &sim{t: t, clk: clk, c: c, start: start, rejected: map[string]int{}}
}

// simClient is a closed-loop client of identical threads.
type simClient struct {
	req         Request
	threads     int
	calls       int // per thread; 0 means unlimited
	exec, think time.Duration
	delay       time.Duration // before the first call
	executing   *queueset.Integrator
	running     int // executing now
	maxRunning  int
	retryReject time.Duration // pause after a rejection
}

// run starts the client's threads.
func (s *sim) run(cl *simClient) {
	cl.executing = queueset.NewIntegrator(s.clk)
	if cl.retryReject == 0 {
		cl.retryReject = time.Millisecond
	}
	for j := range cl.threads {
		var call func(k int)
		call = func(k int) {
			if cl.calls > 0 && k >= cl.calls {
				return
			}
			var t *Ticket
			execute := func() {
				cl.running++
				cl.maxRunning = max(cl.maxRunning, cl.running)
				cl.executing.Add(float64(max(cl.req.Width, 1)))
				s.clk.AfterFunc(cl.exec, func() {
					cl.running--
					cl.executing.Add(-float64(max(cl.req.Width, 1)))
					t.Done()
					s.clk.AfterFunc(cl.think, func() { call(k + 1) })
				})
			}
			var queued bool
			var err error
			t, queued, err = s.c.start(cl.req, time.Time{}, false, func() {
				if t.err != nil {
					s.rejected[t.err.Reason]++
					s.clk.AfterFunc(cl.retryReject, func() { call(k + 1) })
					return
				}
				// Dispatched under the controller's lock: run on the clock.
				s.clk.AfterFunc(0, execute)
			})
			switch {
			case err != nil:
				r, ok := IsRejected(err)
				require.True(s.t, ok)
				s.rejected[r.Reason]++
				s.clk.AfterFunc(cl.retryReject, func() { call(k + 1) })
			case !queued:
				execute()
			}
		}
		s.clk.AfterFunc(cl.delay+time.Duration(j), func() { call(0) })
	}
}

func (s *sim) runUntil(d time.Duration) { s.clk.RunUntil(s.start.Add(d)) }

func pct(x float64) float64 { return math.Round(x*1e6) / 1e4 }

package flowcontrol

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
)

// seatsHeld is the seats held by executing requests across every level,
// active or draining.
func (c *Controller) seatsHeld() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.holdingLocked() {
		if l.exempt {
			n += l.inUse
		} else {
			n += l.qs.SeatsInUse()
		}
	}
	return n
}

// fill admits requests r (of a Reject level) until one is rejected, and
// returns the admitted.
func fill(t *testing.T, c *Controller, r Request, most int) []*Ticket {
	t.Helper()
	var held []*Ticket
	for range most + 1 {
		tk, err := c.Admit(context.Background(), r)
		if err != nil {
			_, ok := IsRejected(err)
			require.True(t, ok, "%v", err)
			return held
		}
		held = append(held, tk)
	}
	require.Failf(t, "never rejected", "%d requests admitted, at most %d expected", len(held), most)
	return nil
}

// TestALevelRemovedWhileItDrainsKeepsItsSharesUntilDrained: a level a reload
// removes (or retypes) while its requests still hold seats (or wait) is
// counted in the sum of shares, as Kubernetes counts a quiescing level,
// so the levels left do not get the whole server while it drains; once it
// has drained its shares go to the others.
func TestALevelRemovedWhileItDrainsKeepsItsSharesUntilDrained(t *testing.T) {
	const serverCL = 10
	queue := &LimitResponse{Type: ResponseQueue, Queues: ptr(1), HandSize: ptr(1), QueueLengthLimit: ptr(1)}
	for _, tc := range []struct {
		name     string
		response *LimitResponse
		waiter   bool // one request of the old level waits in its queue at the reload
		retype   bool // the reload makes the level Exempt instead of removing it
	}{
		{"a removed Reject level with its seats full", &LimitResponse{Type: ResponseReject}, false, false},
		{"a removed Queue level with its seats full and a request waiting", queue, true, false},
		{"a Limited level made Exempt with its seats full", &LimitResponse{Type: ResponseReject}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{
				ServerConcurrency: ptr(serverCL),
				Levels: []Level{
					{Name: "old", Type: TypeLimited, NominalConcurrencyShares: ptr(5), LendablePercent: ptr(0), LimitResponse: tc.response},
					{Name: "rest", Type: TypeLimited, NominalConcurrencyShares: ptr(5), LendablePercent: ptr(0), LimitResponse: &LimitResponse{Type: ResponseReject}},
				},
				Schemas: []Schema{
					{Name: "old", Precedence: 1, Level: "old", Match: Match{Verbs: []string{"old"}}},
					{Name: "rest", Precedence: 2, Level: "rest", Match: Match{Any: true}},
				},
			}.WithDefaults()
			clk := clock.NewFake(time.Now())
			c, err := New(cfg, clk, nil)
			require.NoError(t, err)
			defer c.Close()

			lim, _ := c.Limits("old")
			require.Equal(t, 5, lim.Current, "the old level's nominal half of the server")
			var old []*Ticket
			for range lim.Current {
				tk, err := c.Admit(context.Background(), Request{Verb: "old"})
				require.NoError(t, err)
				old = append(old, tk)
			}
			dispatched := make(chan struct{})
			if tc.waiter {
				tk, queued, err := c.start(Request{Verb: "old"}, time.Time{}, false, func() { close(dispatched) })
				require.NoError(t, err)
				require.True(t, queued)
				old = append(old, tk)
			}

			next := cfg
			if tc.retype {
				next.Levels = []Level{{Name: "old", Type: TypeExempt}, cfg.Levels[1]}
				next = next.WithDefaults()
			} else {
				next.Levels, next.Schemas = cfg.Levels[1:], cfg.Schemas[1:]
			}
			require.NoError(t, c.Reload(next))

			rest := fill(t, c, Request{Verb: "rest"}, serverCL)
			require.LessOrEqual(t, c.seatsHeld(), serverCL, "seats in use within the server's limit after the reload")
			require.Len(t, rest, 5, "the level left keeps its share while the old one drains")
			lim, _ = c.Limits("rest")
			require.Equal(t, 5, lim.Nominal)

			clk.Advance(AdjustPeriod)
			require.Empty(t, fill(t, c, Request{Verb: "rest"}, serverCL), "a re-division lends it nothing the old level holds")
			require.LessOrEqual(t, c.seatsHeld(), serverCL, "seats in use within the server's limit after a re-division")

			for i, tk := range old[:5] {
				tk.Done()
				if tc.waiter && i == 0 {
					<-dispatched // the waiter takes the seat freed in its level
					require.Nil(t, old[5].err, "dispatched, not rejected")
				}
				require.LessOrEqual(t, c.seatsHeld(), serverCL, "seats in use within the server's limit while it drains")
			}
			if tc.waiter {
				old[5].Done()
			}
			c.mu.Lock()
			retiring := len(c.retiring)
			c.mu.Unlock()
			require.Zero(t, retiring, "the old level has drained")

			lim, _ = c.Limits("rest")
			require.Equal(t, Limits{Nominal: serverCL, Min: serverCL, Max: 2 * serverCL, Current: serverCL}, lim,
				"the drained level's shares go to the level left")
			rest = append(rest, fill(t, c, Request{Verb: "rest"}, serverCL)...)
			require.Len(t, rest, serverCL, "the level left now has the whole server")
			for _, tk := range rest {
				tk.Done()
			}
		})
	}
}

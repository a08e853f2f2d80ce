package flowcontrol

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
)

// TestAReloadThatChangesALevelsTypeKeepsItsGauges: the level is made anew
// under the same name; its per-level gauges are the new level's, not
// forgotten with the old one.
func TestAReloadThatChangesALevelsTypeKeepsItsGauges(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(cfg *Config)
	}{
		{"a Limited level made Exempt", func(cfg *Config) {
			cfg.Levels[4].Type, cfg.Levels[4].LimitResponse = TypeExempt, nil
		}},
		{"an Exempt level made Limited", func(cfg *Config) {
			cfg.Levels[0].Type, cfg.Levels[0].NominalConcurrencyShares = TypeLimited, ptr(5)
			cfg.Levels[0].LimitResponse = &LimitResponse{Type: ResponseReject}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(time.Now())
			ctl, err := New(DefaultConfig(), clk, prometheus.NewRegistry())
			require.NoError(t, err)
			defer ctl.Close()
			next := DefaultConfig()
			c.change(&next)
			require.NoError(t, ctl.Reload(next))
			for _, g := range []*prometheus.GaugeVec{ctl.m.nominalLimit, ctl.m.lowerLimit, ctl.m.upperLimit, ctl.m.currentLimit} {
				require.Equal(t, 5, testutil.CollectAndCount(g), "one series per level")
			}
			clk.Advance(3 * AdjustPeriod)
			for _, g := range []*prometheus.GaugeVec{ctl.m.nominalLimit, ctl.m.lowerLimit, ctl.m.upperLimit, ctl.m.currentLimit} {
				require.Equal(t, 5, testutil.CollectAndCount(g), "one series per level, after re-divisions")
			}
		})
	}
}

// TestCloseRefusesARequestAWithdrawalMadeRoomFor: withdrawing a wide
// waiting request frees the head of its queue; the narrower one behind
// it is refused with reason shutdown too, not admitted.
func TestCloseRefusesARequestAWithdrawalMadeRoomFor(t *testing.T) {
	ctx := context.Background()
	ctl, err := New(oneLevel(2, &LimitResponse{Type: ResponseQueue, Queues: ptr(64), HandSize: ptr(1), QueueLengthLimit: ptr(10)}), clock.NewFake(time.Now()), nil)
	require.NoError(t, err)
	held, err := ctl.Admit(ctx, Request{Caller: "a"}) // one of the two seats
	require.NoError(t, err)
	type result struct {
		ticket *Ticket
		err    error
	}
	wide, narrow := make(chan result, 1), make(chan result, 1)
	go func() { tk, err := ctl.Admit(ctx, Request{Caller: "w", Width: 2}); wide <- result{tk, err} }()
	eventually(t, func() bool { return ctl.waitingCount() == 1 }, "the wide request waits")
	go func() { tk, err := ctl.Admit(ctx, Request{Caller: "w"}); narrow <- result{tk, err} }() // the same flow, behind it
	eventually(t, func() bool { return ctl.waitingCount() == 2 }, "the narrow request waits behind it")
	ctl.Close()
	for _, r := range []result{<-wide, <-narrow} {
		require.Nil(t, r.ticket)
		rej, ok := IsRejected(r.err)
		require.True(t, ok, "%v", r.err)
		require.Equal(t, ReasonShutdown, rej.Reason)
	}
	held.Done()
}

// TestAJailKeptAcrossAReloadKeepsItsLimit: a level whose limits were all
// zero (a jail: no shares, nothing to borrow) is a kept level on reload:
// its current limit is its old one moved into the new bounds, not the
// start of a new level.
func TestAJailKeptAcrossAReloadKeepsItsLimit(t *testing.T) {
	jail := func(shares, lendable int) Level {
		return Level{Name: "jail", Type: TypeLimited, NominalConcurrencyShares: ptr(shares), LendablePercent: ptr(lendable),
			BorrowingLimitPercent: ptr(0), LimitResponse: &LimitResponse{Type: ResponseReject}}
	}
	withJail := func(l Level) Config {
		cfg := DefaultConfig()
		cfg.Levels = append(cfg.Levels, l)
		return cfg.WithDefaults()
	}
	ctl, err := New(withJail(jail(0, 0)), clock.NewFake(time.Now()), nil)
	require.NoError(t, err)
	defer ctl.Close()
	before, _ := ctl.Limits("jail")
	require.Equal(t, Limits{}, before)
	require.NoError(t, ctl.Reload(withJail(jail(20, 50))))
	after, _ := ctl.Limits("jail")
	require.Equal(t, after.Min, after.Current, "the kept 0, raised to the new lower bound")
	require.Less(t, after.Current, after.Nominal)
}

// TestALevelRestoredWhileItDrainsKeepsItsRequestsSeats: a level removed by
// one reload and restored by the next while its requests still run is the
// same level again (as Kubernetes revives a quiescing level): the requests it
// admitted still hold its seats, so it admits no more than its limit.
func TestALevelRestoredWhileItDrainsKeepsItsRequestsSeats(t *testing.T) {
	ctx := context.Background()
	reject := &LimitResponse{Type: ResponseReject}
	queue := &LimitResponse{Type: ResponseQueue, Queues: ptr(4), HandSize: ptr(1), QueueLengthLimit: ptr(1)}
	for _, tc := range []struct {
		name     string
		response *LimitResponse
		retype   bool // the reload in between makes the level Exempt instead of removing it
	}{
		{"a Reject level removed and restored", reject, false},
		{"a Queue level removed and restored", queue, false},
		{"a Reject level made Exempt and made Limited again", reject, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{
				ServerConcurrency: ptr(4),
				Levels: []Level{
					{Name: "work", Type: TypeLimited, LimitResponse: tc.response},
					{Name: "rest", Type: TypeLimited, LimitResponse: &LimitResponse{Type: ResponseReject}},
				},
				Schemas: []Schema{
					{Name: "work", Precedence: 1, Level: "work", Match: Match{Verbs: []string{"work"}}},
					{Name: "rest", Precedence: 2, Level: "rest", Match: Match{Any: true}},
				},
			}.WithDefaults()
			c, err := New(cfg, clock.NewFake(time.Now()), nil)
			require.NoError(t, err)
			defer c.Close()
			lim, _ := c.Limits("work")
			restLim, _ := c.Limits("rest")
			var held []*Ticket
			for range lim.Current {
				tk, err := c.Admit(ctx, Request{Verb: "work"})
				require.NoError(t, err)
				held = append(held, tk)
			}
			between := cfg
			if tc.retype {
				between.Levels = []Level{{Name: "work", Type: TypeExempt}, cfg.Levels[1]}
				between = between.WithDefaults()
			} else {
				between.Levels = cfg.Levels[1:]
				between.Schemas = cfg.Schemas[1:]
			}
			require.NoError(t, c.Reload(between))
			require.NoError(t, c.Reload(cfg))

			c.mu.Lock()
			retiring, inUse := len(c.retiring), c.levels["work"].qs.SeatsInUse()
			c.mu.Unlock()
			require.Equal(t, lim.Current, inUse, "its requests still hold its seats")
			require.Zero(t, retiring, "the draining level is the restored one")
			for name, want := range map[string]Limits{"work": lim, "rest": restLim} {
				got, _ := c.Limits(name)
				require.Equal(t, []int{want.Nominal, want.Min, want.Max}, []int{got.Nominal, got.Min, got.Max},
					"%s's shares are counted once, the restored level's not twice", name)
			}
			if tc.response == reject {
				_, err = c.Admit(ctx, Request{Verb: "work"})
				rej, ok := IsRejected(err)
				require.True(t, ok, "the level is full: %v", err)
				require.Equal(t, ReasonConcurrencyLimit, rej.Reason)
			}
			for _, tk := range held {
				tk.Done()
			}
			c.mu.Lock()
			inUse = c.levels["work"].qs.SeatsInUse()
			c.mu.Unlock()
			require.Zero(t, inUse, "every seat came back")
		})
	}
}

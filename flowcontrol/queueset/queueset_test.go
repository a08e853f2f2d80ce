package queueset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
	"github.com/eru-extend/resources/flowcontrol/shufflesharding"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestARequestIsRejectedOnlyWhenSeatsAndItsQueueAreFull(t *testing.T) {
	clk := clock.NewFake(t0)
	qs, err := New(clk, Config{Queues: 1, HandSize: 1, QueueLengthLimit: 2}, 2)
	require.NoError(t, err)
	var outs []Outcome
	for range 4 {
		o, _ := qs.Start(&Request{Hash: 7, Width: 1})
		outs = append(outs, o)
	}
	require.Equal(t, []Outcome{Dispatched, Dispatched, Queued, Queued}, outs)
	o, reason := qs.Start(&Request{Hash: 7, Width: 1})
	require.Equal(t, Rejected, o)
	require.Equal(t, ReasonQueueFull, reason)

	t.Run("a Reject set rejects at once when full", func(t *testing.T) {
		qs, err := New(clk, Config{}, 1)
		require.NoError(t, err)
		o, _ := qs.Start(&Request{Width: 1})
		require.Equal(t, Dispatched, o)
		o, reason := qs.Start(&Request{Width: 1})
		require.Equal(t, Rejected, o)
		require.Equal(t, ReasonConcurrencyLimit, reason)
	})
}

func TestAWideRequestIsNotStarvedByNarrowOnes(t *testing.T) {
	clk := clock.NewFake(t0)
	qs, err := New(clk, Config{Queues: 8, HandSize: 1, QueueLengthLimit: 50}, 4)
	require.NoError(t, err)
	// A stream of narrow requests keeps all four seats busy.
	var narrow func()
	narrow = func() {
		r := &Request{Hash: 1, Width: 1}
		run := func() {
			clk.AfterFunc(time.Second, func() {
				qs.Finish(r)
				narrow()
			})
		}
		r.OnDispatch = run
		if o, _ := qs.Start(r); o == Dispatched {
			run()
		}
	}
	for range 8 {
		narrow()
	}
	var startedAt time.Time
	seatsWhenStarted := 0
	clk.AfterFunc(500*time.Millisecond, func() {
		wide := &Request{Hash: 2, Width: 6}
		wide.OnDispatch = func() {
			startedAt = clk.Now()
			seatsWhenStarted = qs.SeatsInUse()
			clk.AfterFunc(time.Second, func() { qs.Finish(wide) })
		}
		o, _ := qs.Start(wide)
		require.Equal(t, Queued, o)
	})
	clk.RunUntil(t0.Add(10 * time.Second))
	require.False(t, startedAt.IsZero(), "the wide request ran")
	require.LessOrEqual(t, startedAt.Sub(t0), 2*time.Second, "it ran once the seats in use drained")
	require.Equal(t, 6, seatsWhenStarted, "it ran alone, wider than the limit")
}

// A mouse (a flow with a queue outside the elephant's hand) is served as
// fair queuing promises: its request finishes no later than it would in the
// ideal fluid division (its 1/7 share of 4 seats serves 100 ms of work in
// 175 ms) plus one service time, so it waits at most 275 ms, however large
// the elephant's backlog.
func TestAMouseBesideAnElephantWaitsNoLongerThanFairQueuingsBound(t *testing.T) {
	clk := clock.NewFake(t0)
	cfg := Config{Queues: 128, HandSize: 6, QueueLengthLimit: 50}
	qs, err := New(clk, cfg, 4)
	require.NoError(t, err)
	d, err := shufflesharding.NewDealer(cfg.Queues, cfg.HandSize)
	require.NoError(t, err)
	const elephant = uint64(0xE1E)
	inHand := map[int]bool{}
	for _, c := range d.Deal(elephant, nil) {
		inHand[c] = true
	}
	rejected := 0
	for range 300 { // 300 closed-loop threads: the elephant's 6 queues stay full
		var call func()
		call = func() {
			r := &Request{Hash: elephant, Width: 1}
			run := func() { clk.AfterFunc(100*time.Millisecond, func() { qs.Finish(r); call() }) }
			r.OnDispatch = run
			switch o, _ := qs.Start(r); o {
			case Dispatched:
				run()
			case Rejected:
				rejected++
				clk.AfterFunc(10*time.Millisecond, call)
			}
		}
		call()
	}
	var waits []time.Duration
	mouseRejected := 0
	for i := range 50 {
		clk.AfterFunc(time.Duration(i)*time.Second+333*time.Millisecond, func() {
			r := &Request{Hash: uint64(1000 + i), Width: 1}
			arrived := clk.Now()
			run := func() {
				waits = append(waits, clk.Now().Sub(arrived))
				clk.AfterFunc(100*time.Millisecond, func() { qs.Finish(r) })
			}
			r.OnDispatch = run
			switch o, _ := qs.Start(r); o {
			case Dispatched:
				run()
			case Rejected:
				mouseRejected++
			}
		})
	}
	clk.RunUntil(t0.Add(51 * time.Second))
	require.Positive(t, rejected, "the elephant overflows its own queues")
	require.Zero(t, mouseRejected, "no mouse is rejected")
	require.Len(t, waits, 50)
	worst := time.Duration(0)
	for _, w := range waits {
		worst = max(worst, w)
	}
	require.LessOrEqual(t, worst, 275*time.Millisecond, "a mouse's wait is bounded by its fair share, not the elephant's backlog")
	t.Logf("elephant rejected %d times; worst mouse wait %v", rejected, worst)
}

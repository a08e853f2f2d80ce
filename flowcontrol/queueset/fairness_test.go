package queueset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
	"github.com/eru-extend/resources/flowcontrol/shufflesharding"
)

// seeds is how many seeded variants of every scenario run (flow hashes and
// start jitter vary with the seed).
const seeds = 20

// client is a flow of identical threads, each alternating between a
// synchronous call through the QueueSet and thinking.
type client struct {
	threads, calls int
	exec, think    time.Duration
	width          int
	split          bool // only half the threads run in the first half
}

type scenario struct {
	name     string
	cfg      Config
	limit    int
	clients  []client
	eval     time.Duration
	margins  []float64 // allowed relative deviation per half (one entry unless split)
	expected []float64 // fair averages, when not computed by max-min fairness
}

type outcome struct {
	deviations [][]float64 // per half, per client
	averages   [][]float64
	rejected   int
	epochs     int
	subject    Results // the QueueSet's seat-demand integrator at the end of evaluation
	check      Results // the test's own integrator of the same quantity
}

// fairAlloc is the max-min fair division of capacity among demands.
func fairAlloc(demands []float64, capacity float64) []float64 {
	idx := make([]int, len(demands))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmpFloat(demands[a], demands[b]) })
	alloc := make([]float64, len(demands))
	left := capacity
	for n, i := range idx {
		share := left / float64(len(idx)-n)
		alloc[i] = math.Min(demands[i], share)
		left -= alloc[i]
	}
	return alloc
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// disjointHashes draws one hash per flow such that no two hands share a
// queue. Fair queuing is fair between queues: two flows dealt the same queue
// share that queue's part, so the max-min fair share per flow is defined only
// for flows whose hands are apart (which shuffle sharding makes the common
// case). The seed varies the hands, and with them the queues' positions in
// the round-robin scan, and the start times within the stagger.
func disjointHashes(t *testing.T, rng *rand.Rand, cfg Config, n int) []uint64 {
	d, err := shufflesharding.NewDealer(cfg.Queues, cfg.HandSize)
	require.NoError(t, err)
	for {
		used := map[int]bool{}
		hashes := make([]uint64, 0, n)
		ok := true
		for range n {
			h := rng.Uint64()
			for _, c := range d.Deal(h, nil) {
				ok = ok && !used[c]
				used[c] = true
			}
			hashes = append(hashes, h)
		}
		if ok {
			return hashes
		}
	}
}

func (sc scenario) run(t *testing.T, seed uint64) outcome {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	qs, err := New(clk, sc.cfg, sc.limit)

	require.NoError(t, err)
	hashes := disjointHashes(t, rng, sc.cfg, len(sc.clients))

	check := NewIntegrator(clk)
	execSeats := make([]*Integrator, len(sc.clients))
	var out outcome
	split := false
	for i, c := range sc.clients {
		split = split || c.split
		execSeats[i] = NewIntegrator(clk)
		for j := range c.threads {
			calls := c.calls
			// Staggered starts as in Kubernetes' tests; the seeded jitter is
			// smaller than the stagger so the arrival order is kept.
			delay := time.Duration(90*j+20*i) + time.Duration(rng.IntN(10))
			if c.split && j >= c.threads/2 {
				delay += sc.eval / 2
				calls /= 2
			}
			var call func(k int)
			call = func(k int) {
				if k >= calls {
					return
				}
				check.Add(float64(c.width))
				r := &Request{Hash: hashes[i], Width: c.width}
				run := func() {
					execSeats[i].Add(float64(c.width))
					clk.AfterFunc(c.exec+c.think, func() { call(k + 1) })
					clk.AfterFunc(c.exec, func() {
						execSeats[i].Add(-float64(c.width))
						qs.Finish(r)
						check.Add(-float64(c.width))
					})
				}
				r.OnDispatch = run
				switch o, _ := qs.Start(r); o {
				case Dispatched:
					run()
				case Rejected:
					out.rejected++
					check.Add(-float64(c.width))
				}
			}
			clk.AfterFunc(delay, func() { call(0) })
		}
	}
	halves := []time.Duration{sc.eval}
	if split {
		halves = []time.Duration{sc.eval / 2, sc.eval}
	}
	for h, until := range halves {
		clk.RunUntil(start.Add(until))
		last := h == len(halves)-1
		demands := make([]float64, len(sc.clients))
		averages := make([]float64, len(sc.clients))
		for i, c := range sc.clients {
			threads := c.threads
			if c.split && !last {
				threads /= 2
			}
			demands[i] = float64(threads*c.width) * float64(c.exec) / float64(c.exec+c.think)
			averages[i] = execSeats[i].Reset().Average
		}
		fair := sc.expected
		if fair == nil {
			fair = fairAlloc(demands, float64(sc.limit))
		}
		devs := make([]float64, len(sc.clients))
		for i := range devs {
			devs[i] = math.Abs(averages[i]-fair[i]) / fair[i]
		}
		out.deviations = append(out.deviations, devs)
		out.averages = append(out.averages, averages)
	}
	out.subject, out.check = qs.SeatDemand().Results(), check.Results()
	clk.Run()
	out.epochs = qs.EpochAdvances()
	require.Zero(t, qs.Executing(), "every request finished")
	require.Zero(t, qs.Waiting(), "no request left waiting")
	return out
}

func requireClose(t *testing.T, want, got float64, what string) {
	t.Helper()
	tol := 1e-10 * math.Max(1, math.Abs(want))
	require.InDelta(t, want, got, tol, what)
}

const quarter = 91 * 24 * time.Hour

func uniform(threads, calls int, exec, think time.Duration) client {
	return client{threads: threads, calls: calls, exec: exec, think: think, width: 1}
}

func fairnessScenarios() []scenario {
	w2 := uniform(7, 10, time.Second, time.Second-1)
	w2.width = 2
	return []scenario{
		{name: "two equal flows with hand size 1 get equal shares within 1%",
			cfg: Config{Queues: 9, QueueLengthLimit: 8, HandSize: 1}, limit: 4, eval: 50 * time.Second,
			clients: []client{uniform(8, 20, time.Second, time.Second-1), uniform(8, 20, time.Second, time.Second-1)},
			margins: []float64{0.01}},
		{name: "flows with unequal think times and hand size 1 get max-min fair shares within 1%",
			cfg: Config{Queues: 9, QueueLengthLimit: 8, HandSize: 1}, limit: 4, eval: 40 * time.Second,
			clients: []client{uniform(8, 20, time.Second, time.Second), uniform(7, 30, time.Second, time.Second/2)},
			margins: []float64{0.01}},
		{name: "flows of unequal demand with hand size 1 get max-min fair shares within 1%",
			cfg: Config{Queues: 9, QueueLengthLimit: 6, HandSize: 1}, limit: 3, eval: 20 * time.Second,
			clients: []client{uniform(4, 20, time.Second, time.Second-1), uniform(2, 20, time.Second, time.Second-1)},
			margins: []float64{0.01}},
		{name: "two equal flows with hand size 3 get equal shares within 3%",
			cfg: Config{Queues: 8, QueueLengthLimit: 16, HandSize: 3}, limit: 4, eval: 60 * time.Second,
			clients: []client{uniform(8, 30, time.Second, time.Second-1), uniform(8, 30, time.Second, time.Second-1)},
			margins: []float64{0.03}},
		{name: "flows of mixed widths get max-min fair seat shares within 15.5%",
			cfg: Config{Queues: 64, QueueLengthLimit: 13, HandSize: 7}, limit: 6, eval: 20 * time.Second,
			clients: []client{uniform(13, 10, time.Second, time.Second-1), w2},
			margins: []float64{0.155}},
	}
}

func TestFairQueuingGivesMaxMinFairSharesOverSeeds(t *testing.T) {
	for _, sc := range fairnessScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			worst, demandDiff := 0.0, 0.0
			for seed := range uint64(seeds) {
				out := sc.run(t, seed)
				demandDiff = math.Max(demandDiff, math.Abs(out.check.Average-out.subject.Average))
				require.Zero(t, out.rejected, "seed %d: no request is rejected", seed)
				for h, devs := range out.deviations {
					for i, d := range devs {
						require.LessOrEqual(t, d, sc.margins[h], "seed %d half %d client %d: averages %v", seed, h, i, out.averages[h])
						worst = math.Max(worst, d)
					}
				}
				requireClose(t, out.check.Duration, out.subject.Duration, "seat-demand period")
				requireClose(t, out.check.Average, out.subject.Average, "seat-demand average")
				requireClose(t, out.check.Deviation, out.subject.Deviation, "seat-demand deviation")
				requireClose(t, out.check.Max, out.subject.Max, "seat-demand maximum")
			}
			t.Logf("%s: worst deviation over %d seeds %.3g%% (bound %.1f%%); seat-demand average off by at most %.3g",
				sc.name, seeds, 100*worst, 100*sc.margins[0], demandDiff)
		})
	}
}

func TestLongRunsStayFairThroughEpochAdvancesAndWindupIsBounded(t *testing.T) {
	wide := func(c client) client { c.width = 500; return c }
	windup := uniform(2, 40, time.Second, -1)
	windup.split = true
	for _, tc := range []struct {
		sc         scenario
		wantEpochs bool
	}{
		{sc: scenario{name: "ten simulated years at width 500 keep within 1% through epoch advances",
			cfg: Config{Queues: 9, QueueLengthLimit: 8, HandSize: 1}, limit: 2000, eval: 40 * quarter,
			clients: []client{wide(uniform(8, 20, quarter, quarter)), wide(uniform(7, 30, quarter, quarter/2))},
			margins: []float64{0.01}}, wantEpochs: true},
		{sc: scenario{name: "a flow that could not use its share does not bank it beyond 26% in the windup test",
			cfg: Config{Queues: 9, QueueLengthLimit: 6, HandSize: 1}, limit: 3, eval: 40 * time.Second,
			clients: []client{uniform(2, 40, time.Second, -1), windup},
			margins: []float64{0.01, 0.26}}},
	} {
		sc := tc.sc
		t.Run(sc.name, func(t *testing.T) {
			worst := make([]float64, len(sc.margins))
			epochs := 0
			for seed := range uint64(seeds) {
				out := sc.run(t, seed)
				require.Zero(t, out.rejected, "seed %d: no request is rejected", seed)
				for h, devs := range out.deviations {
					for i, d := range devs {
						require.LessOrEqual(t, d, sc.margins[h], "seed %d half %d client %d: averages %v", seed, h, i, out.averages[h])
						worst[h] = math.Max(worst[h], d)
					}
				}
				if tc.wantEpochs {
					require.Positive(t, out.epochs, "seed %d: virtual time went through an epoch advance", seed)
				}
				epochs = out.epochs
				requireClose(t, out.check.Average, out.subject.Average, "seat-demand average")
				requireClose(t, out.check.Deviation, out.subject.Deviation, "seat-demand deviation")
			}
			t.Logf("%s: worst deviation per half over %d seeds %s, epoch advances %d", sc.name, seeds, fmtPct(worst), epochs)
		})
	}
}

func fmtPct(xs []float64) string {
	s := ""
	for _, x := range xs {
		s += fmt.Sprintf("%.3g%% ", 100*x)
	}
	return s
}

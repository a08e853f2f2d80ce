package flowcontrol

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
)

// kubeLevels mirrors Kubernetes' exempt borrowing test: exempt, workload-high
// (40 shares, lends 50%), workload-low (100 shares, lends 90%) and catch-all
// (5 shares, lends nothing), with ServerCL six times the shares.
func kubeLevels() Config {
	reject := &LimitResponse{Type: ResponseReject}
	return Config{
		ServerConcurrency: ptr((40 + 100 + 5) * 6),
		Levels: []Level{
			{Name: "exempt", Type: TypeExempt},
			{Name: "high", Type: TypeLimited, NominalConcurrencyShares: ptr(40), LendablePercent: ptr(50), LimitResponse: reject},
			{Name: "mid", Type: TypeLimited, NominalConcurrencyShares: ptr(100), LendablePercent: ptr(90), LimitResponse: reject},
			{Name: "low", Type: TypeLimited, NominalConcurrencyShares: ptr(5), LendablePercent: ptr(0), LimitResponse: reject},
		},
		Schemas: []Schema{{Name: "all", Precedence: 1, Level: "low", Match: Match{Any: true}}},
	}
}

func TestExemptBorrowingDividesSeatsIntoExactIntegers(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	c, err := New(kubeLevels(), clk, nil)
	require.NoError(t, err)
	defer c.Close()
	serverCL := *kubeLevels().ServerConcurrency
	require.Equal(t, serverCL, c.nominalSum, "the nominal limits add up to ServerCL without rounding")
	lv := func(name string) *level { return c.levels[name] }
	setDemand := func(name string, seats float64) { lv(name).demand.Set(seats) }
	adjust := func(at time.Duration) {
		clk.Advance(at)
		c.mu.Lock()
		c.adjustLocked()
		c.mu.Unlock()
	}
	current := func(name string) int { return lv(name).limits.Current }

	t.Run("an exempt level using more than ServerCL leaves every Limited level at its MinCL", func(t *testing.T) {
		for _, name := range []string{"exempt", "high", "mid"} {
			setDemand(name, float64(serverCL+100))
		}
		adjust(AdjustPeriod)
		require.Equal(t, serverCL+100, current("exempt"))
		for _, name := range []string{"high", "mid", "low"} {
			require.Equal(t, lv(name).limits.Min, current(name), name)
		}
	})
	t.Run("when the rest cannot cover every level's demand, each gets halfway from MinCL", func(t *testing.T) {
		half := func(name string) int { return (lv(name).limits.Nominal + lv(name).limits.Min) / 2 }
		exempt := serverCL - (half("high") + half("mid") + half("low"))
		setDemand("exempt", float64(exempt))
		adjust(AdjustPeriod)
		adjust(AdjustPeriod)
		require.Equal(t, exempt, current("exempt"))
		for _, name := range []string{"high", "mid", "low"} {
			require.Equal(t, half(name), current(name), name)
		}
	})
	t.Run("an exempt level borrows exactly what the only lender lends", func(t *testing.T) {
		high, mid, low := lv("high").limits.Nominal, lv("mid").limits.Min, lv("low").limits.Nominal
		exempt := serverCL - (high + mid + low)
		setDemand("exempt", float64(exempt))
		setDemand("mid", 1)
		adjust(AdjustPeriod)
		adjust(AdjustPeriod)
		require.Equal(t, exempt, current("exempt"))
		require.Equal(t, high, current("high"))
		require.Equal(t, mid, current("mid"))
		require.Equal(t, low, current("low"))
	})
}

func TestAnExemptFloodIsNeverQueuedOrRejectedAndLimitedLevelsKeepTheirMinimum(t *testing.T) {
	cfg := DefaultConfig()
	s := newSim(t, cfg)
	floodSize := 5 * *cfg.ServerConcurrency
	flood := &simClient{req: Request{Path: "/healthz"}, threads: floodSize, exec: time.Second}
	work := &simClient{req: Request{Verb: "calculate-deploy", Pod: "p"}, threads: 100, exec: 100 * time.Millisecond}
	s.run(flood)
	s.run(work)
	for at := AdjustPeriod; at <= time.Minute; at += AdjustPeriod {
		s.clk.AfterFunc(at+time.Nanosecond, func() {
			for _, l := range cfg.WithDefaults().Levels {
				lim, _ := s.c.Limits(l.Name)
				if l.Type == TypeLimited {
					require.GreaterOrEqual(t, lim.Current, lim.Min, "at %v level %s keeps its MinCL", at, l.Name)
				} else {
					require.Equal(t, floodSize, lim.Current, "at %v the exempt level is granted its use", at)
				}
			}
		})
	}
	s.runUntil(time.Minute)
	require.Equal(t, floodSize, flood.maxRunning, "every exempt request ran at once")
	require.InDelta(t, float64(floodSize), flood.executing.Results().Average, 1, "the exempt flood never waited")
	s.c.mu.Lock()
	for t2 := range s.c.waiting {
		require.NotEqual(t, "exempt", t2.level, "no exempt request waits")
	}
	s.c.mu.Unlock()
	require.Zero(t, s.rejected[ReasonConcurrencyLimit]+s.rejected[ReasonQueueFull]+s.rejected[ReasonTimeOut],
		"nothing is rejected: %v", s.rejected)
	placement, _ := s.c.Limits("placement")
	require.GreaterOrEqual(t, work.maxRunning, placement.Min, "placement still ran its MinCL")
	t.Logf("exempt flood of %d: placement limit %d (MinCL %d), ran up to %d at once",
		floodSize, placement.Current, placement.Min, work.maxRunning)
}

// jailConfig is a fixed four-seat level "work" (hand size 1), optionally
// beside a jail: a level with no shares and no borrowing.
func jailConfig(withJail bool) Config {
	cfg := Config{
		ServerConcurrency: ptr(4),
		Levels: []Level{{Name: "work", Type: TypeLimited, NominalConcurrencyShares: ptr(1), LendablePercent: ptr(0),
			BorrowingLimitPercent: ptr(0),
			LimitResponse:         &LimitResponse{Type: ResponseQueue, Queues: ptr(9), HandSize: ptr(1), QueueLengthLimit: ptr(8)}}},
		Schemas: []Schema{{Name: "work", Precedence: 10, Level: "work", Distinguisher: DistinguishByPod,
			Match: Match{Any: true}}},
	}
	if withJail {
		cfg.Levels = append(cfg.Levels, Level{Name: "jail", Type: TypeLimited, NominalConcurrencyShares: ptr(0),
			LendablePercent: ptr(0), BorrowingLimitPercent: ptr(0),
			LimitResponse: &LimitResponse{Type: ResponseQueue, Queues: ptr(4), HandSize: ptr(1), QueueLengthLimit: ptr(50)}})
		cfg.Schemas = append([]Schema{{Name: "jail", Precedence: 1, Level: "jail", Distinguisher: DistinguishByCaller,
			Match: Match{Verbs: []string{"get-metrics"}}}}, cfg.Schemas...)
	}
	return cfg
}

// distinctPods returns two pods whose flows land in different queues of a
// hand-size-1 level of 9 queues.
func distinctPods(t *testing.T, cfg Config) [2]string {
	s := &cfg.Schemas[len(cfg.Schemas)-1]
	q := func(pod string) uint64 { return flowHash(s, Request{Pod: pod}) % 9 }
	for i := 1; ; i++ {
		b := "pod-b-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if q("pod-a") != q(b) {
			return [2]string{"pod-a", b}
		}
	}
}

func TestAJailRunsOneRequestAtATimeAndChangesNoOtherLevelsFairness(t *testing.T) {
	results := map[bool][2]float64{}
	for _, withJail := range []bool{false, true} {
		cfg := jailConfig(withJail)
		s := newSim(t, cfg)
		pods := distinctPods(t, cfg)
		var flows [2]*simClient
		for i := range flows {
			flows[i] = &simClient{req: Request{Verb: "calculate-deploy", Pod: pods[i]}, threads: 8, calls: 20,
				exec: time.Second, think: time.Second - 1, delay: time.Duration(20 * i)}
			s.run(flows[i])
		}
		var jail *simClient
		if withJail {
			jail = &simClient{req: Request{Verb: "get-metrics", Caller: "sweeper"}, threads: 50, exec: 300 * time.Millisecond,
				retryReject: 100 * time.Millisecond}
			s.run(jail)
		}
		s.runUntil(50 * time.Second)
		var avg [2]float64
		for i, f := range flows {
			avg[i] = f.executing.Reset().Average
			require.InDelta(t, 2, avg[i], 0.02, "flow %d gets its fair half of 4 seats within 1%%", i)
		}
		results[withJail] = avg
		if withJail {
			lim, _ := s.c.Limits("jail")
			require.Equal(t, Limits{}, lim, "the jail's limits are all 0")
			require.Equal(t, 1, jail.maxRunning, "the jail runs one request at a time")
			require.Positive(t, jail.executing.Results().Average, "the jail is not starved outright")
			t.Logf("jail ran at most %d at once; rejections %v", jail.maxRunning, s.rejected)
		} else {
			require.Empty(t, s.rejected)
		}
	}
	for i := range 2 {
		require.LessOrEqual(t, math.Abs(results[true][i]-results[false][i]), 1e-12,
			"flow %d's share is the same with and without the jail", i)
	}
	t.Logf("work flows averaged %v without the jail and %v beside it", results[false], results[true])
}

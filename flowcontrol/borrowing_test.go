package flowcontrol

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func twoLevelConfig(serverCL int, lend, borrow [2]int) Config {
	levels := make([]Level, 2)
	schemas := make([]Schema, 0, 3)
	for i := range levels {
		levels[i] = Level{Name: fmt.Sprintf("pl%d", i), Type: TypeLimited, NominalConcurrencyShares: ptr(100),
			LendablePercent: ptr(lend[i]), BorrowingLimitPercent: ptr(borrow[i]),
			LimitResponse: &LimitResponse{Type: ResponseQueue, Queues: ptr(10), HandSize: ptr(2), QueueLengthLimit: ptr(10)}}
		schemas = append(schemas, Schema{Name: fmt.Sprintf("fs%d", i), Precedence: 100, Level: levels[i].Name,
			Match: Match{Verbs: []string{fmt.Sprintf("verb%d", i)}}})
	}
	schemas = append(schemas, Schema{Name: "rest", Precedence: 10000, Level: "pl0", Match: Match{Any: true}})
	return Config{ServerConcurrency: ptr(serverCL), Levels: levels, Schemas: schemas}
}

// checkAdjustments verifies the limits right after every re-division.
func (s *sim) checkAdjustments(until time.Duration, levels []string, serverCL int) {
	for at := AdjustPeriod; at <= until; at += AdjustPeriod {
		s.clk.AfterFunc(at+time.Nanosecond, func() {
			sum := 0
			for _, name := range levels {
				l, ok := s.c.Limits(name)
				require.True(s.t, ok)
				require.True(s.t, l.Min <= l.Current && l.Current <= l.Max, "at %v level %s: %+v", at, name, l)
				sum += l.Current
			}
			require.InDelta(s.t, serverCL, sum, float64(len(levels)), "at %v the current limits sum to ServerCL ± levels", at)
		})
	}
}

func TestBorrowingReproducesKubernetesBandsWithinOneAdjustmentPeriod(t *testing.T) {
	// The constraints of Kubernetes' TestBorrowing: level i lends lend[i]%
	// of its NominalCL and borrows at most borrow[i]%.
	for _, tc := range []struct {
		name         string
		lend, borrow [2]int
	}{
		{"when lending limits the division", [2]int{50, 33}, [2]int{67, 50}},
		{"when borrowing limits the division", [2]int{50, 67}, [2]int{33, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds := 20
			if testing.Short() {
				seeds = 5
			}
			for seed := range seeds {
				cfg := twoLevelConfig(24, tc.lend, tc.borrow)
				s := newSim(t, cfg)
				clients := []*simClient{
					{req: Request{Verb: "verb0"}, threads: 24, exec: 250 * time.Millisecond, delay: time.Duration(seed) * time.Millisecond},
					{req: Request{Verb: "verb1"}, threads: 6, exec: 250 * time.Millisecond, delay: time.Duration(seed) * time.Microsecond},
				}
				for _, cl := range clients {
					s.run(cl)
				}
				s.checkAdjustments(25*time.Second, []string{"pl0", "pl1"}, 24)
				s.runUntil(AdjustPeriod)
				for _, cl := range clients {
					cl.executing.Reset()
				}
				s.runUntil(AdjustPeriod + 15*time.Second)
				avg0, avg1 := clients[0].executing.Reset().Average, clients[1].executing.Reset().Average
				require.True(t, avg0 >= 15.5 && avg0 <= 16.1, "seed %d: flow 0 averaged %v, want about 16", seed, avg0)
				require.True(t, avg1 >= 5.5 && avg1 <= 6.1, "seed %d: flow 1 averaged %v, want about 6", seed, avg1)
				require.Empty(t, s.rejected, "seed %d: nothing is rejected", seed)
				if seed == 0 {
					t.Logf("flow 0 averaged %.4f (band [15.5, 16.1]), flow 1 %.4f (band [5.5, 6.1])", avg0, avg1)
				}
			}
		})
	}
}

func TestALenderRegainsItsNominalShareAtTheNextAdjustment(t *testing.T) {
	cfg := twoLevelConfig(24, [2]int{50, 100}, [2]int{50, 100})
	s := newSim(t, cfg)
	borrower := &simClient{req: Request{Verb: "verb1"}, threads: 24, exec: 250 * time.Millisecond}
	s.run(borrower)
	s.checkAdjustments(60*time.Second, []string{"pl0", "pl1"}, 24)
	s.runUntil(35 * time.Second)
	lent, _ := s.c.Limits("pl0")
	require.Equal(t, lent.Min, lent.Current, "the idle lender is down to its MinCL")
	lender := &simClient{req: Request{Verb: "verb0"}, threads: 20, exec: 250 * time.Millisecond}
	s.run(lender)
	s.runUntil(40*time.Second + time.Nanosecond)
	back, _ := s.c.Limits("pl0")
	want := min(back.Nominal, 20)
	require.GreaterOrEqual(t, back.Current, want, "the lender regains min(NominalCL %d, high-water mark 20)", back.Nominal)
	t.Logf("lender: MinCL %d while idle, %d after its demand returned (NominalCL %d)", lent.Current, back.Current, back.Nominal)
}

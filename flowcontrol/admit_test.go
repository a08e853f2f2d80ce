package flowcontrol

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
)

// oneLevel is a single Limited level "only" with ServerCL seats.
func oneLevel(serverCL int, lr *LimitResponse) Config {
	return Config{
		ServerConcurrency: ptr(serverCL),
		Levels:            []Level{{Name: "only", Type: TypeLimited, LimitResponse: lr}},
		Schemas:           []Schema{{Name: "all", Precedence: 1, Level: "only", Distinguisher: DistinguishByCaller, Match: Match{Any: true}}},
	}
}

func (c *Controller) waitingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting until %s", what)
		time.Sleep(time.Millisecond)
	}
}

func TestRequestsAreRejectedOnlyWhenSeatsAndQueueAreFull(t *testing.T) {
	ctx := context.Background()
	t.Run("a Queue level queues until its queue is full, then rejects", func(t *testing.T) {
		clk := clock.NewFake(time.Now())
		c, err := New(oneLevel(2, &LimitResponse{Type: ResponseQueue, Queues: ptr(1), HandSize: ptr(1), QueueLengthLimit: ptr(3)}), clk, nil)
		require.NoError(t, err)
		defer c.Close()
		var tickets []*Ticket
		for range 2 {
			tk, err := c.Admit(ctx, Request{Caller: "a"})
			require.NoError(t, err, "free seats admit at once")
			tickets = append(tickets, tk)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tk, err := c.Admit(ctx, Request{Caller: "a"})
				if err == nil {
					tk.Done()
				}
				errs <- err
			}()
		}
		eventually(t, func() bool { return c.waitingCount() == 3 }, "three requests wait")
		_, err = c.Admit(ctx, Request{Caller: "a"})
		r, ok := IsRejected(err)
		require.True(t, ok, "a request beyond a full queue with full seats is rejected: %v", err)
		require.Equal(t, ReasonQueueFull, r.Reason)
		require.Equal(t, "only", r.Level)
		require.Equal(t, "all", r.Schema)
		require.Equal(t, "too many requests (priority level only, retry after 1s)", r.Error())
		for _, tk := range tickets {
			tk.Done()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "queued requests run once seats free up")
		}
	})
	t.Run("a Reject level rejects at once when its seats are full", func(t *testing.T) {
		c, err := New(oneLevel(2, &LimitResponse{Type: ResponseReject}), clock.NewFake(time.Now()), nil)
		require.NoError(t, err)
		defer c.Close()
		a, err := c.Admit(ctx, Request{})
		require.NoError(t, err)
		b, err := c.Admit(ctx, Request{})
		require.NoError(t, err)
		_, err = c.Admit(ctx, Request{})
		r, ok := IsRejected(err)
		require.True(t, ok)
		require.Equal(t, ReasonConcurrencyLimit, r.Reason)
		a.Done()
		c2, err := c.Admit(ctx, Request{})
		require.NoError(t, err, "a freed seat admits again")
		b.Done()
		c2.Done()
		a.Done() // a second Done is harmless
	})
}

func TestAQueuedRequestTimesOutAtItsWaitLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: none
		want     time.Duration
	}{
		{"a request without a deadline waits 15 s", 0, 15 * time.Second},
		{"a request with 100 s left waits a quarter of it", 100 * time.Second, 25 * time.Second},
		{"a request with 10 min left waits at most 1 min", 10 * time.Minute, time.Minute},
		{"a request with 2 s left waits 500 ms", 2 * time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			clk := clock.NewFake(start)
			c, err := New(oneLevel(1, &LimitResponse{Type: ResponseQueue, Queues: ptr(1), HandSize: ptr(1), QueueLengthLimit: ptr(5)}), clk, nil)
			require.NoError(t, err)
			defer c.Close()
			holder, err := c.Admit(context.Background(), Request{})
			require.NoError(t, err)
			defer holder.Done()
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				// The deadline is on the simulated clock's time line; the test
				// ends long before it passes in real time.
				ctx, cancel = context.WithDeadline(ctx, start.Add(tc.deadline))
				defer cancel()
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.Admit(ctx, Request{})
				done <- err
			}()
			eventually(t, func() bool { return c.waitingCount() == 1 }, "the request waits")
			clk.Advance(tc.want - time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("the request ended 1 ms before its wait limit: %v", err)
			default:
			}
			require.Equal(t, 1, c.waitingCount(), "still waiting 1 ms before the limit")
			clk.Advance(2 * time.Millisecond)
			err = <-done
			r, ok := IsRejected(err)
			require.True(t, ok, "rejected within 1 ms after the limit: %v", err)
			require.Equal(t, ReasonTimeOut, r.Reason)
			require.Equal(t, tc.want, WaitLimit(start, start.Add(tc.deadline), tc.deadline > 0))
		})
	}
}

func TestACancelledContextWithdrawsAQueuedRequest(t *testing.T) {
	c, err := New(oneLevel(1, &LimitResponse{Type: ResponseQueue, Queues: ptr(1), HandSize: ptr(1), QueueLengthLimit: ptr(5)}), clock.NewFake(time.Now()), nil)
	require.NoError(t, err)
	defer c.Close()
	holder, err := c.Admit(context.Background(), Request{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Admit(ctx, Request{})
		done <- err
	}()
	eventually(t, func() bool { return c.waitingCount() == 1 }, "the request waits")
	cancel()
	r, ok := IsRejected(<-done)
	require.True(t, ok)
	require.Equal(t, ReasonCancelled, r.Reason)
	require.Zero(t, c.waitingCount())
	holder.Done()
}

func TestCloseRejectsWaitersAndLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	reg := prometheus.NewRegistry()
	c, err := New(oneLevel(2, &LimitResponse{Type: ResponseQueue, Queues: ptr(4), HandSize: ptr(2), QueueLengthLimit: ptr(10)}), clock.Real{}, reg)
	require.NoError(t, err)
	var held []*Ticket
	for range 2 {
		tk, err := c.Admit(context.Background(), Request{Caller: "x"})
		require.NoError(t, err)
		held = append(held, tk)
	}
	var wg sync.WaitGroup
	reasons := make(chan string, 5)
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Admit(context.Background(), Request{Caller: "y"})
			r, _ := IsRejected(err)
			reasons <- r.Reason
		}()
	}
	eventually(t, func() bool { return c.waitingCount() == 5 }, "five requests wait")
	c.Close()
	wg.Wait()
	close(reasons)
	for r := range reasons {
		require.Equal(t, ReasonShutdown, r)
	}
	_, err = c.Admit(context.Background(), Request{})
	r, ok := IsRejected(err)
	require.True(t, ok)
	require.Equal(t, ReasonShutdown, r.Reason, "admission after Close is refused")
	for _, tk := range held {
		tk.Done() // executing requests may still finish
	}
	c.Close() // idempotent
	eventually(t, func() bool { return runtime.NumGoroutine() <= before }, "every goroutine has exited")
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Zero(t, n, "the metrics are unregistered")
	c2, err := New(DefaultConfig(), clock.Real{}, reg)
	require.NoError(t, err, "a new controller can register on the same registry")
	c2.Close()
}

func TestReloadKeepsAdmittedRequestsInTheirSeats(t *testing.T) {
	clk := clock.NewFake(time.Now())
	cfg := DefaultConfig()
	c, err := New(cfg, clk, nil)
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	op, err := c.Admit(ctx, Request{Path: "/v1/nodes", Caller: "ops"})
	require.NoError(t, err)
	place, err := c.Admit(ctx, Request{Verb: "calculate-deploy", Pod: "web"})
	require.NoError(t, err)

	next := DefaultConfig()
	next.ServerConcurrency = ptr(8)
	next.Levels = append(next.Levels[:2], next.Levels[3:]...) // drop the operator level
	next.Schemas = append(next.Schemas[:3], next.Schemas[4:]...)
	require.NoError(t, c.Reload(next))

	lvl, schema := c.Classify(Request{Path: "/v1/nodes"})
	require.Equal(t, "catch-all", lvl, "operator calls now fall to the catch-all")
	require.Equal(t, "catch-all", schema)
	c.mu.Lock()
	require.Len(t, c.retiring, 1, "the removed level lingers while its request runs")
	require.Equal(t, 1, c.levels["placement"].qs.SeatsInUse(), "placement's seat survived the reload")
	c.mu.Unlock()
	op.Done()
	place.Done()
	c.mu.Lock()
	require.Empty(t, c.retiring, "the removed level is gone once drained")
	require.Zero(t, c.levels["placement"].qs.SeatsInUse())
	c.mu.Unlock()

	bad := DefaultConfig()
	bad.Schemas[1].Level = "nowhere"
	err = c.Reload(bad)
	var ce *ConfigError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "flowcontrol.schemas[1].level", ce.Key)
	lvl, _ = c.Classify(Request{Verb: "calculate-deploy"})
	require.Equal(t, "placement", lvl, "a refused reload changes nothing")
}

func TestSchemasMatchByPrecedence(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Schemas = append(cfg.Schemas, Schema{Name: "urgent", Precedence: 50, Level: "exempt",
		Match: Match{Verbs: []string{"set-node-resource-usage"}}})
	c, err := New(cfg, clock.NewFake(time.Now()), nil)
	require.NoError(t, err)
	defer c.Close()
	for _, tc := range []struct {
		name          string
		req           Request
		level, schema string
	}{
		{"a placement verb goes to placement", Request{Verb: "calculate-deploy"}, "placement", "placement"},
		{"get-metrics goes to metrics", Request{Verb: "get-metrics"}, "metrics", "metrics"},
		{"a /metrics scrape goes to metrics", Request{Path: "/metrics"}, "metrics", "metrics"},
		{"an operator path goes to operator", Request{Path: "/v1/nodes/n1:drain"}, "operator", "operator"},
		{"an operator command goes to operator", Request{Command: "nodes drain"}, "operator", "operator"},
		{"the bare /v1 is not under /v1/*", Request{Path: "/v1"}, "catch-all", "catch-all"},
		{"health probes are exempt", Request{Path: "/readyz"}, "exempt", "health"},
		{"an unknown verb falls to the catch-all", Request{Verb: "frobnicate"}, "catch-all", "catch-all"},
		{"a lower precedence wins even when listed later", Request{Verb: "set-node-resource-usage"}, "exempt", "urgent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lvl, schema := c.Classify(tc.req)
			require.Equal(t, tc.level, lvl)
			require.Equal(t, tc.schema, schema)
		})
	}
}

func TestDistinguishersSplitFlowsByPodOrCaller(t *testing.T) {
	cfg := DefaultConfig()
	s := func(name string) *Schema {
		for i := range cfg.Schemas {
			if cfg.Schemas[i].Name == name {
				return &cfg.Schemas[i]
			}
		}
		return nil
	}
	place, ops := s("placement"), s("operator")
	require.NotEqual(t, flowHash(place, Request{Pod: "a"}), flowHash(place, Request{Pod: "b"}), "pods are distinct flows")
	require.Equal(t, flowHash(place, Request{Pod: "a", Caller: "x"}), flowHash(place, Request{Pod: "a", Caller: "y"}),
		"the caller does not split a by-pod schema")
	require.NotEqual(t, flowHash(ops, Request{Caller: "x"}), flowHash(ops, Request{Caller: "y"}), "callers are distinct flows")
	none := Schema{Name: "n", Distinguisher: DistinguishNone}
	require.Equal(t, flowHash(&none, Request{Pod: "a", Caller: "x"}), flowHash(&none, Request{Pod: "b", Caller: "y"}),
		"without a distinguisher the schema is one flow")
}

func TestMetricsDescribeLevelsAndSchemas(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clock.NewFake(time.Now())
	c, err := New(oneLevel(1, &LimitResponse{Type: ResponseReject}), clk, reg)
	require.NoError(t, err)
	defer c.Close()
	tk, err := c.Admit(context.Background(), Request{})
	require.NoError(t, err)
	_, err = c.Admit(context.Background(), Request{})
	require.Error(t, err)
	clk.Advance(250 * time.Millisecond)
	tk.Done()

	require.Equal(t, 1.0, testutil.ToFloat64(c.m.dispatched.WithLabelValues("only", "all")))
	require.Equal(t, 1.0, testutil.ToFloat64(c.m.rejected.WithLabelValues("only", "all", ReasonConcurrencyLimit)))
	require.Equal(t, 0.0, testutil.ToFloat64(c.m.executing.WithLabelValues("only", "all")))
	require.Equal(t, 0.0, testutil.ToFloat64(c.m.seatsInUse.WithLabelValues("only", "all")))
	require.Equal(t, 1.0, testutil.ToFloat64(c.m.currentLimit.WithLabelValues("only")))
	names := map[string]bool{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		names[mf.GetName()] = true
		require.True(t, strings.HasPrefix(mf.GetName(), "eru_flowcontrol_"), mf.GetName())
	}
	for _, want := range []string{
		"eru_flowcontrol_dispatched_requests_total", "eru_flowcontrol_rejected_requests_total",
		"eru_flowcontrol_current_inqueue_requests", "eru_flowcontrol_current_executing_requests",
		"eru_flowcontrol_current_executing_seats", "eru_flowcontrol_current_limit_seats",
		"eru_flowcontrol_nominal_limit_seats", "eru_flowcontrol_request_wait_duration_seconds",
		"eru_flowcontrol_request_execution_seconds",
	} {
		require.True(t, names[want], "%s is exported", want)
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP eru_flowcontrol_request_execution_seconds Time requests held their seats.
# TYPE eru_flowcontrol_request_execution_seconds histogram
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.0005"} 0
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.001"} 0
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.0025"} 0
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.005"} 0
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.01"} 0
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.025"} 0
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.05"} 0
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.1"} 0
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.25"} 1
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="0.5"} 1
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="1"} 1
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="2.5"} 1
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="5"} 1
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="10"} 1
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="30"} 1
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="60"} 1
eru_flowcontrol_request_execution_seconds_bucket{flow_schema="all",priority_level="only",le="+Inf"} 1
eru_flowcontrol_request_execution_seconds_sum{flow_schema="all",priority_level="only"} 0.25
eru_flowcontrol_request_execution_seconds_count{flow_schema="all",priority_level="only"} 1
`), "eru_flowcontrol_request_execution_seconds"))
}

func TestHandleRunsTheFunctionInsideASeat(t *testing.T) {
	c, err := New(oneLevel(1, &LimitResponse{Type: ResponseReject}), clock.NewFake(time.Now()), nil)
	require.NoError(t, err)
	defer c.Close()
	ran := false
	require.NoError(t, c.Handle(context.Background(), Request{}, func() {
		ran = true
		err := c.Handle(context.Background(), Request{}, func() { t.Fatal("no second seat exists") })
		_, rejected := IsRejected(err)
		require.True(t, rejected, "the only seat is taken while fn runs")
	}))
	require.True(t, ran)
	require.NoError(t, c.Handle(context.Background(), Request{}, func() {}), "the seat is free again")
}

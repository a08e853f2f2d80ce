// Package flowcontrol admits requests through priority levels with the
// semantics of Kubernetes' API Priority and Fairness: each request is matched
// to a schema, which names its priority level and how it is split into
// flows; Limited levels share the server's seats (borrowing from each other
// by demand, re-divided every 10 s) and either queue what does not fit, with
// fair queuing among flows, or reject it; Exempt levels never wait.
//
// serve builds one Controller from the `flowcontrol:` configuration and runs
// every request through Admit (or Handle); Reload applies a new
// configuration without disturbing requests already admitted.
package flowcontrol

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eru-extend/resources/flowcontrol/clock"
	"github.com/eru-extend/resources/flowcontrol/queueset"
)

const (
	// AdjustPeriod is how often the seats are re-divided among levels.
	AdjustPeriod = 10 * time.Second
	// smoothing is the decay of the smoothed seat demand per period.
	smoothing = 0.977
	// DefaultWait is how long a request without a deadline may wait in a queue.
	DefaultWait = 15 * time.Second
	// MaxWait caps the wait of a request with a deadline (which may otherwise
	// wait a quarter of the time it has left).
	MaxWait = time.Minute
)

// Rejection reasons beyond the queue set's own.
const (
	ReasonQueueFull        = queueset.ReasonQueueFull
	ReasonConcurrencyLimit = queueset.ReasonConcurrencyLimit
	ReasonTimeOut          = queueset.ReasonTimeOut
	ReasonCancelled        = queueset.ReasonCancelled
	ReasonShutdown         = "shutdown"
)

// Request describes a request to admit. Only the fields that apply are set.
type Request struct {
	Verb    string // plugin verb forwarded over the socket, e.g. calculate-deploy
	Path    string // HTTP path, e.g. /v1/nodes
	Command string // operator command, e.g. nodes drain
	Pod     string // the pod (or, for verbs with only a node, the node)
	Caller  string // the peer: uid+parent pid on the socket, certificate CN or address over HTTP
	Width   int    // seats the request occupies: 0 means 1, at most server_concurrency
}

// RejectedError is a request flow control turned away.
type RejectedError struct {
	Level      string
	Schema     string
	Reason     string        // queue-full, concurrency-limit, time-out, cancelled or shutdown
	RetryAfter time.Duration // whole seconds, 1–32
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("too many requests (priority level %s, retry after %ds)", e.Level, int(e.RetryAfter/time.Second))
}

// IsRejected reports whether err is (or wraps) a RejectedError, and returns it.
func IsRejected(err error) (*RejectedError, bool) {
	var r *RejectedError
	ok := errors.As(err, &r)
	return r, ok
}

// WaitLimit is how long a request may wait in a queue: a quarter of the time
// left before its deadline, at most MaxWait, or DefaultWait without one.
func WaitLimit(now, deadline time.Time, hasDeadline bool) time.Duration {
	if !hasDeadline {
		return DefaultWait
	}
	left := deadline.Sub(now)
	if left <= 0 {
		return 0
	}
	return min(left/4, MaxWait)
}

// Limits are a level's concurrency limits, in seats.
type Limits struct {
	Nominal int // NominalCL
	Min     int // NominalCL − LendableCL
	Max     int // NominalCL + BorrowingCL
	Current int // CurrentCL, between Min and Max for a Limited level
}

type level struct {
	spec     Level
	exempt   bool
	limits   Limits
	qs       *queueset.QueueSet // Limited levels
	demand   *queueset.Integrator
	inUse    int // Exempt levels: seats in use
	stats    demandStats
	tickets  int // admitted and not done (executing or waiting)
	retiring bool
}

// demandStats is the smoothed seat demand of one level (Kubernetes'
// seatDemandStats).
type demandStats struct {
	highWater       int
	avg, stdDev     float64
	smoothed        float64
	target, lowerCL float64
}

func (s *demandStats) update(r queueset.Results) {
	s.highWater = int(math.Round(r.Max))
	if r.Duration <= 0 {
		return
	}
	s.avg, s.stdDev = r.Average, r.Deviation
	envelope := r.Average + r.Deviation
	s.smoothed = math.Max(envelope, smoothing*s.smoothed+(1-smoothing)*envelope)
}

// Controller is the flow control of one server. It is safe for concurrent use.
type Controller struct {
	mu         sync.Mutex
	clk        clock.Clock
	m          *metrics
	drops      *dropTracker
	serverCL   int
	nominalSum int
	levels     map[string]*level // active levels by name
	order      []*level          // active levels in configuration order
	retiring   []*level          // removed levels still holding requests
	schemas    []Schema          // by precedence, then configuration order
	timer      clock.Timer
	closed     bool
	waiting    map[*Ticket]struct{}
}

// New builds a Controller from cfg (absent parts defaulted, then validated),
// reading time from clk and registering its metrics on reg (none if nil).
// Close it to stop its timer and unregister the metrics.
func New(cfg Config, clk clock.Clock, reg prometheus.Registerer) (*Controller, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	c := &Controller{clk: clk, m: m, drops: newDropTracker(), levels: map[string]*level{},
		waiting: map[*Ticket]struct{}{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyLocked(cfg)
	c.timer = clk.AfterFunc(AdjustPeriod, c.tick)
	return c, nil
}

// Reload applies a new configuration. Admitted requests keep their seats
// and queued ones stay queued; a level that disappears (or changes type)
// lingers until its requests are done.
func (c *Controller) Reload(cfg Config) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("flowcontrol: reload after close")
	}
	c.applyLocked(cfg)
	return nil
}

// Close stops the periodic re-division, rejects every queued request with
// reason shutdown and unregisters the metrics. Requests executing may still
// call Done. Admit after Close rejects.
func (c *Controller) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.timer.Stop()
	for t := range c.waiting {
		c.cancelLocked(t, ReasonShutdown)
	}
	c.mu.Unlock()
	c.m.unregister()
}

func (c *Controller) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.adjustLocked()
	c.timer = c.clk.AfterFunc(AdjustPeriod, c.tick)
}

func queueConfig(l Level) queueset.Config {
	lr := l.LimitResponse
	if lr == nil || lr.Type != ResponseQueue {
		return queueset.Config{}
	}
	return queueset.Config{Queues: *lr.Queues, HandSize: *lr.HandSize, QueueLengthLimit: *lr.QueueLengthLimit}
}

// applyLocked installs a validated configuration.
func (c *Controller) applyLocked(cfg Config) {
	c.serverCL = *cfg.ServerConcurrency
	old := c.levels
	named := map[string]bool{}
	fresh := map[*level]bool{}
	c.levels = map[string]*level{}
	c.order = c.order[:0]
	for _, spec := range cfg.Levels {
		exempt := spec.Type == TypeExempt
		named[spec.Name] = true
		l := old[spec.Name]
		if l != nil && l.exempt == exempt {
			delete(old, spec.Name)
		} else {
			// A level an earlier reload removed (or retyped) that still
			// drains comes back as it is, as Kubernetes revives a quiescing
			// level: its requests keep holding its seats.
			l = c.reviveLocked(spec.Name, exempt)
		}
		if l != nil {
			if !exempt {
				// Validated, so the shape is accepted.
				_ = l.qs.SetConfig(queueConfig(spec))
			}
		} else {
			l = &level{exempt: exempt}
			fresh[l] = true
			if exempt {
				l.demand = queueset.NewIntegrator(c.clk)
			} else {
				// The limit is set by divideLocked below.
				l.qs, _ = queueset.New(c.clk, queueConfig(spec), 0)
				l.demand = l.qs.SeatDemand()
			}
		}
		l.spec = spec
		c.levels[spec.Name] = l
		c.order = append(c.order, l)
	}
	for name, l := range old {
		if l.tickets > 0 {
			l.retiring = true
			c.retiring = append(c.retiring, l)
		}
		if !named[name] { // a level whose type changed has new gauges already
			c.m.forgetLevel(name)
		}
	}
	c.divideLocked(fresh)
	for _, s := range cfg.Schemas {
		// Start every schema's gauges at 0, so dashboards see them before use.
		c.m.waiting.WithLabelValues(s.Level, s.Name)
		c.m.executing.WithLabelValues(s.Level, s.Name)
		c.m.seatsInUse.WithLabelValues(s.Level, s.Name)
	}
	c.schemas = slices.Clone(cfg.Schemas)
	slices.SortStableFunc(c.schemas, func(a, b Schema) int { return a.Precedence - b.Precedence })
	// No re-division here: the demand of a partial period would lend every
	// idle level's seats away (a daemon just started has seen no demand);
	// the next periodic one uses the new limits.
}

// divideLocked computes every level's NominalCL, MinCL and MaxCL from its
// shares of the server's seats. A level removed (or retyped) while its
// requests still hold seats or wait keeps its shares in the sum, as
// Kubernetes keeps a quiescing level, until it has drained (then
// dropRetiredLocked divides again): otherwise the levels left would share
// the whole server while it still holds seats. A level in fresh starts
// halfway into what it may lend (as Kubernetes starts it); any other keeps
// its current limit, within its new bounds, until the next re-division.
func (c *Controller) divideLocked(fresh map[*level]bool) {
	all := c.holdingLocked()
	shares := 0
	for _, l := range all {
		shares += *l.spec.NominalConcurrencyShares
	}
	c.nominalSum = 0
	for _, l := range all {
		spec := l.spec
		nominal := 0
		if shares > 0 {
			nominal = int(math.Ceil(float64(c.serverCL) * float64(*spec.NominalConcurrencyShares) / float64(shares)))
		}
		lendable := int(math.Round(float64(nominal) * float64(*spec.LendablePercent) / 100))
		borrowing := c.serverCL
		if p := spec.BorrowingLimitPercent; p != nil {
			borrowing = int(math.Round(float64(nominal) * float64(*p) / 100))
		}
		c.nominalSum += nominal
		l.limits.Nominal, l.limits.Min, l.limits.Max = nominal, nominal-lendable, nominal+borrowing
		if fresh[l] {
			l.limits.Current = nominal - lendable/2
		}
		l.limits.Current = min(max(l.limits.Current, l.limits.Min), l.limits.Max)
		if !l.exempt {
			l.qs.SetLimit(l.limits.Current)
		}
		if !l.retiring { // a draining level's gauges are forgotten, or are its successor's
			c.setLimitGaugesLocked(l)
		}
	}
}

// holdingLocked is every level that may hold seats: the configured ones,
// then the removed ones still draining.
func (c *Controller) holdingLocked() []*level {
	return append(slices.Clone(c.order), c.retiring...)
}

// setLimitGaugesLocked publishes an active level's limits.
func (c *Controller) setLimitGaugesLocked(l *level) {
	name := l.spec.Name
	c.m.nominalLimit.WithLabelValues(name).Set(float64(l.limits.Nominal))
	c.m.lowerLimit.WithLabelValues(name).Set(float64(l.limits.Min))
	c.m.upperLimit.WithLabelValues(name).Set(float64(l.limits.Max))
	c.m.currentLimit.WithLabelValues(name).Set(float64(l.limits.Current))
}

// adjustLocked re-divides the seats among the levels from their seat demand
// over the last period (Kubernetes' borrowing): an Exempt level is granted
// its high-water mark, which is subtracted from what Limited levels share;
// a Limited level keeps at least min(NominalCL, its high-water mark) (but
// never less than its MinCL) and the rest is divided in proportion to the
// smoothed demand, within each level's [MinCL, MaxCL]. A draining level
// takes part like any other (its demand is what it still holds and
// queues), as a quiescing level does in Kubernetes.
func (c *Controller) adjustLocked() {
	remaining := c.nominalSum
	var items []allocItem
	var limited []*level
	minSum, lowerSum := 0, 0
	for _, l := range c.holdingLocked() {
		l.stats.update(l.demand.Reset())
		if l.exempt {
			l.limits.Current = max(l.limits.Min, l.stats.highWater)
			remaining -= l.limits.Current
			if !l.retiring {
				c.m.currentLimit.WithLabelValues(l.spec.Name).Set(float64(l.limits.Current))
			}
			continue
		}
		lower := max(l.limits.Min, min(l.limits.Nominal, l.stats.highWater))
		l.stats.lowerCL = float64(lower)
		l.stats.target = math.Max(float64(lower), l.stats.smoothed)
		items = append(items, allocItem{target: l.stats.target, lower: float64(lower), upper: float64(l.limits.Max)})
		limited = append(limited, l)
		minSum += l.limits.Min
		lowerSum += lower
	}
	switch {
	case remaining <= minSum:
		for _, l := range limited {
			l.limits.Current = l.limits.Min
		}
	case remaining <= lowerSum:
		frac := float64(remaining-minSum) / float64(lowerSum-minSum)
		for _, l := range limited {
			l.limits.Current = l.limits.Min + int(math.Round((l.stats.lowerCL-float64(l.limits.Min))*frac))
		}
	default:
		upperSum := 0.0
		for _, it := range items {
			upperSum += it.upper
		}
		allocs, _, err := allocate(math.Min(float64(remaining), upperSum), items)
		if err == nil {
			for i, l := range limited {
				l.limits.Current = int(math.Round(allocs[i]))
			}
		}
	}
	for _, l := range limited {
		l.qs.SetLimit(l.limits.Current)
		if l.retiring {
			continue
		}
		c.m.currentLimit.WithLabelValues(l.spec.Name).Set(float64(l.limits.Current))
		c.m.seatDemand.WithLabelValues(l.spec.Name).Set(l.stats.smoothed)
	}
}

// Limits reports a level's limits now (false for an unknown level).
func (c *Controller) Limits(levelName string) (Limits, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.levels[levelName]
	if l == nil {
		return Limits{}, false
	}
	return l.limits, true
}

// Classify names the schema and level a request belongs to, for the
// X-Eru-PF-* headers.
func (c *Controller) Classify(r Request) (levelName, schema string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.match(r)
	return s.Level, s.Name
}

func (c *Controller) match(r Request) *Schema {
	for i := range c.schemas {
		if c.schemas[i].matches(r) {
			return &c.schemas[i]
		}
	}
	// Validation guarantees a schema with any: true; keep a last resort.
	return &c.schemas[len(c.schemas)-1]
}

func (s *Schema) matches(r Request) bool {
	m := s.Match
	if m.Any {
		return true
	}
	if r.Verb != "" && (slices.Contains(m.Verbs, r.Verb) || slices.Contains(m.Verbs, "*")) {
		return true
	}
	if r.Command != "" && (slices.Contains(m.Commands, r.Command) || slices.Contains(m.Commands, "*")) {
		return true
	}
	if r.Path != "" {
		for _, p := range m.Paths {
			if p == "*" || p == r.Path || (strings.HasSuffix(p, "/*") && strings.HasPrefix(r.Path, p[:len(p)-1])) {
				return true
			}
		}
	}
	return false
}

// flowHash hashes a flow (schema and distinguisher value) for shuffle sharding.
func flowHash(s *Schema, r Request) uint64 {
	var d string
	switch s.Distinguisher {
	case DistinguishByPod:
		d = r.Pod
	case DistinguishByCaller:
		d = r.Caller
	}
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	h.Write([]byte{0})
	h.Write([]byte(d))
	x := h.Sum64()
	// Finish with a 64-bit mixer so that every bit depends on every input bit.
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Ticket is an admitted request. Call Done exactly once when it finishes.
type Ticket struct {
	c       *Controller
	lvl     *level
	level   string
	schema  string
	width   int
	q       *queueset.Request
	arrived time.Time
	started time.Time
	timer   clock.Timer
	notify  func() // tells the waiter the request was dispatched or rejected
	err     *RejectedError
	done    bool
}

// Level is the ticket's priority level.
func (t *Ticket) Level() string { return t.level }

// Schema is the ticket's flow schema.
func (t *Ticket) Schema() string { return t.schema }

// Waited is how long the request waited in a queue.
func (t *Ticket) Waited() time.Duration { return t.started.Sub(t.arrived) }

// Admit waits until the request may execute, or returns a *RejectedError.
// A request waits at most WaitLimit (from ctx's deadline); if ctx ends
// first it is withdrawn with reason cancelled.
func (c *Controller) Admit(ctx context.Context, r Request) (*Ticket, error) {
	ready := make(chan struct{})
	deadline, ok := ctx.Deadline()
	t, queued, err := c.start(r, deadline, ok, func() { close(ready) })
	if err != nil {
		return nil, err
	}
	if queued {
		select {
		case <-ready:
		case <-ctx.Done():
			c.mu.Lock()
			c.cancelLocked(t, ReasonCancelled)
			c.mu.Unlock()
			<-ready
		}
	}
	if t.err != nil {
		return nil, t.err
	}
	return t, nil
}

// Handle admits the request, runs fn, and releases the seats.
func (c *Controller) Handle(ctx context.Context, r Request, fn func()) error {
	t, err := c.Admit(ctx, r)
	if err != nil {
		return err
	}
	defer t.Done()
	fn()
	return nil
}

// start admits a request without blocking: the ticket is executing, or
// queued, in which case notify runs (under the lock) once it is dispatched
// or rejected (t.err set).
func (c *Controller) start(r Request, deadline time.Time, hasDeadline bool, notify func()) (t *Ticket, queued bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.match(r)
	if c.closed {
		return nil, false, &RejectedError{Level: s.Level, Schema: s.Name, Reason: ReasonShutdown, RetryAfter: time.Second}
	}
	l := c.levels[s.Level]
	now := c.clk.Now()
	t = &Ticket{c: c, lvl: l, level: s.Level, schema: s.Name, width: min(max(r.Width, 1), c.serverCL), arrived: now, notify: notify}
	if l.exempt {
		l.inUse += t.width
		l.demand.Set(float64(l.inUse))
		l.tickets++
		c.startedLocked(t, now)
		return t, false, nil
	}
	t.q = &queueset.Request{Hash: flowHash(s, r), Width: t.width}
	t.q.OnDispatch = func() { c.dispatchedLocked(t) }
	switch out, reason := l.qs.Start(t.q); out {
	case queueset.Rejected:
		return nil, false, c.rejectLocked(t, reason)
	case queueset.Dispatched:
		l.tickets++
		c.startedLocked(t, now)
		return t, false, nil
	}
	l.tickets++
	c.m.waiting.WithLabelValues(t.level, t.schema).Inc()
	c.waiting[t] = struct{}{}
	t.timer = c.clk.AfterFunc(WaitLimit(now, deadline, hasDeadline), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.cancelLocked(t, ReasonTimeOut)
	})
	return t, true, nil
}

func (c *Controller) startedLocked(t *Ticket, now time.Time) {
	t.started = now
	c.m.dispatched.WithLabelValues(t.level, t.schema).Inc()
	c.m.executing.WithLabelValues(t.level, t.schema).Inc()
	c.m.seatsInUse.WithLabelValues(t.level, t.schema).Add(float64(t.width))
	c.m.waitTime.WithLabelValues(t.level, t.schema, "true").Observe(now.Sub(t.arrived).Seconds())
}

// dispatchedLocked runs when the queue set dispatches a waiting ticket.
func (c *Controller) dispatchedLocked(t *Ticket) {
	t.timer.Stop()
	delete(c.waiting, t)
	c.m.waiting.WithLabelValues(t.level, t.schema).Dec()
	if c.closed {
		// Close withdrew a wider request ahead of this one, making room:
		// it is refused like every other waiting request. Its seats stay
		// taken in the closed controller, where nothing runs any more.
		c.m.waitTime.WithLabelValues(t.level, t.schema, "false").Observe(c.clk.Now().Sub(t.arrived).Seconds())
		t.lvl.tickets--
		c.dropRetiredLocked(t.lvl)
		t.err = c.rejectLocked(t, ReasonShutdown)
		t.notify()
		return
	}
	c.startedLocked(t, c.clk.Now())
	t.notify()
}

// cancelLocked withdraws a waiting ticket, rejecting it with reason; it does
// nothing if the ticket was dispatched already.
func (c *Controller) cancelLocked(t *Ticket, reason string) {
	if !t.lvl.qs.Cancel(t.q) {
		return
	}
	t.timer.Stop()
	delete(c.waiting, t)
	c.m.waiting.WithLabelValues(t.level, t.schema).Dec()
	c.m.waitTime.WithLabelValues(t.level, t.schema, "false").Observe(c.clk.Now().Sub(t.arrived).Seconds())
	t.lvl.tickets--
	c.dropRetiredLocked(t.lvl)
	t.err = c.rejectLocked(t, reason)
	t.notify()
}

func (c *Controller) rejectLocked(t *Ticket, reason string) *RejectedError {
	c.m.rejected.WithLabelValues(t.level, t.schema, reason).Inc()
	if reason != ReasonCancelled && reason != ReasonShutdown {
		c.drops.record(t.level, c.clk.Now())
	}
	return &RejectedError{Level: t.level, Schema: t.schema, Reason: reason, RetryAfter: c.drops.retryAfter(t.level)}
}

// Done releases the ticket's seats. Calls after the first do nothing.
func (t *Ticket) Done() {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	l := t.lvl
	if l.exempt {
		l.inUse -= t.width
		l.demand.Set(float64(l.inUse))
	} else {
		l.qs.Finish(t.q)
	}
	l.tickets--
	c.m.executing.WithLabelValues(t.level, t.schema).Dec()
	c.m.seatsInUse.WithLabelValues(t.level, t.schema).Sub(float64(t.width))
	c.m.execTime.WithLabelValues(t.level, t.schema).Observe(c.clk.Now().Sub(t.started).Seconds())
	c.dropRetiredLocked(l)
}

// reviveLocked takes back a draining level of that name and type, if any.
func (c *Controller) reviveLocked(name string, exempt bool) *level {
	i := slices.IndexFunc(c.retiring, func(l *level) bool { return l.spec.Name == name && l.exempt == exempt })
	if i < 0 {
		return nil
	}
	l := c.retiring[i]
	c.retiring = slices.Delete(c.retiring, i, i+1)
	l.retiring = false
	return l
}

// dropRetiredLocked forgets a removed level once its last request is done,
// and divides its shares among the levels left (Kubernetes reloads its
// configuration when a quiescing level becomes idle, to the same end).
func (c *Controller) dropRetiredLocked(l *level) {
	if !l.retiring || l.tickets > 0 {
		return
	}
	l.retiring = false
	c.retiring = slices.DeleteFunc(c.retiring, func(x *level) bool { return x == l })
	if !c.closed { // a closed controller dispatches nothing more
		c.divideLocked(nil)
	}
}

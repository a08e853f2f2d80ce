// Package clock is the time source of flow control: the real clock in
// production and a deterministic simulated clock in tests, behind one small
// interface so every decision that depends on time can be replayed.
package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Clock tells the time and runs a function after a delay.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once, d after now, unless the returned Timer is
	// stopped first. f runs on a goroutine the clock chooses.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports whether the call was still pending.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a simulated clock: time stands still until Advance or Run moves it,
// and pending functions run synchronously, in time order (ties in the order
// they were scheduled), on the goroutine that moves the clock. It is safe for
// concurrent use; the functions it runs may schedule more.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	events eventHeap
}

// NewFake returns a simulated clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the simulated time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc schedules fn at Now()+d (a negative d means now).
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d < 0 {
		d = 0
	}
	f.seq++
	ev := &event{at: f.now.Add(d), seq: f.seq, fn: fn, clock: f}
	heap.Push(&f.events, ev)
	return ev
}

// Pending returns how many functions wait to run.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// Advance moves the clock forward by d, running every function due by then.
func (f *Fake) Advance(d time.Duration) { f.RunUntil(f.Now().Add(d)) }

// RunUntil runs every function due at or before t, then sets the time to t
// (the clock never moves backwards).
func (f *Fake) RunUntil(t time.Time) {
	for f.step(&t) {
	}
	f.mu.Lock()
	if t.After(f.now) {
		f.now = t
	}
	f.mu.Unlock()
}

// Run runs pending functions until none is left.
func (f *Fake) Run() {
	for f.step(nil) {
	}
}

// step runs the earliest pending function due by limit (any, if nil).
func (f *Fake) step(limit *time.Time) bool {
	f.mu.Lock()
	if len(f.events) == 0 || (limit != nil && f.events[0].at.After(*limit)) {
		f.mu.Unlock()
		return false
	}
	ev := heap.Pop(&f.events).(*event)
	ev.index = -1
	if ev.at.After(f.now) {
		f.now = ev.at
	}
	f.mu.Unlock()
	ev.fn()
	return true
}

type event struct {
	at    time.Time
	seq   uint64
	fn    func()
	index int
	clock *Fake
}

// Stop removes the event if it has not run yet.
func (e *event) Stop() bool {
	f := e.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.index < 0 {
		return false
	}
	heap.Remove(&f.events, e.index)
	e.index = -1
	return true
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h eventHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *eventHeap) Push(x any) {
	e := x.(*event)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *eventHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}

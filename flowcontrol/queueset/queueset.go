// Package queueset is fair queuing for server requests, one set of queues per
// priority level: a flow is shuffle-sharded onto a hand of queues and joins
// the one with the least waiting work; queued requests are dispatched in
// order of virtual finish time, so flows that share the level's seats get
// max-min fair shares of seat-seconds.
//
// Virtual time R advances at min(seats demanded, limit) / active queues
// seat-seconds per second. Each queue keeps the virtual time of its next
// dispatch; dispatching a request of width W advances it by W × G (G, a guess
// of the service time), and when the request finishes the guess is corrected
// by W × (actual − G). Kubernetes keeps G fixed at 3 ms; here G follows a
// moving average of the observed service times, which removes most of the
// lag between dispatch and correction that otherwise lets flows spread over
// several queues drift apart by several percent. The next-dispatch time is never allowed to fall behind
// the arrival time of the queue's oldest waiting request (the anti-windup
// bound: a queue that could not use its share for a while does not bank it).
// Virtual time is a 64-bit fixed-point count; when it nears the top of its
// range every queue's figures move down together (an epoch advance).
//
// A QueueSet is not safe for concurrent use: its owner serializes calls, and
// the OnDispatch callbacks run inside those calls.
package queueset

import (
	"container/list"
	"fmt"
	"math"
	"time"

	"github.com/eru-extend/resources/flowcontrol/clock"
	"github.com/eru-extend/resources/flowcontrol/shufflesharding"
)

// SeatSeconds is an amount of virtual time: seat-seconds in units of 1e-8.
type SeatSeconds uint64

const ssPerSeatSecond = 1e8

// ToFloat converts to seat-seconds.
func (s SeatSeconds) ToFloat() float64 { return float64(s) / ssPerSeatSecond }

// seatsTimes is seats × d as SeatSeconds (d ≥ 0).
func seatsTimes(seats float64, d time.Duration) SeatSeconds {
	return SeatSeconds(math.Round(seats * float64(d) / (1e9 / ssPerSeatSecond)))
}

const (
	// epochDecrement is how far virtual time moves down at an epoch advance;
	// an advance happens once R reaches 1.5 × epochDecrement.
	epochDecrement = SeatSeconds(math.MaxUint64 / 2)
	epochTrigger   = epochDecrement + epochDecrement/2
	// initialGuess is G, the service time charged at dispatch before the
	// real one is known, until requests have finished; then G follows the
	// observed service times with weight guessWeight.
	initialGuess = 3 * time.Millisecond
	guessWeight  = 0.05
	// maxGuess bounds G, and with it the virtual time one dispatch adds.
	maxGuess = time.Minute
)

// Config shapes the queues. Queues 0 means no queuing: a request that cannot
// run at once is rejected (the Reject limit response).
type Config struct {
	Queues           int
	HandSize         int
	QueueLengthLimit int
}

// Outcome is what Start did with a request.
type Outcome int

// Outcomes of Start.
const (
	Dispatched Outcome = iota // executing now; call Finish when done
	Queued                    // waiting; OnDispatch runs when it executes, or call Cancel
	Rejected                  // never executes
)

// Reasons for a rejection, as the metrics label them.
const (
	ReasonQueueFull        = "queue-full"
	ReasonConcurrencyLimit = "concurrency-limit"
	ReasonTimeOut          = "time-out"
	ReasonCancelled        = "cancelled"
	// ReasonReused is a Request value started a second time: it is refused
	// rather than counted twice.
	ReasonReused = "reused-request"
)

// Request is one request of a flow. Fill the exported fields, then Start it.
type Request struct {
	Hash       uint64 // the flow's hash; selects the hand of queues
	Width      int    // seats occupied while executing (at least 1)
	OnDispatch func() // called when a queued request starts executing

	queue    *queue
	arrivalR SeatSeconds
	charged  SeatSeconds // width × the service-time guess when it arrived
	elem     *list.Element
	started  time.Time
	state    reqState
}

type reqState uint8

const (
	stateNew reqState = iota
	stateWaiting
	stateExecuting
	stateDone
)

func (r *Request) work() SeatSeconds { return r.charged }

type queue struct {
	waiting      *list.List // of *Request, oldest first
	waitingSeats int
	waitingWork  SeatSeconds
	executing    int // requests
	seatsInUse   int
	nextDispatch SeatSeconds
}

func (q *queue) idle() bool { return q.waiting.Len() == 0 && q.executing == 0 }

// QueueSet is the queues and seats of one priority level.
type QueueSet struct {
	clk      clock.Clock
	cfg      Config
	dealer   shufflesharding.Dealer
	limit    int
	queues   []*queue
	robin    int
	enqueues int
	hand     []int

	guess    time.Duration // G: a moving average of service times
	currentR SeatSeconds
	lastTime time.Time
	epochs   int

	waitingReqs, waitingSeats int
	executingReqs, seatsInUse int
	seatDemand                *Integrator
}

// New returns an empty QueueSet with the given shape and concurrency limit.
func New(clk clock.Clock, cfg Config, limit int) (*QueueSet, error) {
	qs := &QueueSet{clk: clk, lastTime: clk.Now(), seatDemand: NewIntegrator(clk), guess: initialGuess}
	if err := qs.SetConfig(cfg); err != nil {
		return nil, err
	}
	qs.limit = limit
	return qs, nil
}

// CheckConfig reports whether cfg is a valid shape.
func CheckConfig(cfg Config) error {
	if cfg.Queues == 0 {
		return nil
	}
	if cfg.QueueLengthLimit < 1 {
		return fmt.Errorf("queue length limit %d: must be at least 1", cfg.QueueLengthLimit)
	}
	_, err := shufflesharding.NewDealer(cfg.Queues, cfg.HandSize)
	return err
}

// SetConfig reshapes the queues. Requests already waiting stay where they
// are; queues beyond the new count are dropped once they drain.
func (qs *QueueSet) SetConfig(cfg Config) error {
	if err := CheckConfig(cfg); err != nil {
		return err
	}
	qs.syncTime()
	if cfg.Queues > 0 {
		d, _ := shufflesharding.NewDealer(cfg.Queues, cfg.HandSize)
		qs.dealer = d
		for len(qs.queues) < cfg.Queues {
			qs.queues = append(qs.queues, &queue{waiting: list.New()})
		}
	}
	qs.cfg = cfg
	qs.trimQueues()
	qs.dispatchAsMuchAsPossible()
	return nil
}

// SetLimit changes the concurrency limit and dispatches what now fits.
func (qs *QueueSet) SetLimit(limit int) {
	qs.syncTime()
	qs.limit = limit
	qs.dispatchAsMuchAsPossible()
}

// Limit is the current concurrency limit.
func (qs *QueueSet) Limit() int { return qs.limit }

// SeatsInUse is the seats held by executing requests.
func (qs *QueueSet) SeatsInUse() int { return qs.seatsInUse }

// Executing is the number of executing requests.
func (qs *QueueSet) Executing() int { return qs.executingReqs }

// Waiting is the number of queued requests.
func (qs *QueueSet) Waiting() int { return qs.waitingReqs }

// EpochAdvances counts the epoch advances of virtual time so far.
func (qs *QueueSet) EpochAdvances() int { return qs.epochs }

// CurrentR is the virtual time now.
func (qs *QueueSet) CurrentR() SeatSeconds {
	qs.syncTime()
	return qs.currentR
}

// SeatDemand integrates the seats in use plus the seats waiting.
func (qs *QueueSet) SeatDemand() *Integrator { return qs.seatDemand }

// Start admits r: it executes at once, waits in a queue, or is rejected with
// a reason. A request already started is rejected (ReasonReused) and its
// first start keeps its seats or its place.
func (qs *QueueSet) Start(r *Request) (Outcome, string) {
	if r.state != stateNew {
		return Rejected, ReasonReused
	}
	if r.Width < 1 {
		r.Width = 1
	}
	qs.syncTime()
	if qs.cfg.Queues == 0 {
		if !qs.canAccommodate(r.Width) {
			r.state = stateDone
			return Rejected, ReasonConcurrencyLimit
		}
		qs.execute(r)
		qs.noteDemand()
		return Dispatched, ""
	}
	q := qs.chooseQueue(r.Hash)
	if qs.seatsInUse >= qs.limit && q.waiting.Len() >= qs.cfg.QueueLengthLimit {
		r.state = stateDone
		return Rejected, ReasonQueueFull
	}
	if q.idle() {
		q.nextDispatch = qs.currentR
	}
	r.queue = q
	r.arrivalR = qs.currentR
	r.charged = seatsTimes(float64(r.Width), qs.guess)
	r.state = stateWaiting
	r.elem = q.waiting.PushBack(r)
	q.waitingSeats += r.Width
	q.waitingWork += r.work()
	qs.waitingReqs++
	qs.waitingSeats += r.Width
	qs.bound(q)
	qs.noteDemand()
	onDispatch := r.OnDispatch
	r.OnDispatch = nil // the caller learns of its own request from the return value
	qs.dispatchAsMuchAsPossible()
	r.OnDispatch = onDispatch
	if r.state == stateExecuting {
		return Dispatched, ""
	}
	return Queued, ""
}

// Cancel withdraws a waiting request; it reports false (and does nothing)
// when the request is not waiting, e.g. because it was dispatched already.
func (qs *QueueSet) Cancel(r *Request) bool {
	if r.state != stateWaiting {
		return false
	}
	qs.syncTime()
	q := r.queue
	qs.unqueue(r)
	r.state = stateDone
	qs.bound(q)
	qs.noteDemand()
	qs.trimQueues()
	qs.dispatchAsMuchAsPossible()
	return true
}

// Finish releases an executing request's seats and dispatches what now fits.
// Finishing a request that is not executing (finished already, still
// queued, rejected) releases nothing: seats are returned exactly once.
func (qs *QueueSet) Finish(r *Request) {
	if r.state != stateExecuting {
		return
	}
	qs.syncTime()
	r.state = stateDone
	qs.executingReqs--
	qs.seatsInUse -= r.Width
	if q := r.queue; q != nil {
		q.executing--
		q.seatsInUse -= r.Width
		// Correct the guess G by the real service time.
		actual := qs.clk.Now().Sub(r.started)
		used := seatsTimes(float64(r.Width), actual)
		if used < r.charged {
			q.nextDispatch -= min(q.nextDispatch, r.charged-used)
		} else {
			q.nextDispatch += used - r.charged
		}
		qs.bound(q)
		qs.guess += time.Duration(guessWeight * float64(min(actual, maxGuess)-qs.guess))
	}
	qs.noteDemand()
	qs.trimQueues()
	qs.dispatchAsMuchAsPossible()
}

func (qs *QueueSet) noteDemand() {
	qs.seatDemand.Set(float64(qs.seatsInUse + qs.waitingSeats))
}

// chooseQueue deals the flow's hand and picks the queue with the least
// waiting work, scanning from a rotating offset so that ties do not always
// favour the first card.
func (qs *QueueSet) chooseQueue(hash uint64) *queue {
	qs.hand = qs.dealer.Deal(hash, qs.hand)
	n := len(qs.hand)
	offset := qs.enqueues % n
	qs.enqueues++
	var best *queue
	for i := range n {
		q := qs.queues[qs.hand[(offset+i)%n]]
		if best == nil || q.waitingWork < best.waitingWork {
			best = q
		}
	}
	return best
}

// canAccommodate: the seats fit under the limit, or the request is wider
// than the whole limit and nothing executes (so wide requests are not
// starved forever, and a level whose limit is 0 still runs one request at a
// time).
func (qs *QueueSet) canAccommodate(width int) bool {
	if qs.seatsInUse+width <= qs.limit {
		return true
	}
	return width > qs.limit && qs.executingReqs == 0
}

func (qs *QueueSet) execute(r *Request) {
	r.state = stateExecuting
	r.started = qs.clk.Now()
	qs.executingReqs++
	qs.seatsInUse += r.Width
	if q := r.queue; q != nil {
		q.executing++
		q.seatsInUse += r.Width
	}
}

func (qs *QueueSet) unqueue(r *Request) {
	q := r.queue
	q.waiting.Remove(r.elem)
	r.elem = nil
	q.waitingSeats -= r.Width
	q.waitingWork -= r.work()
	qs.waitingReqs--
	qs.waitingSeats -= r.Width
}

func (qs *QueueSet) dispatchAsMuchAsPossible() {
	for qs.waitingReqs > 0 && qs.dispatchOne() {
	}
}

// dispatchOne starts the head of the queue with the earliest virtual finish
// time, if its seats fit. It never skips over that request to a narrower one:
// doing so would starve wide requests.
func (qs *QueueSet) dispatchOne() bool {
	var best *queue
	var bestIdx int
	var bestFinish SeatSeconds
	n := len(qs.queues)
	for range n {
		qs.robin = (qs.robin + 1) % n
		q := qs.queues[qs.robin]
		front := q.waiting.Front()
		if front == nil {
			continue
		}
		head := front.Value.(*Request)
		finish := q.nextDispatch + head.work()
		if best == nil || finish < bestFinish {
			best, bestIdx, bestFinish = q, qs.robin, finish
		}
	}
	if best == nil {
		return false
	}
	r := best.waiting.Front().Value.(*Request)
	if !qs.canAccommodate(r.Width) {
		return false
	}
	qs.robin = bestIdx
	qs.unqueue(r)
	qs.execute(r)
	best.nextDispatch += r.work()
	qs.bound(best)
	qs.noteDemand()
	if r.OnDispatch != nil {
		r.OnDispatch()
	}
	return true
}

// bound applies the anti-windup bound: a queue's next dispatch is never
// earlier than the arrival of its oldest waiting request.
func (qs *QueueSet) bound(q *queue) {
	front := q.waiting.Front()
	if front == nil {
		return
	}
	if a := front.Value.(*Request).arrivalR; q.nextDispatch < a {
		q.nextDispatch = a
	}
}

// syncTime advances virtual time to the clock's now.
func (qs *QueueSet) syncTime() {
	now := qs.clk.Now()
	dt := now.Sub(qs.lastTime)
	qs.lastTime = now
	if dt <= 0 {
		return
	}
	active, demand := 0, 0
	for _, q := range qs.queues {
		if !q.idle() {
			active++
		}
		demand += q.seatsInUse + q.waitingSeats
	}
	if active == 0 {
		return
	}
	rate := math.Min(float64(demand), float64(max(qs.limit, 1))) / float64(active)
	qs.currentR += seatsTimes(rate, dt)
	if qs.currentR >= epochTrigger {
		qs.advanceEpoch()
	}
}

// advanceEpoch moves every virtual time down by epochDecrement.
func (qs *QueueSet) advanceEpoch() {
	qs.currentR -= epochDecrement
	for _, q := range qs.queues {
		if q.idle() {
			q.nextDispatch = 0
			continue
		}
		q.nextDispatch -= min(q.nextDispatch, epochDecrement)
		for e := q.waiting.Front(); e != nil; e = e.Next() {
			r := e.Value.(*Request)
			r.arrivalR -= min(r.arrivalR, epochDecrement)
		}
	}
	qs.epochs++
}

// trimQueues drops drained queues beyond the configured count.
func (qs *QueueSet) trimQueues() {
	if len(qs.queues) <= qs.cfg.Queues {
		return
	}
	kept := qs.queues[:0]
	for i, q := range qs.queues {
		if i < qs.cfg.Queues || !q.idle() {
			kept = append(kept, q)
		}
	}
	for i := len(kept); i < len(qs.queues); i++ {
		qs.queues[i] = nil
	}
	qs.queues = kept
	if qs.robin >= len(qs.queues) {
		qs.robin = 0
	}
}

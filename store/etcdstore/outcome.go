package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// How a write is made outcome-exact.
//
// Every Update's writes share a guard lease, granted beside the Update's
// first read, whose time to live outlasts the call's budget. Each attempt
// (one transaction) also puts a marker, <prefix>/guards/<lease>.<n>, bound
// to that lease and required to be absent: the marker lands if and only if
// the attempt does. When an attempt's answer is lost (a timeout, a cut
// connection, "request timed out", a leader change), the attempt is fenced:
// a second transaction puts the same marker with another value if it is
// still absent, and otherwise reads it. etcd orders the two; after the fence
// the attempt can never land (its marker is taken, and once the lease has
// gone its put is refused), so the marker's value says exactly what
// happened. A write that arrives after the lease has gone is refused whole.
//
// No attempt starts in the last third of an Update's budget, which is left
// for fencing: an attempt still unanswered then is fenced while in flight,
// and whichever of the two answers first tells. Only when neither answers
// before the deadline does the call answer types.OutcomeUnknown.

// markerPrefix holds the markers: no record read, range or node listing
// covers it (records live under /resource/, registrations under /nodes/).
const markerPrefix = "/guards/"

// Values of a marker: put by the attempt itself, or by its fence.
const (
	landed = "w"
	fenced = "f"
)

// maxGrants bounds how many times the guard lease is asked for.
const maxGrants = 5

// defaultBudget bounds the writes of a call that has no deadline of its own:
// a guard lease must expire.
const defaultBudget = 10 * time.Second

// Scope implements store.Scoper: it starts granting the guard lease of one
// Update, so that the grant runs beside the Update's first read.
func (s *Store) Scope(ctx context.Context) store.Scope {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultBudget)
	}
	budget := time.Until(deadline)
	sc := &scope{s: s, deadline: deadline, granted: make(chan struct{})}
	// Fencing goes on when the caller gives up early: the call must not
	// answer before it knows what it did.
	sc.rctx, sc.rcancel = context.WithDeadline(context.WithoutCancel(ctx), deadline)
	sc.actx, sc.acancel = context.WithDeadline(ctx, deadline.Add(-budget/3))
	sc.ttl = max(1, int64(math.Ceil(budget.Seconds()))) + 1
	sc.wg.Go(func() {
		defer close(sc.granted)
		var lease *leaseGrantResponse
		for try := 1; ; try++ {
			gctx, cancel := s.bound(sc.actx)
			var err error
			lease, err = s.grant(gctx, sc.ttl)
			cancel()
			if err == nil {
				break
			}
			// A grant whose answer was lost leaves a lease that expires
			// on its own; an election is worth waiting out.
			if !transient(err) || try == maxGrants || time.Until(sc.deadline) < budget/2 {
				sc.grantErr = err
				return
			}
			select {
			case <-sc.actx.Done():
				sc.grantErr = err
				return
			case <-time.After(time.Duration(20+rand.N(30)) * time.Millisecond):
			}
		}
		sc.lease = lease.ID
		sc.expires = time.Now().Add(time.Duration(lease.TTL) * time.Second)
	})
	return sc
}

// scope is the writes of one Update.
type scope struct {
	s        *Store
	deadline time.Time
	ttl      int64
	actx     context.Context // attempts
	acancel  context.CancelFunc
	rctx     context.Context // fencing
	rcancel  context.CancelFunc
	wg       sync.WaitGroup

	granted  chan struct{} // closed when the grant has answered
	lease    int64
	expires  time.Time
	grantErr error

	attempts int
	// leases are the leases of keys put with a TTL, by TTL in seconds,
	// that this scope's attempts share (only those longer than ttl, which
	// no attempt can outlast).
	leases map[int64]int64
}

func (sc *scope) Context() context.Context { return sc.actx }

func (sc *scope) Close() {
	sc.acancel()
	sc.wg.Wait()
	sc.rcancel()
}

// Commit implements store.Scope.
func (sc *scope) Commit(ctx context.Context, conds []store.Cond, ops []store.Op, keys []string) (*store.Snapshot, error) {
	s := sc.s
	if ctx.Err() != nil {
		return nil, types.Wrap(types.Unavailable, errors.New("no time left in the call's budget to write (its last third is kept for checking a write whose answer is lost); nothing was written"), "etcd "+s.endpoint)
	}
	select {
	case <-sc.granted:
	case <-ctx.Done():
		return nil, s.fail(ctx.Err())
	}
	if sc.grantErr != nil {
		return nil, s.fail(sc.grantErr)
	}
	sc.attempts++
	marker := fmt.Sprintf("%s%s%x.%d", s.prefix, markerPrefix, int64(sc.lease), sc.attempts)

	cmps := make([]compare, 0, len(conds)+1)
	for _, c := range conds {
		key := s.prefix + c.Key
		if c.ModRevision == 0 {
			cmps = append(cmps, absent(key))
		} else {
			cmps = append(cmps, modRevisionIs(key, c.ModRevision))
		}
	}
	cmps = append(cmps, absent(marker))
	then := make([]requestOp, 0, len(ops)+1)
	for _, op := range ops {
		key := s.prefix + op.Key
		switch {
		case op.Delete:
			then = append(then, deleteOp(key))
		case op.TTL > 0:
			secs := int64(math.Ceil(op.TTL.Seconds()))
			lease, ok := sc.leases[secs]
			if !ok {
				cctx, cancel := s.bound(ctx)
				granted, err := s.grant(cctx, secs)
				cancel()
				if err != nil {
					return nil, s.fail(err)
				}
				lease = granted.ID
				// A lease that outlives the scope is kept for its next
				// attempts: granting one per attempt would leave one that
				// holds nothing, for its whole TTL (a command's answer:
				// 24 h), after each attempt that did not land.
				if secs > sc.ttl {
					if sc.leases == nil {
						sc.leases = map[int64]int64{}
					}
					sc.leases[secs] = lease
				}
			}
			then = append(then, putOp(key, op.Value, lease))
		default:
			then = append(then, putOp(key, op.Value, 0))
		}
	}
	then = append(then, putOp(marker, []byte(landed), sc.lease))
	var reread []requestOp
	if len(keys) <= MaxTxnOps {
		for _, k := range keys {
			reread = append(reread, getOp(s.prefix+k))
		}
	}
	// The attempt may run to the call's deadline: when the attempts' time
	// is up without its answer, it is fenced while still in flight, and
	// whichever answer comes first tells (etcd orders the two). An attempt
	// merely queued behind a busy etcd then lands instead of being dropped.
	tctx, cancel := s.bound(sc.rctx)
	attempt := make(chan answer, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		resp, err := s.commitTxn(tctx, &txnRequest{Compare: cmps, Success: then, Failure: reread})
		attempt <- answer{resp, err}
	})
	var a answer
	select {
	case a = <-attempt:
	case <-ctx.Done():
		return nil, sc.resolve(marker, ctx.Err(), attempt)
	}
	resp, err := a.resp, a.err
	switch {
	case err == nil && resp.Succeeded:
		return nil, nil
	case err == nil:
		if len(reread) == 0 {
			return nil, store.ErrConflict
		}
		snap := &store.Snapshot{Revision: resp.Header.Revision, Items: make(map[string]store.Item, len(keys))}
		for _, r := range resp.Responses {
			if r.Range == nil {
				continue
			}
			for _, kv := range r.Range.Kvs {
				key := strings.TrimPrefix(string(kv.Key), s.prefix)
				snap.Items[key] = store.Item{Key: key, Value: kv.Value, ModRevision: kv.ModRevision}
			}
		}
		return snap, store.ErrConflict
	case wasNotSent(err) && !tooLargeToSend(err):
		// Nothing left the process: it did not and will not land.
		return nil, types.Wrap(types.Unavailable, fmt.Errorf("%w (never sent): %w", store.ErrNotApplied, s.cause(err)), "etcd "+s.endpoint)
	case is(err, errLeaseNotFound):
		return nil, types.Wrap(types.Unavailable, errors.New("the write reached etcd after its guard lease had expired and was not applied"), "etcd "+s.endpoint)
	case refused(err):
		if big := refusedSize(s.endpoint, err, shapeOf(s.prefix, conds, ops)); big != nil {
			return nil, big
		}
		if is(err, errNoSpace) {
			return nil, sc.noSpace(marker, err)
		}
		return nil, s.fail(err)
	}
	return nil, sc.resolve(marker, err, nil)
}

// noSpace answers an attempt etcd answered NOSPACE. etcd says so of a
// write it refused on arrival, but also of one its applier applied when the
// quota ran out between arrival and apply (quotaApplierV3 applies, then
// answers ErrNoSpace): the answer is final either way, so the attempt's
// marker, read now (a read passes the NOSPACE alarm), says which.
func (sc *scope) noSpace(marker string, err error) error {
	s := sc.s
	ctx, cancel := s.bound(sc.rctx)
	defer cancel()
	resp, rerr := s.readTxn(ctx, []requestOp{getOp(marker)})
	if rerr != nil {
		return sc.resolve(marker, err, nil)
	}
	if kvs := rangeKvs(resp, 0); len(kvs) == 1 && string(kvs[0].Value) == landed {
		return nil
	}
	return types.Wrap(types.ResourceExhausted, fmt.Errorf("etcd's database is full (--quota-backend-bytes, NOSPACE alarm); nothing was written: %w", err), "etcd "+s.endpoint)
}

// answer is what a transaction answered.
type answer struct {
	resp *txnResponse
	err  error
}

// refused reports whether err is an answer of etcd that says the
// transaction was not applied (checked before it was proposed, or refused
// when applied).
func refused(err error) bool {
	return is(err,
		errAuthFailed, errPermissionDenied, errUserEmpty, errInvalidAuthToken, errAuthNotEnabled,
		errTooManyOps, errRequestTooLarge, errDuplicateKey, errEmptyKey, errTooManyRequests, errTooManyRequestsStatus, errNoSpace,
	) || tooLargeToSend(err)
}

// minFenceTry is the least time one fencing transaction is given before
// another is sent (to another member, the client taking turns among them).
const minFenceTry = 250 * time.Millisecond

// resolve finds out whether the attempt that put marker landed, after its
// answer was lost with lost, or is late (then attempt brings it, if it comes
// while fencing): nil when it landed, an error wrapping store.ErrNotApplied
// when it did not, one of class types.OutcomeUnknown when neither the fence
// nor the attempt answered before the call's deadline.
func (sc *scope) resolve(marker string, lost error, attempt <-chan answer) error {
	s := sc.s
	what := s.cause(lost)
	notApplied := func() error {
		return types.Wrap(types.Unavailable, fmt.Errorf("%w (checked): %w", store.ErrNotApplied, what), "etcd "+s.endpoint)
	}
	var last error
	for sc.rctx.Err() == nil {
		try := min(time.Until(sc.deadline), max(time.Until(sc.deadline)/2, minFenceTry))
		tctx, cancel := context.WithTimeout(sc.rctx, try)
		fence := make(chan answer, 1)
		go func() {
			resp, err := s.commitTxn(tctx, &txnRequest{
				Compare: []compare{absent(marker)},
				Success: []requestOp{putOp(marker, []byte(fenced), sc.lease)},
				Failure: []requestOp{getOp(marker)},
			})
			fence <- answer{resp, err}
		}()
		var f answer
		select {
		case f = <-fence:
		case a := <-attempt:
			attempt = nil
			if wasNotSent(a.err) {
				cancel()
				<-fence
				return notApplied()
			}
			if a.err == nil {
				// The attempt's own answer: it landed, or a condition
				// (its marker taken by this fence, or a key changed)
				// kept it out.
				cancel()
				<-fence
				if a.resp.Succeeded {
					return nil
				}
				return notApplied()
			}
			f = <-fence
		}
		cancel()
		switch {
		case f.err == nil && f.resp.Succeeded:
			return notApplied()
		case f.err == nil:
			if kvs := rangeKvs(f.resp, 0); len(kvs) == 1 {
				if string(kvs[0].Value) == landed {
					return nil
				}
				return notApplied()
			}
			last = errors.New("the marker vanished between compare and read")
		case is(f.err, errLeaseNotFound):
			// The lease, and with it the marker, is gone: the attempt can
			// no longer land, but whether it did cannot be told.
			return sc.unknown(what, errors.New("its guard lease expired before it could be checked"))
		default:
			last = s.cause(f.err)
		}
		select {
		case <-sc.rctx.Done():
		case <-time.After(time.Duration(10+rand.N(40)) * time.Millisecond):
		}
	}
	if last == nil {
		last = errors.New("no time was left to check it")
	}
	return sc.unknown(what, last)
}

// unknown is the answer of a write whose outcome could not be resolved.
func (sc *scope) unknown(what, why error) error {
	return types.Wrap(types.OutcomeUnknown, fmt.Errorf("%w; whether the write landed could not be checked within the call's budget (%w); it can land only until its %ds guard lease expires (about %s, later if etcd changes leader meanwhile): read the node before retrying",
		what, why, sc.ttl, sc.expires.UTC().Format(time.RFC3339)), "etcd "+sc.s.endpoint)
}

// rangeKvs is the keys the i-th operation of a transaction read (none when
// it is not a range read, or the answer holds no such operation).
func rangeKvs(resp *txnResponse, i int) []keyValue {
	if i >= len(resp.Responses) || resp.Responses[i].Range == nil {
		return nil
	}
	return resp.Responses[i].Range.Kvs
}

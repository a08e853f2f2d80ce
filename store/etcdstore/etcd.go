// Package etcdstore implements store.Store on an etcd cluster, speaking
// etcd's gRPC protocol over net/http's HTTP/2 (client.go) with messages it
// encodes itself (codec.go): no grpc, clientv3 or protobuf runtime, whose
// initialisation would cost a one-call plugin process more than its call.
// Consistent reads are one read-only transaction, writes are one transaction
// whose compares name the mod revision of every key read, and whose outcome
// is resolved when its answer is lost (see outcome.go), so that a failure
// reported is one that did not and will not land.
package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// Config says how to reach etcd.
type Config struct {
	Endpoints   []string
	Prefix      string // put in front of every key, e.g. "/eru-resources"
	CA          string // file paths for TLS; all empty means plain connections
	Cert        string
	Key         string
	Username    string
	Password    string
	DialTimeout time.Duration
}

// MaxTxnOps is the number of operations one etcd transaction may hold by
// default (--max-txn-ops); larger reads are split, pinned to one revision.
const MaxTxnOps = 128

// Store is a store.Store on etcd.
type Store struct {
	client   *client
	cfg      Config
	prefix   string
	endpoint string // for error messages
	dial     time.Duration
	tls      *tls.Config
}

// Open makes a client of the endpoints; it connects lazily, at the first
// call. With a user name and password it authenticates first, within the
// dial timeout, so that wrong credentials fail here.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	endpoint := strings.Join(cfg.Endpoints, ",")
	switch {
	case cfg.Username != "" && cfg.Password == "":
		return nil, types.Invalid("etcd %s: etcd.auth.password is missing (etcd.auth.username is set)", endpoint)
	case cfg.Username == "" && cfg.Password != "":
		return nil, types.Invalid("etcd %s: etcd.auth.username is missing (etcd.auth.password is set)", endpoint)
	}
	var tlsCfg *tls.Config
	if cfg.CA != "" || cfg.Cert != "" || cfg.Key != "" {
		var err error
		if tlsCfg, err = loadTLS(cfg.CA, cfg.Cert, cfg.Key); err != nil {
			return nil, settingRefused(err)
		}
	}
	c, err := newClient(cfg.Endpoints, tlsCfg, cfg.DialTimeout)
	if err != nil {
		return nil, settingRefused(err)
	}
	c.username, c.password = cfg.Username, cfg.Password
	s := &Store{client: c, cfg: cfg, prefix: strings.TrimSuffix(cfg.Prefix, "/"), endpoint: endpoint, dial: cfg.DialTimeout, tls: tlsCfg}
	if cfg.Username != "" {
		actx, cancel := s.bound(ctx)
		defer cancel()
		if err := c.authenticate(actx); err != nil {
			c.close()
			return nil, s.fail(err)
		}
	}
	return s, nil
}

// bound gives a call made before the connection is up no longer than the
// dial timeout: the client connects lazily and would otherwise wait for a
// dead etcd until the call's own deadline.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.dial <= 0 || s.client.live() {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.dial)
}

// fail classifies an error of a call that wrote nothing (a read, a lease
// grant, a write found not to have landed): see cause.
func (s *Store) fail(err error) error {
	if refused := refusedCredentials(s.endpoint, err); refused != nil {
		return refused
	}
	cause := s.cause(err)
	if refused := refusedCertificate(s.endpoint, cause); refused != nil {
		return refused
	}
	return types.Wrap(types.Unavailable, cause, "etcd "+s.endpoint)
}

// cause says what went wrong with a call. A call that ran out of time before
// the connection came up reports why the endpoint cannot be reached (the
// client itself only says its deadline passed).
func (s *Store) cause(err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return reason(err)
	}
	// Only a deadline says anything about the endpoint: a call its caller
	// cancelled (the daemon's caller went away) may not have had a
	// connection yet, as the client connects at its first call.
	if !s.client.live() && !errors.Is(err, context.Canceled) {
		why := diagnose(s.cfg.Endpoints, s.tls, probeTimeout)
		return fmt.Errorf("unreachable: no connection within %s: %s", s.dial, why)
	}
	return errors.New("no answer in time")
}

// Config is the configuration the store was opened with (the serve
// daemon's watch cache makes its own client of it).
func (s *Store) Config() Config { return s.cfg }

// Close closes the connections.
func (s *Store) Close() error {
	s.client.close()
	return nil
}

// Read implements store.Store: one read-only transaction of point gets and
// prefix ranges; more operations than one transaction may hold are read in
// further transactions pinned to the revision of the first.
func (s *Store) Read(ctx context.Context, keys []string, prefixes []string) (*store.Snapshot, error) {
	ops := s.gets(keys, 0)
	for _, p := range prefixes {
		key, end := s.prefixSpan(p)
		ops = append(ops, requestOp{Range: &rangeRequest{Key: key, RangeEnd: end}})
	}
	snap := &store.Snapshot{Items: make(map[string]store.Item, len(keys))}
	if len(ops) == 0 {
		return snap, nil
	}
	for start := 0; start < len(ops); start += MaxTxnOps {
		chunk := ops[start:min(start+MaxTxnOps, len(ops))]
		if snap.Revision != 0 {
			for _, op := range chunk {
				op.Range.Revision = snap.Revision
			}
		}
		resp, err := s.readTxn(ctx, chunk)
		if err != nil {
			return nil, s.fail(err)
		}
		if snap.Revision == 0 {
			snap.Revision = resp.Header.Revision
		}
		s.collect(snap, resp.Responses)
	}
	return snap, nil
}

// minReadTry is the least time a read sent beside a slow one is given.
const minReadTry = 500 * time.Millisecond

// maxReadSends bounds how many times one read is sent beside a slow one.
const maxReadSends = 6

// minRetryTry is the least time left for which a read that etcd answered
// with an election's error is sent again: such an answer comes at once, and
// so does the next while the election lasts.
const minRetryTry = 100 * time.Millisecond

// retryPause is the pause before the n-th resend (from 0) of a read that
// etcd answered with an election's error, when left is the time the read
// has left: 25 ms doubling to 200 ms, and up to 25 ms at random, so that a
// read keeps trying through an election of a second or two without asking
// more than a few times a second. The pause is cut short so that the
// resend still has minRetryTry; with less than that left, ok is false and
// the read is not sent again. (A full pause that did not fit would give up
// with time to spare: a read of 500 ms through an election of 200 ms would
// fail after 190 ms instead of being answered after 400.)
func retryPause(n int, left time.Duration) (pause time.Duration, ok bool) {
	room := left - minRetryTry
	if room < 0 {
		return 0, false
	}
	return min(min(25*time.Millisecond<<min(n, 3), 200*time.Millisecond)+rand.N(25*time.Millisecond), room), true
}

// transient reports whether err is etcd saying it could not serve a request
// just now (no leader, a leader change, a lost connection): another try,
// maybe on another member, may succeed.
func transient(err error) bool {
	return is(err, errNoLeader, errLeaderChanged, errTimeout, errTimeoutDueToLeaderFail, errTimeoutDueToConnectionLost) ||
		codeOf(err) == codeUnavailable
}

// readTxn runs one read-only transaction. On a live connection, a read that
// gets no answer in half the time left is sent again beside the first (the
// client takes turns among the members), up to three times: a member that is
// stopped, or cut off from its leader, keeps its connections open and never
// answers, while the others can. The first answer wins; a slow one is never
// abandoned for a retry.
func (s *Store) readTxn(ctx context.Context, ops []requestOp) (*txnResponse, error) {
	req := appendTxnRequest(nil, &txnRequest{Success: ops})
	return hedged(s, ctx, func(ctx context.Context) (*txnResponse, error) {
		return s.txn(ctx, req)
	})
}

// hedged sends a read with do as readTxn describes: bounded by the call's
// timeout, sent again beside a slow first one, and sent again after an
// election's answer until too little of its time is left (retryPause).
// A fresh client's read (no connection yet: every read of a process core
// execs once) is bounded by the dial timeout as well, so that a dead etcd
// fails fast, and is not sent beside itself, for each send would open a
// connection of its own; after an election or a lost connection it is
// retried all the same, on the next member in turn. do must be safe to run
// more than once at the same time (a read).
func hedged[T any](s *Store, ctx context.Context, do func(context.Context) (T, error)) (T, error) {
	var none T
	live := s.client.live()
	if !live {
		var cancel context.CancelFunc
		ctx, cancel = s.bound(ctx)
		defer cancel()
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return do(ctx)
	}
	type answer struct {
		resp T
		err  error
	}
	const tries = 3 // sent beside one another
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	answers := make(chan answer, maxReadSends)
	send := func() {
		wg.Go(func() {
			resp, err := do(hctx)
			answers <- answer{resp, err}
		})
	}
	send()
	inFlight, sent, retries := 1, 1, 0
	var last error
	for {
		var hedge <-chan time.Time
		if wait := time.Until(deadline) / 2; live && inFlight < tries && sent < maxReadSends && wait >= minReadTry {
			hedge = time.After(wait)
		}
		select {
		case a := <-answers:
			inFlight--
			if a.err == nil {
				return a.resp, nil
			}
			last = a.err
			if inFlight > 0 {
				continue
			}
			// An election or a lost connection: another try may find the
			// new leader, as long as there is time for one.
			pause, ok := retryPause(retries, time.Until(deadline))
			if !ok || !transient(last) {
				return none, last
			}
			select {
			case <-ctx.Done():
				return none, last
			case <-time.After(pause):
			}
			send()
			inFlight++
			sent++
			retries++
		case <-hedge:
			send()
			inFlight++
			sent++
		}
	}
}

// Txn implements store.Store as one resolved attempt (see Scope). A put
// with a TTL is bound to a fresh lease of that many seconds (rounded up).
func (s *Store) Txn(ctx context.Context, conds []store.Cond, ops []store.Op) error {
	_, err := s.TxnOrRead(ctx, conds, ops, nil)
	return err
}

// TxnOrRead implements store.Rereader: the transaction's else branch reads
// keys, so a conflict comes back with the values that caused it. It is one
// resolved attempt, as Scope's Commit.
func (s *Store) TxnOrRead(ctx context.Context, conds []store.Cond, ops []store.Op, keys []string) (*store.Snapshot, error) {
	sc := s.Scope(ctx)
	defer sc.Close()
	return sc.Commit(sc.Context(), conds, ops, keys)
}

// reason says in plain words what a client error means.
func reason(err error) error {
	switch {
	case is(err, errAuthFailed):
		return errors.New("authentication failed (user name or password wrong)")
	case is(err, errPermissionDenied):
		return errors.New("permission denied")
	case is(err, errUserEmpty):
		return errors.New("etcd requires authentication: no user name and password were given (etcd.auth)")
	}
	return err
}

// is reports whether err is any of targets.
func is(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// settingRefused classes a setting the client refuses: a file the user may
// not read is permission_denied, anything else invalid_argument. The error
// stays a *SettingError, so that a config can name its file.
func settingRefused(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return &types.Error{Class: types.PermissionDenied, Msg: err.Error(), Err: err}
	}
	return &types.Error{Class: types.InvalidArgument, Msg: err.Error(), Err: err}
}

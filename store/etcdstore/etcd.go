// Package etcdstore implements store.Store on an etcd cluster with clientv3:
// consistent reads are one read-only transaction, writes are one transaction
// whose compares name the mod revision of every key read, and whose outcome
// is resolved when its answer is lost (see outcome.go), so that a failure
// reported is one that did not and will not land.
package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/status"

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
	client   *clientv3.Client
	prefix   string
	endpoint string // for error messages
	dial     time.Duration
	tls      *tls.Config
}

// QuietGRPC silences grpc's process-wide logger: grpc would otherwise print
// connection warnings on stderr, which core reads as part of the answer.
// It is a process option: a main calls it first thing, and a test process
// that runs grpc servers too (an in-process etcd) calls it before starting
// them, for grpc's logger may only be set while no grpc code runs.
func QuietGRPC() { grpclog.SetLoggerV2(silentLogger{}) }

// Open connects to etcd and waits until the connection is up or the dial
// timeout has passed, so that a dead etcd fails fast with its address. It
// leaves grpc's process-wide logger as it is: a process whose stderr is an
// answer (a plugin) calls QuietGRPC first.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	endpoint := strings.Join(cfg.Endpoints, ",")
	switch {
	case cfg.Username != "" && cfg.Password == "":
		return nil, types.Invalid("etcd %s: etcd.auth.password is missing (etcd.auth.username is set)", endpoint)
	case cfg.Username == "" && cfg.Password != "":
		return nil, types.Invalid("etcd %s: etcd.auth.username is missing (etcd.auth.password is set)", endpoint)
	}
	ccfg := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		Context:     ctx,
		// A call's transaction and lease grant skip the protobuf
		// runtime's first-use setup (see wireCodec).
		DialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.ForceCodecV2(newWireCodec()))},
	}
	if cfg.CA != "" || cfg.Cert != "" || cfg.Key != "" {
		info := transport.TLSInfo{CertFile: cfg.Cert, KeyFile: cfg.Key, TrustedCAFile: cfg.CA}
		tlsCfg, err := info.ClientConfig()
		if err != nil {
			return nil, types.Wrap(types.InvalidArgument, err, "etcd TLS files")
		}
		ccfg.TLS = tlsCfg
	}
	client, err := clientv3.New(ccfg)
	if err != nil {
		return nil, classify(endpoint, err)
	}
	return &Store{client: client, prefix: strings.TrimSuffix(cfg.Prefix, "/"), endpoint: endpoint, dial: cfg.DialTimeout, tls: ccfg.TLS}, nil
}

// bound gives a call made before the connection is up no longer than the
// dial timeout: the client connects lazily and would otherwise wait for a
// dead etcd until the call's own deadline.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.dial <= 0 || s.client.ActiveConnection().GetState() == connectivity.Ready {
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
	if s.client.ActiveConnection().GetState() != connectivity.Ready {
		why := diagnose(s.client.Endpoints(), s.tls, probeTimeout)
		return fmt.Errorf("unreachable: no connection within %s: %s", s.dial, why)
	}
	return errors.New("no answer in time")
}

// Client is the underlying etcd client (the serve daemon's watch cache
// watches on it).
func (s *Store) Client() *clientv3.Client { return s.client }

// Close closes the connection.
func (s *Store) Close() error { return s.client.Close() }

// Read implements store.Store: one read-only transaction of point gets and
// prefix ranges; more operations than one transaction may hold are read in
// further transactions pinned to the revision of the first.
func (s *Store) Read(ctx context.Context, keys []string, prefixes []string) (*store.Snapshot, error) {
	ops := make([]clientv3.Op, 0, len(keys)+len(prefixes))
	for _, k := range keys {
		ops = append(ops, clientv3.OpGet(s.prefix+k))
	}
	for _, p := range prefixes {
		ops = append(ops, clientv3.OpGet(s.prefix+p, clientv3.WithPrefix()))
	}
	snap := &store.Snapshot{Items: make(map[string]store.Item, len(keys))}
	if len(ops) == 0 {
		return snap, nil
	}
	for start := 0; start < len(ops); start += MaxTxnOps {
		chunk := ops[start:min(start+MaxTxnOps, len(ops))]
		if snap.Revision != 0 {
			for i := range chunk {
				chunk[i] = pin(chunk[i], snap.Revision)
			}
		}
		resp, err := s.readTxn(ctx, chunk)
		if err != nil {
			return nil, s.fail(err)
		}
		if snap.Revision == 0 {
			snap.Revision = resp.Header.Revision
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				key := strings.TrimPrefix(string(kv.Key), s.prefix)
				if strings.HasPrefix(key, markerPrefix) {
					continue // the store's own bookkeeping, not a record
				}
				snap.Items[key] = store.Item{Key: key, Value: kv.Value, ModRevision: kv.ModRevision}
			}
		}
	}
	return snap, nil
}

// minReadTry is the least time one try of a read is given.
const minReadTry = 500 * time.Millisecond

// maxReadSends bounds how many times one read is sent.
const maxReadSends = 6

// transient reports whether err is etcd saying it could not serve a request
// just now (no leader, a leader change, a lost connection): another try,
// maybe on another member, may succeed.
func transient(err error) bool {
	return is(err,
		rpctypes.ErrNoLeader, rpctypes.ErrGRPCNoLeader,
		rpctypes.ErrLeaderChanged, rpctypes.ErrGRPCLeaderChanged,
		rpctypes.ErrTimeout, rpctypes.ErrGRPCTimeout,
		rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrGRPCTimeoutDueToLeaderFail,
		rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrGRPCTimeoutDueToConnectionLost,
	) || status.Code(err) == codes.Unavailable
}

// readTxn runs one read-only transaction. On a live connection, a read that
// gets no answer in half the time left is sent again beside the first (the
// client takes turns among the members), up to three times: a member that is
// stopped, or cut off from its leader, keeps its connections open and never
// answers, while the others can. The first answer wins; a slow one is never
// abandoned for a retry.
func (s *Store) readTxn(ctx context.Context, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	return hedged(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).Then(ops...).Commit()
	})
}

// hedged sends a read with do as readTxn describes: bounded by the call's
// timeout, sent again beside a slow first one, retried after an election.
// do must be safe to run more than once at the same time (a read).
func hedged[T any](s *Store, ctx context.Context, do func(context.Context) (T, error)) (T, error) {
	var none T
	deadline, ok := ctx.Deadline()
	if !ok || s.client.ActiveConnection().GetState() != connectivity.Ready {
		cctx, cancel := s.bound(ctx)
		defer cancel()
		return do(cctx)
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
	inFlight, sent := 1, 1
	var last error
	for {
		var hedge <-chan time.Time
		if wait := time.Until(deadline) / 2; inFlight < tries && sent < maxReadSends && wait >= minReadTry {
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
			// new leader, while there is time for one.
			if !transient(last) || sent >= maxReadSends || time.Until(deadline) < minReadTry {
				return none, last
			}
			select {
			case <-ctx.Done():
				return none, last
			case <-time.After(time.Duration(20+rand.N(30)) * time.Millisecond):
			}
			send()
			inFlight++
			sent++
		case <-hedge:
			send()
			inFlight++
			sent++
		}
	}
}

func pin(op clientv3.Op, rev int64) clientv3.Op {
	opts := []clientv3.OpOption{clientv3.WithRev(rev)}
	if len(op.RangeBytes()) > 0 {
		opts = append(opts, clientv3.WithRange(string(op.RangeBytes())))
	}
	return clientv3.OpGet(string(op.KeyBytes()), opts...)
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

// classify turns a client error into an unavailable error naming the
// endpoint; credentials are never part of it.
func classify(endpoint string, err error) error {
	if refused := refusedCredentials(endpoint, err); refused != nil {
		return refused
	}
	return types.Wrap(types.Unavailable, reason(err), "etcd "+endpoint)
}

// reason says in plain words what a client error means.
func reason(err error) error {
	switch {
	case is(err, rpctypes.ErrAuthFailed, rpctypes.ErrGRPCAuthFailed):
		return errors.New("authentication failed (user name or password wrong)")
	case is(err, rpctypes.ErrPermissionDenied, rpctypes.ErrGRPCPermissionDenied):
		return errors.New("permission denied")
	case is(err, rpctypes.ErrUserEmpty, rpctypes.ErrGRPCUserEmpty):
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

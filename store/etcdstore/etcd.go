// Package etcdstore implements store.Store on an etcd cluster with clientv3:
// consistent reads are one read-only transaction, writes are one transaction
// whose compares name the mod revision of every key read.
package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/grpclog"

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

	guardMu sync.Mutex
	guards  map[time.Time]clientv3.LeaseID // see guardOp
}

var quietGRPC sync.Once

// Open connects to etcd and waits until the connection is up or the dial
// timeout has passed, so that a dead etcd fails fast with its address.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	quietGRPC.Do(func() {
		// grpc would otherwise print connection warnings on stderr, which
		// core reads as part of the answer.
		grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	})
	endpoint := strings.Join(cfg.Endpoints, ",")
	ccfg := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		Context:     ctx,
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

// fail classifies an error of a call. A call that ran out of time before
// the connection came up reports why the endpoint cannot be reached (the
// client itself only says its deadline passed); a write that ran out of
// time says its outcome is unknown, for etcd may still apply it.
func (s *Store) fail(err error, write bool) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return classify(s.endpoint, err)
	}
	if s.client.ActiveConnection().GetState() != connectivity.Ready {
		why := diagnose(s.client.Endpoints(), s.tls, probeTimeout)
		cause := fmt.Errorf("unreachable: no connection within %s: %s", s.dial, why)
		if refused := refusedCertificate(s.endpoint, cause); refused != nil {
			return refused
		}
		return types.Wrap(types.Unavailable, cause, "etcd "+s.endpoint)
	}
	if write {
		return types.Wrap(types.Unavailable, errors.New("no answer in time: the write's outcome is unknown (etcd may still apply it); read the node before retrying"), "etcd "+s.endpoint)
	}
	return types.Wrap(types.Unavailable, errors.New("no answer in time"), "etcd "+s.endpoint)
}

// Client is the underlying etcd client, for tests and tools.
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
		cctx, cancel := s.bound(ctx)
		resp, err := s.client.Txn(cctx).Then(chunk...).Commit()
		cancel()
		if err != nil {
			return nil, s.fail(err, false)
		}
		if snap.Revision == 0 {
			snap.Revision = resp.Header.Revision
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				key := strings.TrimPrefix(string(kv.Key), s.prefix)
				snap.Items[key] = store.Item{Key: key, Value: kv.Value, ModRevision: kv.ModRevision}
			}
		}
	}
	return snap, nil
}

func pin(op clientv3.Op, rev int64) clientv3.Op {
	opts := []clientv3.OpOption{clientv3.WithRev(rev)}
	if len(op.RangeBytes()) > 0 {
		opts = append(opts, clientv3.WithRange(string(op.RangeBytes())))
	}
	return clientv3.OpGet(string(op.KeyBytes()), opts...)
}

// Txn implements store.Store. A put with a TTL is bound to a fresh lease of
// that many seconds (rounded up).
func (s *Store) Txn(ctx context.Context, conds []store.Cond, ops []store.Op) error {
	_, err := s.TxnOrRead(ctx, conds, ops, nil)
	return err
}

// TxnOrRead implements store.Rereader: the transaction's else branch reads
// keys, so a conflict comes back with the values that caused it.
func (s *Store) TxnOrRead(ctx context.Context, conds []store.Cond, ops []store.Op, keys []string) (*store.Snapshot, error) {
	cmps := make([]clientv3.Cmp, 0, len(conds))
	for _, c := range conds {
		key := s.prefix + c.Key
		if c.ModRevision == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", c.ModRevision))
		}
	}
	then := make([]clientv3.Op, 0, len(ops))
	for _, op := range ops {
		key := s.prefix + op.Key
		switch {
		case op.Delete:
			then = append(then, clientv3.OpDelete(key))
		case op.TTL > 0:
			secs := int64(math.Ceil(op.TTL.Seconds()))
			cctx, cancel := s.bound(ctx)
			lease, err := s.client.Grant(cctx, secs)
			cancel()
			if err != nil {
				return nil, s.fail(err, false)
			}
			then = append(then, clientv3.OpPut(key, string(op.Value), clientv3.WithLease(lease.ID)))
		default:
			then = append(then, clientv3.OpPut(key, string(op.Value)))
		}
	}
	if g, ok, err := s.guardOp(ctx); err != nil {
		return nil, err
	} else if ok {
		then = append(then, g)
	}
	var reread []clientv3.Op
	if len(keys) <= MaxTxnOps {
		for _, k := range keys {
			reread = append(reread, clientv3.OpGet(s.prefix+k))
		}
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Txn(cctx).If(cmps...).Then(then...).Else(reread...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound) {
		return nil, types.Wrap(types.Unavailable, errors.New("the write reached etcd after its deadline and was not applied"), "etcd "+s.endpoint)
	}
	if err != nil {
		return nil, s.fail(err, true)
	}
	if resp.Succeeded {
		return nil, nil
	}
	if len(reread) == 0 {
		return nil, store.ErrConflict
	}
	snap := &store.Snapshot{Revision: resp.Header.Revision, Items: make(map[string]store.Item, len(keys))}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			key := strings.TrimPrefix(string(kv.Key), s.prefix)
			snap.Items[key] = store.Item{Key: key, Value: kv.Value, ModRevision: kv.ModRevision}
		}
	}
	return snap, store.ErrConflict
}

// guardOp binds a throwaway key of every write to a lease that expires
// about when the call's deadline passes (etcd counts leases in whole
// seconds and has a minimum). A write held up on the way to etcd past that
// point finds its lease gone and etcd refuses the whole transaction, so a
// write the plugin reported as failed does not land later. One lease
// serves all the attempts of a call.
func (s *Store) guardOp(ctx context.Context) (clientv3.Op, bool, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return clientv3.Op{}, false, nil
	}
	// One lease per deadline, that is per call: the store lives as long as
	// a serve daemon, far past any one call's deadline, and serves calls
	// concurrently.
	s.guardMu.Lock()
	id, ok := s.guards[deadline]
	s.guardMu.Unlock()
	if !ok {
		ttl := max(1, int64(time.Until(deadline)/time.Second))
		cctx, cancel := s.bound(ctx)
		lease, err := s.client.Grant(cctx, ttl)
		cancel()
		if err != nil {
			return clientv3.Op{}, false, s.fail(err, false)
		}
		id = lease.ID
		s.guardMu.Lock()
		now := time.Now()
		for d := range s.guards {
			if d.Before(now) {
				delete(s.guards, d)
			}
		}
		if s.guards == nil {
			s.guards = map[time.Time]clientv3.LeaseID{}
		}
		s.guards[deadline] = id
		s.guardMu.Unlock()
	}
	return clientv3.OpPut(fmt.Sprintf("%s/guards/%x", s.prefix, int64(id)), "", clientv3.WithLease(id)), true, nil
}

// classify turns a client error into an unavailable error naming the
// endpoint; credentials are never part of it.
func classify(endpoint string, err error) error {
	if refused := refusedCredentials(endpoint, err); refused != nil {
		return refused
	}
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrGRPCAuthFailed):
		return types.Wrap(types.Unavailable, errors.New("authentication failed (user name or password wrong)"), "etcd "+endpoint)
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrGRPCPermissionDenied):
		return types.Wrap(types.Unavailable, errors.New("permission denied"), "etcd "+endpoint)
	}
	return types.Wrap(types.Unavailable, err, "etcd "+endpoint)
}

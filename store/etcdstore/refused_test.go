package etcdstore_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

// TestAWriteEtcdRefusesForSpaceIsADefiniteFailure: a write that pushes etcd
// past its --quota-backend-bytes is refused before it is proposed ("mvcc:
// database space exceeded") and the NOSPACE alarm goes up, so that every
// later write, the fence included, is refused the same way. Nothing landed
// or can land: the call must say so at once, not fence until its deadline
// and answer "outcome unknown".
func TestAWriteEtcdRefusesForSpaceIsADefiniteFailure(t *testing.T) {
	t.Parallel() // its own server
	e, err := storetest.StartEtcd(t.TempDir(), func(cfg *embed.Config) { cfg.QuotaBackendBytes = 1 << 20 })
	require.NoError(t, err)
	t.Cleanup(e.Stop)
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: "/space", DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	// 1.2 MiB: within --max-request-bytes (1.5 MiB), above the 1 MiB quota.
	err = s.Txn(ctx, nil, []store.Op{{Key: "/big", Value: bytes.Repeat([]byte("x"), 1200<<10)}})
	took := time.Since(start)
	require.Error(t, err)
	require.Contains(t, err.Error(), "database space exceeded")
	require.NotEqual(t, types.OutcomeUnknown, types.ClassOf(err), "a write etcd refused for space did not land: %v", err)
	require.Less(t, took, time.Second, "refused at once, not fenced to the deadline")
	_, ok, rerr := store.Get(context.Background(), s, "/big")
	require.NoError(t, rerr)
	require.False(t, ok)
}

// TestAnEndpointWithoutAPortIsRefused: an endpoint without a port
// (https://host, or a bare host) would be dialled on port 80, which the
// client does not know as TLS: an https:// endpoint would be spoken to in
// clear text there, the password of Authenticate included. clientv3
// refuses such an address too.
func TestAnEndpointWithoutAPortIsRefused(t *testing.T) {
	for _, endpoint := range []string{"https://127.0.0.1", "http://127.0.0.1", "127.0.0.1", "https://[::1]"} {
		t.Run(endpoint+" is refused before anything is dialled", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			s, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{endpoint}, Prefix: "/p", Username: "eru", Password: "s3cret-pw", DialTimeout: time.Second})
			if s != nil {
				_ = s.Close()
			}
			require.ErrorContains(t, err, fmt.Sprintf("endpoint %q: not host:port, http://host:port or https://host:port", endpoint), "the endpoint as written")
			require.Equal(t, types.InvalidArgument, types.ClassOf(err), "%v", err)
		})
	}
}

// overloaded is an etcd member refusing every transaction as etcd's
// kvServer.Txn does when its applied index lags its committed one by more
// than 5,000 entries: togRPCError(errors.ErrTooManyRequests) is
// rpctypes.ErrTooManyRequests (v3rpc/util.go), an EtcdError that is no
// gRPC status, so grpc sends it as code Unknown. The request was refused
// before it was proposed. Leases are granted.
type overloaded struct {
	pb.UnimplementedKVServer
	pb.UnimplementedLeaseServer
}

func (overloaded) Txn(context.Context, *pb.TxnRequest) (*pb.TxnResponse, error) {
	return nil, rpctypes.ErrTooManyRequests
}

func (overloaded) LeaseGrant(_ context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	return &pb.LeaseGrantResponse{ID: 7, TTL: r.TTL}, nil
}

// TestAWriteAnOverloadedEtcdRefusesIsADefiniteFailure: "too many requests"
// is a refusal before the write was proposed; it is no lost answer to
// fence until the deadline and call unknown.
func TestAWriteAnOverloadedEtcdRefusesIsADefiniteFailure(t *testing.T) {
	t.Parallel() // its own server
	err := writeTo(t, overloaded{})
	require.ErrorContains(t, err, "etcdserver: too many requests")
	require.NotEqual(t, types.OutcomeUnknown, types.ClassOf(err), "refused before it was proposed: %v", err)
}

// fullOnApply is an etcd member answering every write "mvcc: database
// space exceeded". With apply set its quota ran out between a write's check
// on arrival and its apply: etcd's quotaApplierV3 applies the transaction
// and then answers NOSPACE (the same status as a refusal on arrival), and
// raises the NOSPACE alarm. Without it the write is refused on arrival and
// nothing of it is applied. Reads (read-only transactions) are answered
// from what was applied.
type fullOnApply struct {
	pb.UnimplementedKVServer
	pb.UnimplementedLeaseServer
	apply bool
	mu    sync.Mutex
	kvs   map[string][]byte
	rev   int64
}

func (f *fullOnApply) Txn(_ context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := true
	for _, c := range r.Compare {
		_, exists := f.kvs[string(c.Key)]
		if c.Target == pb.Compare_CREATE && c.GetCreateRevision() == 0 && exists {
			ok = false
		}
	}
	ops := r.Success
	if !ok {
		ops = r.Failure
	}
	resp := &pb.TxnResponse{Header: &pb.ResponseHeader{}, Succeeded: ok}
	for _, op := range ops {
		if op.GetRequestPut() != nil && !f.apply {
			return nil, rpctypes.ErrGRPCNoSpace // refused on arrival: nothing applied
		}
	}
	wrote := false
	for _, op := range ops {
		switch {
		case op.GetRequestPut() != nil:
			f.rev++
			f.kvs[string(op.GetRequestPut().Key)] = op.GetRequestPut().Value
			wrote = true
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{}}})
		case op.GetRequestRange() != nil:
			rr := &pb.RangeResponse{}
			if v, ok := f.kvs[string(op.GetRequestRange().Key)]; ok {
				rr.Kvs = []*mvccpb.KeyValue{{Key: op.GetRequestRange().Key, Value: v, ModRevision: f.rev, CreateRevision: f.rev, Version: 1}}
				rr.Count = 1
			}
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rr}})
		}
	}
	resp.Header.Revision = f.rev
	if wrote {
		return nil, rpctypes.ErrGRPCNoSpace // applied all the same
	}
	return resp, nil
}

func (f *fullOnApply) LeaseGrant(_ context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	return &pb.LeaseGrantResponse{ID: 7, TTL: r.TTL}, nil
}

// TestAWriteEtcdAppliedAndAnsweredNoSpaceIsNotReportedFailed: etcd answers
// NOSPACE both for a write it refused on arrival and for one it applied
// when its quota ran out between arrival and apply (quotaApplierV3: the
// transaction is applied, then the error returned). The answer alone does
// not say which; the attempt's marker, read at once, does (RELIABILITY.md,
// "A write refused or unresolved does not land later"): the applied write
// succeeds, the refused one is a definite resource_exhausted, and neither
// is left "outcome unknown".
func TestAWriteEtcdAppliedAndAnsweredNoSpaceIsNotReportedFailed(t *testing.T) {
	t.Parallel() // its own servers
	for _, c := range []struct {
		name  string
		apply bool
		class types.Class // of the call's error; empty: it succeeds
	}{
		{name: "a write etcd applied before answering NOSPACE succeeds, as its marker says it landed", apply: true},
		{name: "a write etcd refused on arrival with NOSPACE fails definitely for space, as its marker is absent", apply: false, class: types.ResourceExhausted},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := &fullOnApply{apply: c.apply, kvs: map[string][]byte{}}
			err := writeTo(t, srv)
			srv.mu.Lock()
			_, landed := srv.kvs["/p/k"]
			srv.mu.Unlock()
			require.Equal(t, c.apply, landed, "the fake applied the write only if told to")
			if c.class == "" {
				require.NoError(t, err, "the write landed, yet the call says: %v", err)
				return
			}
			require.Equal(t, c.class, types.ClassOf(err), "%v", err)
			require.ErrorContains(t, err, "nothing was written")
		})
	}
}

// member is a fake etcd member's KV and Lease services.
type member interface {
	pb.KVServer
	pb.LeaseServer
}

// writeTo serves m on loopback and writes /k under prefix /p through the
// store, within 1.5 s; it returns what the write answered.
func writeTo(t *testing.T, m member) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	pb.RegisterKVServer(gs, m)
	pb.RegisterLeaseServer(gs, m)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{"http://" + l.Addr().String()}, Prefix: "/p", DialTimeout: time.Second})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	return s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("v")}})
}

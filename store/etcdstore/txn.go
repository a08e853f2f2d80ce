package etcdstore

import (
	"context"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// commitTxn sends a conditional transaction as clientv3's
// Txn(ctx).If(…).Then(…).Else(…).Commit() does — on the client's
// connection, so through the same interceptors (auth token, retry policy:
// a transaction is retried only when it was not sent), with the same call
// options and the same error — but on a request built here. clientv3
// copies every compare with proto.Clone, and the protobuf runtime's first
// use builds its reflection of all of etcd's rpc.proto: about 5% of a
// one-write call's CPU (BENCHMARKS.md).
func (s *Store) commitTxn(ctx context.Context, req *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	resp, err := pb.NewKVClient(s.client.ActiveConnection()).Txn(ctx, req, txnCallOptions()...)
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return (*clientv3.TxnResponse)(resp), nil
}

// txnCallOptions are the call options clientv3 gives every call of a client
// configured as Open configures it (its defaults: wait for the connection
// to be ready, a 2 MiB request and an unbounded answer).
func txnCallOptions() []grpc.CallOption {
	return []grpc.CallOption{grpc.WaitForReady(true), grpc.MaxCallSendMsgSize(2 << 20), grpc.MaxCallRecvMsgSize(math.MaxInt32)}
}

// absent is the compare "key does not exist" (its create revision is 0),
// as clientv3.Compare(clientv3.CreateRevision(key), "=", 0) builds it.
func absent(key string) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
		TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}
}

// modRevisionIs is the compare "key was last written at rev", as
// clientv3.Compare(clientv3.ModRevision(key), "=", rev) builds it.
func modRevisionIs(key string, rev int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL,
		TargetUnion: &pb.Compare_ModRevision{ModRevision: rev}}
}

// putOp is clientv3.OpPut(key, value, clientv3.WithLease(lease)) as the
// request it becomes (no lease: clientv3.NoLease).
func putOp(key string, value []byte, lease clientv3.LeaseID) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: value, Lease: int64(lease)}}}
}

// deleteOp is clientv3.OpDelete(key) as the request it becomes.
func deleteOp(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(key)}}}
}

// getOp is clientv3.OpGet(key) as the request it becomes.
func getOp(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte(key)}}}
}

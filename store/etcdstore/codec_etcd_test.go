package etcdstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
)

// recordingCodec is the store's wire codec that also decodes every answer
// with the protobuf runtime, and notes each transaction or lease answer it
// did not read itself or read otherwise than the runtime.
type recordingCodec struct {
	encoding.CodecV2
	mu     sync.Mutex
	seen   map[string]int
	missed []string
}

func (r *recordingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if err := r.CodecV2.Unmarshal(data, v); err != nil {
		return err
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil
	}
	switch v.(type) {
	case *pb.TxnResponse, *pb.LeaseGrantResponse:
	default:
		return nil
	}
	b := data.Materialize()
	want := m.ProtoReflect().New().Interface()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[fmt.Sprintf("%T", v)]++
	switch {
	case proto.Unmarshal(b, want) != nil:
		r.missed = append(r.missed, fmt.Sprintf("%T the runtime cannot read: %x", v, b))
	case !etcdstore.ReadsItself(b, v):
		r.missed = append(r.missed, fmt.Sprintf("%T left to the runtime: %v", v, want))
	case !proto.Equal(want, m):
		r.missed = append(r.missed, fmt.Sprintf("%T read as %v, the runtime reads %v", v, m, want))
	}
	return nil
}

// TestEtcdsAnswersAreReadByTheWireCodec: the answers a real etcd gives to
// the requests the store sends — reads, pinned reads, writes with their
// compares and leased markers, conflicts with their else-branch reads,
// lease grants — are read by the wire codec itself, as the runtime reads
// them, and etcd takes its requests.
func TestEtcdsAnswersAreReadByTheWireCodec(t *testing.T) {
	e := storetest.SharedEtcd(t)
	rec := &recordingCodec{CodecV2: etcdstore.WireCodec(), seen: map[string]int{}}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 2 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rec))}})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := fmt.Sprintf("/wire-%d", time.Now().UnixNano())

	lease, err := c.Grant(ctx, 5)
	require.NoError(t, err)
	defer c.Revoke(context.Background(), lease.ID)
	put, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(p+"/a"), "=", 0)).
		Then(clientv3.OpPut(p+"/a", `{"x":1}`), clientv3.OpPut(p+"/guards/1", "w", clientv3.WithLease(lease.ID))).Commit()
	require.NoError(t, err)
	require.True(t, put.Succeeded, "the write landed")
	read, err := c.Txn(ctx).Then(clientv3.OpGet(p+"/a"), clientv3.OpGet(p+"/", clientv3.WithPrefix()), clientv3.OpGet(p+"/none")).Commit()
	require.NoError(t, err)
	require.Equal(t, `{"x":1}`, string(read.Responses[0].GetResponseRange().Kvs[0].Value))
	require.Len(t, read.Responses[1].GetResponseRange().Kvs, 2)
	require.Empty(t, read.Responses[2].GetResponseRange().Kvs)
	pinned, err := c.Txn(ctx).Then(clientv3.OpGet(p+"/a", clientv3.WithRev(read.Header.Revision))).Commit()
	require.NoError(t, err)
	require.Len(t, pinned.Responses[0].GetResponseRange().Kvs, 1)
	conflict, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(p+"/a"), "=", 0)).
		Then(clientv3.OpPut(p+"/a", "mine")).Else(clientv3.OpGet(p + "/a")).Commit()
	require.NoError(t, err)
	require.False(t, conflict.Succeeded, "the compare failed")
	require.Equal(t, `{"x":1}`, string(conflict.Responses[0].GetResponseRange().Kvs[0].Value))
	del, err := c.Txn(ctx).Then(clientv3.OpDelete(p+"/", clientv3.WithPrefix(), clientv3.WithPrevKV())).Commit()
	require.NoError(t, err)
	require.EqualValues(t, 2, del.Responses[0].GetResponseDeleteRange().Deleted)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Empty(t, rec.missed)
	require.Equal(t, map[string]int{"*etcdserverpb.TxnResponse": 5, "*etcdserverpb.LeaseGrantResponse": 1}, rec.seen)
}

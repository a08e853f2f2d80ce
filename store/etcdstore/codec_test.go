package etcdstore

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func rangeReq(r *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

func putReq(r *pb.PutRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: r}}
}

func header(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: 1<<63 + 5, MemberId: 7, Revision: rev, RaftTerm: 3}
}

// requests are the forms the store sends: reads, pinned reads, writes with
// their compares, markers and else-branch reads, and a lease grant.
var requests = []struct {
	name string
	msg  proto.Message
}{
	{"a read of a key and a prefix", &pb.TxnRequest{Success: []*pb.RequestOp{
		rangeReq(&pb.RangeRequest{Key: []byte("/p/resource/storage/n1")}),
		rangeReq(&pb.RangeRequest{Key: []byte("/p/nodes/"), RangeEnd: []byte("/p/nodes0")}),
	}}},
	{"a read pinned to a revision with every range option", &pb.TxnRequest{Success: []*pb.RequestOp{
		rangeReq(&pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte{0}, Limit: 5, Revision: 1 << 40, SortOrder: pb.RangeRequest_DESCEND,
			SortTarget: pb.RangeRequest_MOD, Serializable: true, KeysOnly: true, CountOnly: true, MinModRevision: 1,
			MaxModRevision: 2, MinCreateRevision: 3, MaxCreateRevision: 4}),
	}}},
	{"a write with compares of every target, a marker and an else-branch read", &pb.TxnRequest{
		Compare: []*pb.Compare{
			{Result: pb.Compare_EQUAL, Target: pb.Compare_MOD, Key: []byte("/p/a"), TargetUnion: &pb.Compare_ModRevision{ModRevision: 0}},
			{Result: pb.Compare_NOT_EQUAL, Target: pb.Compare_MOD, Key: []byte("/p/b"), TargetUnion: &pb.Compare_ModRevision{ModRevision: 42}},
			{Target: pb.Compare_VERSION, Key: []byte("/p/c"), TargetUnion: &pb.Compare_Version{Version: 0}},
			{Result: pb.Compare_GREATER, Target: pb.Compare_CREATE, Key: []byte("/p/d"), TargetUnion: &pb.Compare_CreateRevision{CreateRevision: -1}},
			{Result: pb.Compare_LESS, Target: pb.Compare_VALUE, Key: []byte("/p/e"), TargetUnion: &pb.Compare_Value{}},
			{Target: pb.Compare_LEASE, Key: []byte("/p/f"), TargetUnion: &pb.Compare_Lease{Lease: 9}, RangeEnd: []byte("/p/g")},
			{Key: []byte("/p/h")},
		},
		Success: []*pb.RequestOp{
			putReq(&pb.PutRequest{Key: []byte("/p/a"), Value: []byte(`{"x":1}`)}),
			putReq(&pb.PutRequest{Key: []byte("/p/guards/7.1"), Value: []byte("w"), Lease: 7, PrevKv: true, IgnoreValue: true, IgnoreLease: true}),
			{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("/p/b"), RangeEnd: []byte("/p/c"), PrevKv: true}}},
			{},
		},
		Failure: []*pb.RequestOp{rangeReq(&pb.RangeRequest{Key: []byte("/p/a")})},
	}},
	{"an empty transaction", &pb.TxnRequest{}},
	{"a lease grant", &pb.LeaseGrantRequest{TTL: 5}},
	{"a lease grant with an id", &pb.LeaseGrantRequest{TTL: 5, ID: -3}},
	{"a nested transaction (left to the runtime)", &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{rangeReq(&pb.RangeRequest{Key: []byte("k")})}}}},
	}}},
	{"another message (left to the runtime)", &pb.RangeRequest{Key: []byte("k"), Limit: 1}},
}

// responses are the forms etcd answers with.
var responses = []struct {
	name string
	msg  proto.Message
}{
	{"a read's answer", &pb.TxnResponse{Header: header(12), Succeeded: true, Responses: []*pb.ResponseOp{
		{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Header: header(12), Count: 2, More: true, Kvs: []*mvccpb.KeyValue{
			{Key: []byte("/p/a"), CreateRevision: 2, ModRevision: 11, Version: 4, Value: []byte(`{"x":1}`), Lease: 7},
			{Key: []byte("/p/b"), Value: []byte{}},
		}}}},
		{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Header: header(12)}}},
	}}},
	{"a write's answer", &pb.TxnResponse{Header: header(13), Succeeded: true, Responses: []*pb.ResponseOp{
		{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: header(13), PrevKv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v")}}}},
		{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{Header: header(13), Deleted: 2,
			PrevKvs: []*mvccpb.KeyValue{{Key: []byte("a")}, {Key: []byte("b")}}}}},
		{},
	}}},
	{"a conflict's answer", &pb.TxnResponse{Header: header(14)}},
	{"an empty answer", &pb.TxnResponse{}},
	{"a lease grant's answer", &pb.LeaseGrantResponse{Header: header(15), ID: 1 << 62, TTL: 5}},
	{"a lease grant's refusal", &pb.LeaseGrantResponse{Header: header(15), Error: "lease already exists"}},
	{"a nested transaction's answer (left to the runtime)", &pb.TxnResponse{Responses: []*pb.ResponseOp{
		{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: &pb.TxnResponse{Succeeded: true}}},
	}}},
	{"another message (left to the runtime)", &pb.RangeResponse{Count: 3}},
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestWireCodecWritesWhatTheRuntimeWrites(t *testing.T) {
	c := newWireCodec()
	for _, r := range requests {
		t.Run(r.name+" is encoded byte for byte as the runtime encodes it", func(t *testing.T) {
			got, err := c.Marshal(r.msg)
			require.NoError(t, err)
			require.Equal(t, append([]byte{}, marshal(t, r.msg)...), append([]byte{}, got.Materialize()...))
		})
	}
}

func TestWireCodecReadsWhatTheRuntimeReads(t *testing.T) {
	c := newWireCodec()
	for _, r := range responses {
		wire := marshal(t, r.msg)
		forms := map[string][]byte{"as etcd writes it": wire}
		// Forms the runtime reads its own way: the codec must hand them on.
		forms["with an unknown field"] = protowire.AppendVarint(protowire.AppendTag(bytes.Clone(wire), 99, protowire.VarintType), 1)
		forms["with its header given twice"] = append(bytes.Clone(wire), marshal(t, r.msg)...)
		for form, b := range forms {
			t.Run(r.name+" "+form+" is decoded as the runtime decodes it", func(t *testing.T) {
				want := r.msg.ProtoReflect().New().Interface()
				require.NoError(t, proto.Unmarshal(b, want))
				got := r.msg.ProtoReflect().New().Interface()
				require.NoError(t, c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got))
				require.True(t, proto.Equal(want, got), "got %v\nwant %v", got, want)
			})
		}
	}
	t.Run("bytes that are not a message are refused as the runtime refuses them", func(t *testing.T) {
		b := []byte{0x0a, 0x05, 0x01}
		require.Error(t, proto.Unmarshal(b, &pb.TxnResponse{}))
		require.Error(t, c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &pb.TxnResponse{}))
	})
}

// FuzzWireCodec: whatever the bytes, a transaction or lease answer the wire
// codec decodes is the one the protobuf runtime decodes, and any request
// the runtime can hold is encoded byte for byte as the runtime encodes it.
func FuzzWireCodec(f *testing.F) {
	for _, r := range requests {
		f.Add(marshal(f, r.msg))
	}
	for _, r := range responses {
		f.Add(marshal(f, r.msg))
	}
	c := newWireCodec()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kind := range []func() proto.Message{
			func() proto.Message { return &pb.TxnResponse{} },
			func() proto.Message { return &pb.LeaseGrantResponse{} },
		} {
			got := kind()
			var err error
			switch m := got.(type) {
			case *pb.TxnResponse:
				err = decodeTxnResponse(b, m)
			case *pb.LeaseGrantResponse:
				err = decodeLeaseGrantResponse(b, m)
			}
			if err != nil {
				continue // the runtime decodes these
			}
			want := kind()
			if err := proto.Unmarshal(b, want); err != nil {
				t.Fatalf("%T: the wire codec read %x, the runtime refused it: %v", got, b, err)
			}
			if !proto.Equal(want, got) {
				t.Fatalf("%T of %x: wire codec %v, runtime %v", got, b, got, want)
			}
		}
		for _, m := range []proto.Message{&pb.TxnRequest{}, &pb.LeaseGrantRequest{}} {
			if (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m) != nil {
				continue
			}
			got, err := c.Marshal(m)
			if err != nil {
				t.Fatalf("%T %v: %v", m, m, err)
			}
			if want := marshal(t, m); !bytes.Equal(want, got.Materialize()) {
				t.Fatalf("%T %v: wire codec %x, runtime %x", m, m, got.Materialize(), want)
			}
		}
	})
}

// capturingKV takes the transaction clientv3 would send.
type capturingKV struct {
	pb.KVClient
	got *pb.TxnRequest
}

func (c *capturingKV) Txn(_ context.Context, in *pb.TxnRequest, _ ...grpc.CallOption) (*pb.TxnResponse, error) {
	c.got = in
	return &pb.TxnResponse{}, nil
}

// TestRequestsAreBuiltAsClientv3BuildsThem: the transactions the store
// builds itself for commitTxn are the requests clientv3's builders make of
// the same compares and operations.
func TestRequestsAreBuiltAsClientv3BuildsThem(t *testing.T) {
	clientv3Txn := func(cmps []clientv3.Cmp, then, els []clientv3.Op) *pb.TxnRequest {
		kv := &capturingKV{}
		_, err := clientv3.NewKVFromKVClient(kv, nil).Txn(context.Background()).If(cmps...).Then(then...).Else(els...).Commit()
		require.NoError(t, err)
		return kv.got
	}
	cases := []struct {
		name string
		ours *pb.TxnRequest
		want *pb.TxnRequest
	}{
		{"an attempt: records absent or unchanged, puts, a delete, a leased marker, else-branch reads",
			&pb.TxnRequest{
				Compare: []*pb.Compare{absent("/p/a"), modRevisionIs("/p/b", 42), absent("/p/guards/7.1")},
				Success: []*pb.RequestOp{putOp("/p/a", []byte("v"), clientv3.NoLease), putOp("/p/s", []byte("x"), 9), deleteOp("/p/c"), putOp("/p/guards/7.1", []byte(landed), 7)},
				Failure: []*pb.RequestOp{getOp("/p/a"), getOp("/p/b")},
			},
			clientv3Txn(
				[]clientv3.Cmp{
					clientv3.Compare(clientv3.CreateRevision("/p/a"), "=", 0),
					clientv3.Compare(clientv3.ModRevision("/p/b"), "=", 42),
					clientv3.Compare(clientv3.CreateRevision("/p/guards/7.1"), "=", 0),
				},
				[]clientv3.Op{clientv3.OpPut("/p/a", "v"), clientv3.OpPut("/p/s", "x", clientv3.WithLease(9)), clientv3.OpDelete("/p/c"),
					clientv3.OpPut("/p/guards/7.1", landed, clientv3.WithLease(7))},
				[]clientv3.Op{clientv3.OpGet("/p/a"), clientv3.OpGet("/p/b")},
			)},
		{"a fence: the marker put if still absent, else read",
			&pb.TxnRequest{
				Compare: []*pb.Compare{absent("/p/guards/7.1")},
				Success: []*pb.RequestOp{putOp("/p/guards/7.1", []byte(fenced), 7)},
				Failure: []*pb.RequestOp{getOp("/p/guards/7.1")},
			},
			clientv3Txn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("/p/guards/7.1"), "=", 0)},
				[]clientv3.Op{clientv3.OpPut("/p/guards/7.1", fenced, clientv3.WithLease(7))},
				[]clientv3.Op{clientv3.OpGet("/p/guards/7.1")},
			)},
	}
	for _, c := range cases {
		t.Run(c.name+" is the request clientv3 builds", func(t *testing.T) {
			require.True(t, proto.Equal(c.want, c.ours), "ours %v\nclientv3's %v", c.ours, c.want)
		})
	}
}

package etcdstore

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// txnRequestPB is r as etcd's generated type.
func txnRequestPB(r *txnRequest) *pb.TxnRequest {
	m := &pb.TxnRequest{}
	for _, c := range r.Compare {
		pc := &pb.Compare{Result: pb.Compare_CompareResult(c.Result), Target: pb.Compare_CompareTarget(c.Target), Key: c.Key}
		switch c.Target {
		case targetVersion:
			pc.TargetUnion = &pb.Compare_Version{Version: c.Value}
		case targetCreate:
			pc.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: c.Value}
		case targetMod:
			pc.TargetUnion = &pb.Compare_ModRevision{ModRevision: c.Value}
		}
		m.Compare = append(m.Compare, pc)
	}
	ops := func(in []requestOp) (out []*pb.RequestOp) {
		for _, op := range in {
			switch {
			case op.Range != nil:
				out = append(out, &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{
					Key: op.Range.Key, RangeEnd: op.Range.RangeEnd, Revision: op.Range.Revision, CountOnly: op.Range.CountOnly}}})
			case op.Put != nil:
				out = append(out, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
					Key: op.Put.Key, Value: op.Put.Value, Lease: op.Put.Lease}}})
			case op.Delete != nil:
				out = append(out, &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{
					Key: op.Delete.Key, RangeEnd: op.Delete.RangeEnd}}})
			default:
				out = append(out, &pb.RequestOp{})
			}
		}
		return out
	}
	m.Success, m.Failure = ops(r.Success), ops(r.Failure)
	return m
}

// requests are the forms the store sends: reads, pinned and counting reads,
// writes with their compares, markers and else-branch reads.
var requests = []struct {
	name string
	msg  txnRequest
}{
	{"a read of a key and a prefix", txnRequest{Success: []requestOp{
		getOp("/p/resource/storage/n1"),
		{Range: &rangeRequest{Key: []byte("/p/nodes/"), RangeEnd: []byte("/p/nodes0")}},
	}}},
	{"a read pinned to a revision, and a count", txnRequest{Success: []requestOp{
		{Range: &rangeRequest{Key: []byte("k"), RangeEnd: []byte{0}, Revision: 1 << 40}},
		{Range: &rangeRequest{Key: []byte("k"), RangeEnd: []byte("l"), Revision: 7, CountOnly: true}},
	}}},
	{"a write with compares of every target, a marker and an else-branch read", txnRequest{
		Compare: []compare{
			absent("/p/a"), modRevisionIs("/p/b", 42), modRevisionIs("/p/b", 0),
			{Target: targetVersion, Key: []byte("/p/c")}, {Target: targetCreate, Result: 2, Key: []byte("/p/d"), Value: -1},
		},
		Success: []requestOp{
			putOp("/p/a", []byte(`{"x":1}`), 0), putOp("/p/guards/7.1", []byte("w"), 7), putOp("/p/e", nil, 0),
			deleteOp("/p/b"), {Delete: &deleteRequest{Key: []byte("/p/b"), RangeEnd: []byte("/p/c")}}, {},
		},
		Failure: []requestOp{getOp("/p/a")},
	}},
	{"an empty transaction", txnRequest{}},
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestTheCodecWritesWhatTheRuntimeWrites(t *testing.T) {
	for _, r := range requests {
		t.Run(r.name+" is encoded byte for byte as the runtime encodes it", func(t *testing.T) {
			require.Equal(t, append([]byte{}, marshal(t, txnRequestPB(&r.msg))...), append([]byte{}, appendTxnRequest(nil, &r.msg)...))
		})
	}
	for _, ttl := range []int64{0, 5, 1 << 40} {
		t.Run("a lease grant is encoded byte for byte as the runtime encodes it", func(t *testing.T) {
			require.Equal(t, append([]byte{}, marshal(t, &pb.LeaseGrantRequest{TTL: ttl})...), append([]byte{}, appendLeaseGrantRequest(nil, ttl)...))
		})
	}
	t.Run("an authentication is encoded byte for byte as the runtime encodes it", func(t *testing.T) {
		require.Equal(t, marshal(t, &pb.AuthenticateRequest{Name: "eru", Password: "pässword"}), appendAuthenticateRequest(nil, "eru", "pässword"))
	})
}

func header(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: 1<<63 + 5, MemberId: 7, Revision: rev, RaftTerm: 3}
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
	{"a nested transaction's answer", &pb.TxnResponse{Responses: []*pb.ResponseOp{
		{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: &pb.TxnResponse{Succeeded: true}}},
	}}},
	{"a lease grant's answer", &pb.LeaseGrantResponse{Header: header(15), ID: 1 << 62, TTL: 5}},
	{"a lease grant's refusal", &pb.LeaseGrantResponse{Header: header(15), Error: "lease already exists"}},
}

func methodOf(m proto.Message) string {
	if _, ok := m.(*pb.TxnResponse); ok {
		return "/etcdserverpb.KV/Txn"
	}
	return "/etcdserverpb.Lease/LeaseGrant"
}

func TestTheCodecReadsWhatTheRuntimeReads(t *testing.T) {
	for _, r := range responses {
		wire := marshal(t, r.msg)
		forms := map[string][]byte{
			"as etcd writes it":          wire,
			"with unknown fields":        protowire.AppendFixed64(protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(bytes.Clone(wire), 99, protowire.VarintType), 1), 98, protowire.Fixed64Type), 3),
			"with an unknown message":    protowire.AppendBytes(protowire.AppendTag(bytes.Clone(wire), 97, protowire.BytesType), []byte{1, 2}),
			"given twice (it is merged)": append(bytes.Clone(wire), wire...),
		}
		for form, b := range forms {
			t.Run(r.name+" "+form+" is decoded as the runtime decodes it", func(t *testing.T) {
				require.NoError(t, ReadsAsTheRuntime(methodOf(r.msg), b))
			})
		}
	}
	t.Run("bytes that are not a message are refused as the runtime refuses them", func(t *testing.T) {
		for _, b := range [][]byte{{0x0a, 0x05, 0x01}, {0x08}, {0x00, 0x01}, {0x0b}} {
			require.Error(t, proto.Unmarshal(b, &pb.TxnResponse{}))
			require.Error(t, decodeTxnResponse(b, &txnResponse{}))
		}
	})
	t.Run("groups nested as deep as the runtime reads them are read, and deeper ones refused without running out of stack", func(t *testing.T) {
		nested := func(depth int) []byte {
			var b []byte
			for range depth {
				b = protowire.AppendTag(b, 99, protowire.StartGroupType)
			}
			for range depth {
				b = protowire.AppendTag(b, 99, protowire.EndGroupType)
			}
			return b
		}
		for _, depth := range []int{1, 100, 10001} {
			require.NoError(t, proto.Unmarshal(nested(depth), &pb.TxnResponse{}), depth)
			require.NoError(t, decodeTxnResponse(nested(depth), &txnResponse{}), depth)
		}
		for _, depth := range []int{10002, 1 << 22} {
			require.Error(t, proto.Unmarshal(nested(depth), &pb.TxnResponse{}), depth)
			require.Error(t, decodeTxnResponse(nested(depth), &txnResponse{}), depth)
		}
	})
	t.Run("a lease grant's error that is not UTF-8 is refused as the runtime refuses it", func(t *testing.T) {
		b := protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), []byte{0xff})
		require.Error(t, proto.Unmarshal(b, &pb.LeaseGrantResponse{}))
		require.Error(t, decodeLeaseGrantResponse(b, &leaseGrantResponse{}))
	})
	t.Run("an authentication's token is read", func(t *testing.T) {
		token, err := decodeAuthenticateResponse(marshal(t, &pb.AuthenticateResponse{Header: header(3), Token: "abc.7"}))
		require.NoError(t, err)
		require.Equal(t, "abc.7", token)
	})
}

// FuzzCodec: whatever the bytes, a transaction or lease answer the
// protobuf runtime reads, the codec reads as the runtime does. (The codec
// may read what the runtime refuses: it does not look into the parts of an
// answer it does not keep, a put's answer or a header.)
func FuzzCodec(f *testing.F) {
	for _, r := range responses {
		f.Add(marshal(f, r.msg))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if proto.Unmarshal(b, &pb.TxnResponse{}) == nil {
			if err := ReadsAsTheRuntime("/etcdserverpb.KV/Txn", b); err != nil {
				t.Fatalf("%x: %v", b, err)
			}
		}
		if proto.Unmarshal(b, &pb.LeaseGrantResponse{}) == nil {
			if err := ReadsAsTheRuntime("/etcdserverpb.Lease/LeaseGrant", b); err != nil {
				t.Fatalf("%x: %v", b, err)
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
// builds are, on the wire, the requests clientv3's builders make of the
// same compares and operations.
func TestRequestsAreBuiltAsClientv3BuildsThem(t *testing.T) {
	clientv3Txn := func(cmps []clientv3.Cmp, then, els []clientv3.Op) *pb.TxnRequest {
		kv := &capturingKV{}
		_, err := clientv3.NewKVFromKVClient(kv, nil).Txn(context.Background()).If(cmps...).Then(then...).Else(els...).Commit()
		require.NoError(t, err)
		return kv.got
	}
	cases := []struct {
		name string
		ours txnRequest
		want *pb.TxnRequest
	}{
		{"an attempt: records absent or unchanged, puts, a delete, a leased marker, else-branch reads",
			txnRequest{
				Compare: []compare{absent("/p/a"), modRevisionIs("/p/b", 42), absent("/p/guards/7.1")},
				Success: []requestOp{putOp("/p/a", []byte("v"), 0), putOp("/p/s", []byte("x"), 9), deleteOp("/p/c"), putOp("/p/guards/7.1", []byte(landed), 7)},
				Failure: []requestOp{getOp("/p/a"), getOp("/p/b")},
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
			txnRequest{
				Compare: []compare{absent("/p/guards/7.1")},
				Success: []requestOp{putOp("/p/guards/7.1", []byte(fenced), 7)},
				Failure: []requestOp{getOp("/p/guards/7.1")},
			},
			clientv3Txn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("/p/guards/7.1"), "=", 0)},
				[]clientv3.Op{clientv3.OpPut("/p/guards/7.1", fenced, clientv3.WithLease(7))},
				[]clientv3.Op{clientv3.OpGet("/p/guards/7.1")},
			)},
		{"a read of a key, a prefix and a pinned point",
			txnRequest{Success: []requestOp{
				getOp("/p/a"),
				{Range: &rangeRequest{Key: []byte("/p/n/"), RangeEnd: prefixEnd([]byte("/p/n/"))}},
				{Range: &rangeRequest{Key: []byte("/p/b"), Revision: 9}},
			}},
			clientv3Txn(nil, []clientv3.Op{clientv3.OpGet("/p/a"), clientv3.OpGet("/p/n/", clientv3.WithPrefix()), clientv3.OpGet("/p/b", clientv3.WithRev(9))}, nil)},
	}
	for _, c := range cases {
		t.Run(c.name+" is the request clientv3 builds", func(t *testing.T) {
			var got pb.TxnRequest
			require.NoError(t, proto.Unmarshal(appendTxnRequest(nil, &c.ours), &got))
			require.True(t, proto.Equal(c.want, &got), "ours %v\nclientv3's %v", &got, c.want)
		})
	}
}

func TestPrefixEndIsClientv3s(t *testing.T) {
	for _, key := range []string{"/p/nodes/", "a", "a\xff", "\xff\xff", "", "/x\xff/"} {
		t.Run("the end of "+key+" is clientv3's", func(t *testing.T) {
			require.Equal(t, clientv3.GetPrefixRangeEnd(key), string(prefixEnd([]byte(key))))
		})
	}
}

func TestGRPCTimeout(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1n"}, {-time.Second, "1n"}, {time.Nanosecond, "1n"}, {99999999, "99999999n"}, {100 * time.Millisecond, "100000u"},
		{2 * time.Second, "2000000u"}, {10 * time.Minute, "600000m"}, {30 * 24 * time.Hour, "2592000S"},
	} {
		t.Run(c.d.String()+" is sent as "+c.want, func(t *testing.T) {
			require.Equal(t, c.want, grpcTimeout(c.d))
		})
	}
}

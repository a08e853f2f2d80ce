package etcdstore

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/encoding"
)

// WireCodec is the codec the store's client uses.
func WireCodec() encoding.CodecV2 { return newWireCodec() }

// ReadsItself reports whether the wire codec reads b as v's type without
// handing it to the protobuf runtime.
func ReadsItself(b []byte, v any) bool {
	switch v.(type) {
	case *pb.TxnResponse:
		return decodeTxnResponse(b, &pb.TxnResponse{}) == nil
	case *pb.LeaseGrantResponse:
		return decodeLeaseGrantResponse(b, &pb.LeaseGrantResponse{}) == nil
	}
	return false
}

package etcdstore

import (
	"errors"
	"unicode/utf8"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// wireCodec is grpc's protobuf codec with the messages of a plugin call —
// a transaction and its answer, a lease grant and its answer — encoded and
// decoded by hand on protowire, and every other message (and any form of
// those it does not read exactly: an unknown field, a field given twice)
// left to the protobuf runtime.
//
// Why: the protobuf runtime builds its reflection of a message type on the
// type's first use, and of etcd's rpc.proto, the file every call's messages
// live in, the first use builds the whole file's descriptors. In a process
// that makes one call that was a tenth of a one-node call's CPU
// (BENCHMARKS.md). The bytes are the runtime's own (FuzzWireCodec holds
// the encodings byte for byte to proto.Marshal and the decodings to
// proto.Unmarshal), so etcd sees no difference.
type wireCodec struct{ runtime encoding.CodecV2 }

func newWireCodec() wireCodec { return wireCodec{runtime: encoding.GetCodecV2(grpcproto.Name)} }

// Name is the runtime codec's: the content-subtype etcd is sent is
// unchanged.
func (wireCodec) Name() string { return grpcproto.Name }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	var (
		b  []byte
		ok bool
	)
	switch m := v.(type) {
	case *pb.TxnRequest:
		b, ok = appendTxnRequest(nil, m)
	case *pb.LeaseGrantRequest:
		b, ok = appendLeaseGrantRequest(nil, m), true
	}
	if !ok {
		return c.runtime.Marshal(v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *pb.TxnResponse:
		var got pb.TxnResponse
		if decodeTxnResponse(data.Materialize(), &got) == nil {
			moveTxnResponse(m, &got)
			return nil
		}
	case *pb.LeaseGrantResponse:
		var got pb.LeaseGrantResponse
		if decodeLeaseGrantResponse(data.Materialize(), &got) == nil {
			m.Header, m.ID, m.TTL, m.Error = got.Header, got.ID, got.TTL, got.Error
			return nil
		}
	}
	return c.runtime.Unmarshal(data, v)
}

// moveTxnResponse sets m's fields to got's (a message holds a lock and must
// not be copied whole).
func moveTxnResponse(m, got *pb.TxnResponse) {
	m.Header, m.Succeeded, m.Responses = got.Header, got.Succeeded, got.Responses
}

// Encoding. Fields go out in field-number order, then the oneof, scalars
// and bytes only when not zero, a oneof's member whenever set, as the
// runtime writes them. A message this encoder does not cover (a nested transaction) makes
// the whole request the runtime's.

func appendTxnRequest(b []byte, m *pb.TxnRequest) ([]byte, bool) {
	for _, c := range m.Compare {
		if c == nil {
			return nil, false
		}
		inner, ok := appendCompare(nil, c)
		if !ok {
			return nil, false
		}
		b = appendMessage(b, 1, inner)
	}
	for i, ops := range [][]*pb.RequestOp{m.Success, m.Failure} {
		for _, op := range ops {
			if op == nil {
				return nil, false
			}
			inner, ok := appendRequestOp(nil, op)
			if !ok {
				return nil, false
			}
			b = appendMessage(b, protowire.Number(2+i), inner)
		}
	}
	return b, true
}

func appendCompare(b []byte, c *pb.Compare) ([]byte, bool) {
	b = appendVarint(b, 1, uint64(c.Result))
	b = appendVarint(b, 2, uint64(c.Target))
	b = appendBytes(b, 3, c.Key)
	// The runtime writes a oneof after the other fields.
	b = appendBytes(b, 64, c.RangeEnd)
	switch u := c.TargetUnion.(type) {
	case nil:
	case *pb.Compare_Version:
		b = appendVarintAlways(b, 4, uint64(u.Version))
	case *pb.Compare_CreateRevision:
		b = appendVarintAlways(b, 5, uint64(u.CreateRevision))
	case *pb.Compare_ModRevision:
		b = appendVarintAlways(b, 6, uint64(u.ModRevision))
	case *pb.Compare_Value:
		b = appendMessage(b, 7, u.Value)
	case *pb.Compare_Lease:
		b = appendVarintAlways(b, 8, uint64(u.Lease))
	default:
		return nil, false
	}
	return b, true
}

func appendRequestOp(b []byte, op *pb.RequestOp) ([]byte, bool) {
	switch r := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		if r.RequestRange == nil {
			return nil, false
		}
		return appendMessage(b, 1, appendRangeRequest(nil, r.RequestRange)), true
	case *pb.RequestOp_RequestPut:
		if r.RequestPut == nil {
			return nil, false
		}
		return appendMessage(b, 2, appendPutRequest(nil, r.RequestPut)), true
	case *pb.RequestOp_RequestDeleteRange:
		if r.RequestDeleteRange == nil {
			return nil, false
		}
		return appendMessage(b, 3, appendDeleteRangeRequest(nil, r.RequestDeleteRange)), true
	case nil:
		return b, true
	}
	return nil, false
}

func appendRangeRequest(b []byte, r *pb.RangeRequest) []byte {
	b = appendBytes(b, 1, r.Key)
	b = appendBytes(b, 2, r.RangeEnd)
	b = appendVarint(b, 3, uint64(r.Limit))
	b = appendVarint(b, 4, uint64(r.Revision))
	b = appendVarint(b, 5, uint64(r.SortOrder))
	b = appendVarint(b, 6, uint64(r.SortTarget))
	b = appendBool(b, 7, r.Serializable)
	b = appendBool(b, 8, r.KeysOnly)
	b = appendBool(b, 9, r.CountOnly)
	b = appendVarint(b, 10, uint64(r.MinModRevision))
	b = appendVarint(b, 11, uint64(r.MaxModRevision))
	b = appendVarint(b, 12, uint64(r.MinCreateRevision))
	return appendVarint(b, 13, uint64(r.MaxCreateRevision))
}

func appendPutRequest(b []byte, r *pb.PutRequest) []byte {
	b = appendBytes(b, 1, r.Key)
	b = appendBytes(b, 2, r.Value)
	b = appendVarint(b, 3, uint64(r.Lease))
	b = appendBool(b, 4, r.PrevKv)
	b = appendBool(b, 5, r.IgnoreValue)
	return appendBool(b, 6, r.IgnoreLease)
}

func appendDeleteRangeRequest(b []byte, r *pb.DeleteRangeRequest) []byte {
	b = appendBytes(b, 1, r.Key)
	b = appendBytes(b, 2, r.RangeEnd)
	return appendBool(b, 3, r.PrevKv)
}

func appendLeaseGrantRequest(b []byte, r *pb.LeaseGrantRequest) []byte {
	b = appendVarint(b, 1, uint64(r.TTL))
	return appendVarint(b, 2, uint64(r.ID))
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendVarintAlways(b, num, v)
}

func appendVarintAlways(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return appendVarintAlways(b, num, 1)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return appendMessage(b, num, v)
}

// appendMessage appends a length-delimited field whatever its length (an
// embedded message, a oneof member).
func appendMessage(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// Decoding. Values are read as the runtime reads them (last scalar wins,
// repeated fields append); anything else — an unknown field, a wire type
// the field does not have, an embedded message or oneof given twice (the
// runtime merges those), a string that is not UTF-8 (the runtime refuses
// it) — is errNotExact, and the runtime decodes the message instead. Byte
// fields alias the buffer decoded, which the caller owns.

var errNotExact = errors.New("etcdstore: not a form the wire codec reads")

// field is one field of a message as read off the wire.
type field struct {
	num   protowire.Number
	typ   protowire.Type
	v     uint64 // a varint's value
	bytes []byte // a length-delimited field's contents
}

// eachField calls fn for each field of message b in order.
func eachField(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errNotExact
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			return errNotExact
		}
		if n < 0 {
			return errNotExact
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

func (f field) varint() (uint64, error) {
	if f.typ != protowire.VarintType {
		return 0, errNotExact
	}
	return f.v, nil
}

func (f field) int64() (int64, error) {
	v, err := f.varint()
	return int64(v), err
}

func (f field) bool() (bool, error) {
	v, err := f.varint()
	return v != 0, err
}

func (f field) message() ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, errNotExact
	}
	return f.bytes, nil
}

func decodeTxnResponse(b []byte, m *pb.TxnResponse) error {
	return eachField(b, func(f field) (err error) {
		switch f.num {
		case 1:
			m.Header, err = decodeHeaderOnce(f, m.Header)
		case 2:
			m.Succeeded, err = f.bool()
		case 3:
			var inner []byte
			if inner, err = f.message(); err != nil {
				return err
			}
			op := &pb.ResponseOp{}
			if err = decodeResponseOp(inner, op); err == nil {
				m.Responses = append(m.Responses, op)
			}
		default:
			err = errNotExact
		}
		return err
	})
}

// decodeHeaderOnce reads a response header that must not have been read
// before.
func decodeHeaderOnce(f field, had *pb.ResponseHeader) (*pb.ResponseHeader, error) {
	inner, err := f.message()
	if err != nil || had != nil {
		return nil, errNotExact
	}
	h := &pb.ResponseHeader{}
	return h, eachField(inner, func(f field) (err error) {
		switch f.num {
		case 1:
			h.ClusterId, err = f.varint()
		case 2:
			h.MemberId, err = f.varint()
		case 3:
			h.Revision, err = f.int64()
		case 4:
			h.RaftTerm, err = f.varint()
		default:
			err = errNotExact
		}
		return err
	})
}

func decodeResponseOp(b []byte, op *pb.ResponseOp) error {
	return eachField(b, func(f field) error {
		inner, err := f.message()
		if err != nil || op.Response != nil {
			return errNotExact
		}
		switch f.num {
		case 1:
			r := &pb.RangeResponse{}
			op.Response = &pb.ResponseOp_ResponseRange{ResponseRange: r}
			return decodeRangeResponse(inner, r)
		case 2:
			r := &pb.PutResponse{}
			op.Response = &pb.ResponseOp_ResponsePut{ResponsePut: r}
			return decodePutResponse(inner, r)
		case 3:
			r := &pb.DeleteRangeResponse{}
			op.Response = &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: r}
			return decodeDeleteRangeResponse(inner, r)
		}
		return errNotExact
	})
}

func decodeRangeResponse(b []byte, r *pb.RangeResponse) error {
	return eachField(b, func(f field) (err error) {
		switch f.num {
		case 1:
			r.Header, err = decodeHeaderOnce(f, r.Header)
		case 2:
			var kv *mvccpb.KeyValue
			if kv, err = decodeKeyValue(f); err == nil {
				r.Kvs = append(r.Kvs, kv)
			}
		case 3:
			r.More, err = f.bool()
		case 4:
			r.Count, err = f.int64()
		default:
			err = errNotExact
		}
		return err
	})
}

func decodePutResponse(b []byte, r *pb.PutResponse) error {
	return eachField(b, func(f field) (err error) {
		switch f.num {
		case 1:
			r.Header, err = decodeHeaderOnce(f, r.Header)
		case 2:
			if r.PrevKv != nil {
				return errNotExact
			}
			r.PrevKv, err = decodeKeyValue(f)
		default:
			err = errNotExact
		}
		return err
	})
}

func decodeDeleteRangeResponse(b []byte, r *pb.DeleteRangeResponse) error {
	return eachField(b, func(f field) (err error) {
		switch f.num {
		case 1:
			r.Header, err = decodeHeaderOnce(f, r.Header)
		case 2:
			r.Deleted, err = f.int64()
		case 3:
			var kv *mvccpb.KeyValue
			if kv, err = decodeKeyValue(f); err == nil {
				r.PrevKvs = append(r.PrevKvs, kv)
			}
		default:
			err = errNotExact
		}
		return err
	})
}

func decodeKeyValue(f field) (*mvccpb.KeyValue, error) {
	inner, err := f.message()
	if err != nil {
		return nil, err
	}
	kv := &mvccpb.KeyValue{}
	return kv, eachField(inner, func(f field) (err error) {
		switch f.num {
		case 1:
			kv.Key, err = f.message()
		case 2:
			kv.CreateRevision, err = f.int64()
		case 3:
			kv.ModRevision, err = f.int64()
		case 4:
			kv.Version, err = f.int64()
		case 5:
			kv.Value, err = f.message()
		case 6:
			kv.Lease, err = f.int64()
		default:
			err = errNotExact
		}
		return err
	})
}

func decodeLeaseGrantResponse(b []byte, r *pb.LeaseGrantResponse) error {
	return eachField(b, func(f field) (err error) {
		switch f.num {
		case 1:
			r.Header, err = decodeHeaderOnce(f, r.Header)
		case 2:
			r.ID, err = f.int64()
		case 3:
			r.TTL, err = f.int64()
		case 4:
			var s []byte
			if s, err = f.message(); err == nil {
				if !utf8.Valid(s) {
					return errNotExact
				}
				r.Error = string(s)
			}
		default:
			err = errNotExact
		}
		return err
	})
}

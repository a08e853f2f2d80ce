package etcdstore

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// The messages of etcd's rpc.proto the store sends and reads, as small
// structs of their own, encoded and decoded by hand: a plugin call makes one
// or two calls, and the protobuf runtime (with grpc and clientv3) costs more
// to initialise than the call itself (BENCHMARKS.md). The bytes are the
// runtime's own: codec_test.go holds the encodings byte for byte to
// proto.Marshal of etcd's generated types, and the decodings to
// proto.Unmarshal.

// Compare targets and results (etcdserverpb.Compare).
const (
	compareEqual  = 0
	targetVersion = 0
	targetCreate  = 1
	targetMod     = 2
)

// compare is one compare of a transaction: key's target (version, create or
// mod revision) is, by result, value.
type compare struct {
	Result int32
	Target int32
	Key    []byte
	Value  int64 // the revision or version compared with
}

// rangeRequest is a range read (a point read when RangeEnd is empty).
type rangeRequest struct {
	Key, RangeEnd []byte
	Revision      int64
	CountOnly     bool
}

// putRequest puts Value at Key, bound to Lease when it is not 0.
type putRequest struct {
	Key, Value []byte
	Lease      int64
}

// deleteRequest deletes Key (or the range up to RangeEnd).
type deleteRequest struct {
	Key, RangeEnd []byte
}

// requestOp is one operation of a transaction: exactly one field is set.
type requestOp struct {
	Range  *rangeRequest
	Put    *putRequest
	Delete *deleteRequest
}

// txnRequest is a transaction.
type txnRequest struct {
	Compare          []compare
	Success, Failure []requestOp
}

// responseHeader is the header of every answer.
type responseHeader struct {
	ClusterID, MemberID uint64
	Revision            int64
	RaftTerm            uint64
}

// keyValue is a key as a range reads it.
type keyValue struct {
	Key, Value                           []byte
	CreateRevision, ModRevision, Version int64
	Lease                                int64
}

// rangeResponse is the answer of a range read.
type rangeResponse struct {
	Kvs   []keyValue
	More  bool
	Count int64
}

// responseOp is the answer of one operation: Range is set for a range read
// and nil for a put or a delete (their answers are not used).
type responseOp struct {
	Range *rangeResponse
}

// txnResponse is the answer of a transaction.
type txnResponse struct {
	Header    responseHeader
	Succeeded bool
	Responses []responseOp
}

// leaseGrantResponse is the answer of a lease grant.
type leaseGrantResponse struct {
	ID, TTL int64
	Error   string
}

// Encoding. Fields go out in field-number order, then a oneof, scalars and
// bytes only when not zero, a oneof's member whenever set, as the runtime
// writes them.

// Wire types.
const (
	wireVarint = 0
	wireI64    = 1
	wireBytes  = 2
	wireI32    = 5
)

func appendTag(b []byte, num, typ int) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(typ))
}

func appendVarint(b []byte, num int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendVarintAlways(b, num, v)
}

func appendVarintAlways(b []byte, num int, v uint64) []byte {
	return binary.AppendUvarint(appendTag(b, num, wireVarint), v)
}

func appendBool(b []byte, num int, v bool) []byte {
	if !v {
		return b
	}
	return appendVarintAlways(b, num, 1)
}

func appendBytes(b []byte, num int, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return appendMessage(b, num, v)
}

// appendMessage appends a length-delimited field whatever its length (an
// embedded message, a oneof member).
func appendMessage(b []byte, num int, v []byte) []byte {
	b = binary.AppendUvarint(appendTag(b, num, wireBytes), uint64(len(v)))
	return append(b, v...)
}

func appendTxnRequest(b []byte, m *txnRequest) []byte {
	for i := range m.Compare {
		b = appendMessage(b, 1, appendCompare(nil, &m.Compare[i]))
	}
	for i, ops := range [][]requestOp{m.Success, m.Failure} {
		for j := range ops {
			b = appendMessage(b, 2+i, appendRequestOp(nil, &ops[j]))
		}
	}
	return b
}

func appendCompare(b []byte, c *compare) []byte {
	b = appendVarint(b, 1, uint64(c.Result))
	b = appendVarint(b, 2, uint64(c.Target))
	b = appendBytes(b, 3, c.Key)
	// The target's member of the oneof: version 4, create revision 5, mod
	// revision 6 (value 7 and lease 8 are not used).
	return appendVarintAlways(b, 4+int(c.Target), uint64(c.Value))
}

func appendRequestOp(b []byte, op *requestOp) []byte {
	switch {
	case op.Range != nil:
		r := op.Range
		var in []byte
		in = appendBytes(in, 1, r.Key)
		in = appendBytes(in, 2, r.RangeEnd)
		in = appendVarint(in, 4, uint64(r.Revision))
		in = appendBool(in, 9, r.CountOnly)
		return appendMessage(b, 1, in)
	case op.Put != nil:
		r := op.Put
		var in []byte
		in = appendBytes(in, 1, r.Key)
		in = appendBytes(in, 2, r.Value)
		in = appendVarint(in, 3, uint64(r.Lease))
		return appendMessage(b, 2, in)
	case op.Delete != nil:
		r := op.Delete
		var in []byte
		in = appendBytes(in, 1, r.Key)
		in = appendBytes(in, 2, r.RangeEnd)
		return appendMessage(b, 3, in)
	}
	return b
}

func appendLeaseGrantRequest(b []byte, ttl int64) []byte {
	return appendVarint(b, 1, uint64(ttl))
}

func appendAuthenticateRequest(b []byte, name, password string) []byte {
	b = appendBytes(b, 1, []byte(name))
	return appendBytes(b, 2, []byte(password))
}

// Decoding. Values are read as the runtime reads them: the last of a scalar
// given twice wins, repeated fields append, an embedded message given twice
// is merged; unknown fields, and known ones of another wire type, are
// skipped. Byte fields alias the buffer decoded, which the caller owns.

var errMalformed = errors.New("etcdstore: malformed message")

// Wire types of groups (deprecated, never in etcd's messages, but skipped
// as unknown fields).
const (
	wireStartGroup = 3
	wireEndGroup   = 4
)

// field is one field of a message as read off the wire.
type field struct {
	num   int
	typ   int
	v     uint64 // a varint's value
	bytes []byte // a length-delimited field's contents
}

// maxGroupDepth is how deep groups may nest, as deep as the runtime reads
// them (its recursion limit): deeper ones are refused, not read at the
// cost of the stack.
const maxGroupDepth = 10000

// consumeField reads the field at the start of b and returns it and its
// length.
func consumeField(b []byte) (field, int) {
	return consumeFieldIn(b, maxGroupDepth)
}

// consumeFieldIn is consumeField for a field within groups that may nest
// depth deeper.
func consumeFieldIn(b []byte, depth int) (field, int) {
	tag, n := binary.Uvarint(b)
	if n <= 0 || tag>>3 == 0 || tag>>3 > 1<<29-1 {
		return field{}, -1
	}
	f := field{num: int(tag >> 3), typ: int(tag & 7)}
	rest := b[n:]
	m := -1
	switch f.typ {
	case wireVarint:
		if f.v, m = binary.Uvarint(rest); m == 0 {
			m = -1
		}
	case wireBytes:
		l, k := binary.Uvarint(rest)
		if k > 0 && l <= uint64(len(rest)-k) {
			f.bytes, m = rest[k:k+int(l)], k+int(l)
		}
	case wireI64:
		if len(rest) >= 8 {
			m = 8
		}
	case wireI32:
		if len(rest) >= 4 {
			m = 4
		}
	case wireEndGroup:
		m = 0
	case wireStartGroup:
		for at := 0; depth >= 0 && at < len(rest); {
			g, k := consumeFieldIn(rest[at:], depth-1)
			if k < 0 {
				break
			}
			at += k
			if g.typ == wireEndGroup {
				if g.num == f.num {
					m = at
				}
				break
			}
		}
	}
	if m < 0 {
		return field{}, -1
	}
	return f, n + m
}

// eachField calls fn for each field of message b in order.
func eachField(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		f, n := consumeField(b)
		if n < 0 || f.typ == wireEndGroup {
			return errMalformed
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

func (f field) isVarint() bool  { return f.typ == wireVarint }
func (f field) isMessage() bool { return f.typ == wireBytes }

func decodeTxnResponse(b []byte, m *txnResponse) error {
	return eachField(b, func(f field) error {
		switch {
		case f.num == 1 && f.isMessage():
			return decodeHeader(f.bytes, &m.Header)
		case f.num == 2 && f.isVarint():
			m.Succeeded = f.v != 0
		case f.num == 3 && f.isMessage():
			var op responseOp
			if err := decodeResponseOp(f.bytes, &op); err != nil {
				return err
			}
			m.Responses = append(m.Responses, op)
		}
		return nil
	})
}

func decodeHeader(b []byte, h *responseHeader) error {
	return eachField(b, func(f field) error {
		if !f.isVarint() {
			return nil
		}
		switch f.num {
		case 1:
			h.ClusterID = f.v
		case 2:
			h.MemberID = f.v
		case 3:
			h.Revision = int64(f.v)
		case 4:
			h.RaftTerm = f.v
		}
		return nil
	})
}

// skipMessage checks that b is a well-formed message whose contents are not
// kept (its own embedded messages are not looked into).
func skipMessage(b []byte) error {
	return eachField(b, func(field) error { return nil })
}

func decodeResponseOp(b []byte, op *responseOp) error {
	return eachField(b, func(f field) error {
		if !f.isMessage() {
			return nil
		}
		switch f.num {
		case 1:
			if op.Range == nil {
				op.Range = &rangeResponse{} // a member given twice is merged
			}
			return decodeRangeResponse(f.bytes, op.Range)
		case 2, 3, 4: // a put's, a delete's or a nested transaction's answer
			op.Range = nil
			return skipMessage(f.bytes)
		}
		return nil
	})
}

func decodeRangeResponse(b []byte, r *rangeResponse) error {
	return eachField(b, func(f field) error {
		switch {
		case f.num == 1 && f.isMessage():
			return skipMessage(f.bytes)
		case f.num == 2 && f.isMessage():
			var kv keyValue
			if err := decodeKeyValue(f.bytes, &kv); err != nil {
				return err
			}
			r.Kvs = append(r.Kvs, kv)
		case f.num == 3 && f.isVarint():
			r.More = f.v != 0
		case f.num == 4 && f.isVarint():
			r.Count = int64(f.v)
		}
		return nil
	})
}

func decodeKeyValue(b []byte, kv *keyValue) error {
	return eachField(b, func(f field) error {
		switch {
		case f.num == 1 && f.isMessage():
			kv.Key = f.bytes
		case f.num == 5 && f.isMessage():
			kv.Value = f.bytes
		case !f.isVarint():
		case f.num == 2:
			kv.CreateRevision = int64(f.v)
		case f.num == 3:
			kv.ModRevision = int64(f.v)
		case f.num == 4:
			kv.Version = int64(f.v)
		case f.num == 6:
			kv.Lease = int64(f.v)
		}
		return nil
	})
}

func decodeLeaseGrantResponse(b []byte, r *leaseGrantResponse) error {
	return eachField(b, func(f field) (err error) {
		switch {
		case f.num == 1 && f.isMessage():
			err = skipMessage(f.bytes)
		case f.num == 2 && f.isVarint():
			r.ID = int64(f.v)
		case f.num == 3 && f.isVarint():
			r.TTL = int64(f.v)
		case f.num == 4 && f.isMessage():
			r.Error, err = f.string()
		}
		return err
	})
}

// decodeAuthenticateResponse reads the token of an Authenticate answer.
func decodeAuthenticateResponse(b []byte) (token string, err error) {
	return token, eachField(b, func(f field) (err error) {
		switch {
		case f.num == 1 && f.isMessage():
			err = skipMessage(f.bytes)
		case f.num == 2 && f.isMessage():
			token, err = f.string()
		}
		return err
	})
}

// string reads a proto3 string, which the runtime refuses when it is not
// UTF-8.
func (f field) string() (string, error) {
	if !utf8.Valid(f.bytes) {
		return "", errMalformed
	}
	return string(f.bytes), nil
}

package etcdstore

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// Prefix is the prefix the store puts in front of every key.
func (s *Store) Prefix() string { return s.prefix }

// Exchange is one call the store made: its method, request and answer
// (messages without their gRPC frame; Answer is nil for a failed call).
type Exchange struct {
	Method          string
	Request, Answer []byte
}

// Record makes s note every call it makes; the function returned lists
// them.
func Record(s *Store) func() []Exchange {
	r := &recorder{next: s.client.http.Transport}
	s.client.http.Transport = r
	return func() []Exchange {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]Exchange{}, r.seen...)
	}
}

type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []Exchange
}

// CountSends makes s count the requests it hands its transport: each of
// the store's own sends, whatever the transport then does with it (the
// request is passed on untouched).
func CountSends(s *Store) func() int64 {
	c := &sendCounter{next: s.client.http.Transport}
	s.client.http.Transport = c
	return c.n.Load
}

type sendCounter struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *sendCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(req)
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	ex := Exchange{Method: req.URL.Path, Request: body[5:]}
	if len(answer) >= 5 {
		ex.Answer = answer[5:]
	}
	r.mu.Lock()
	r.seen = append(r.seen, ex)
	r.mu.Unlock()
	return resp, nil
}

// ReadsAsTheRuntime checks that the codec reads answer, the answer of
// method, as the protobuf runtime reads it into etcd's generated type.
func ReadsAsTheRuntime(method string, answer []byte) error {
	switch method {
	case "/etcdserverpb.KV/Txn":
		var want pb.TxnResponse
		if err := proto.Unmarshal(answer, &want); err != nil {
			return fmt.Errorf("the runtime cannot read it: %w", err)
		}
		var got txnResponse
		if err := decodeTxnResponse(answer, &got); err != nil {
			return err
		}
		if w := txnResponseOf(&want); !reflect.DeepEqual(normalTxn(w), normalTxn(&got)) {
			return fmt.Errorf("read as %+v, the runtime reads %+v", got, *w)
		}
	case "/etcdserverpb.Lease/LeaseGrant":
		var want pb.LeaseGrantResponse
		if err := proto.Unmarshal(answer, &want); err != nil {
			return fmt.Errorf("the runtime cannot read it: %w", err)
		}
		var got leaseGrantResponse
		if err := decodeLeaseGrantResponse(answer, &got); err != nil {
			return err
		}
		if got != (leaseGrantResponse{ID: want.ID, TTL: want.TTL, Error: want.Error}) {
			return fmt.Errorf("read as %+v, the runtime reads %v", got, &want)
		}
	default:
		return fmt.Errorf("no check for %s", method)
	}
	return nil
}

// txnResponseOf is what the codec keeps of a transaction's answer.
func txnResponseOf(m *pb.TxnResponse) *txnResponse {
	r := &txnResponse{Succeeded: m.Succeeded}
	if h := m.Header; h != nil {
		r.Header = responseHeader{ClusterID: h.ClusterId, MemberID: h.MemberId, Revision: h.Revision, RaftTerm: h.RaftTerm}
	}
	for _, op := range m.Responses {
		var o responseOp
		if rr := op.GetResponseRange(); rr != nil {
			o.Range = &rangeResponse{More: rr.More, Count: rr.Count}
			for _, kv := range rr.Kvs {
				o.Range.Kvs = append(o.Range.Kvs, keyValue{Key: kv.Key, Value: kv.Value, CreateRevision: kv.CreateRevision,
					ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease})
			}
		}
		r.Responses = append(r.Responses, o)
	}
	return r
}

// normalTxn is r with empty byte slices nil, for comparison.
func normalTxn(r *txnResponse) *txnResponse {
	n := *r
	n.Responses = nil
	for _, op := range r.Responses {
		if op.Range != nil {
			rr := *op.Range
			rr.Kvs = nil
			for _, kv := range op.Range.Kvs {
				if len(kv.Key) == 0 {
					kv.Key = nil
				}
				if len(kv.Value) == 0 {
					kv.Value = nil
				}
				rr.Kvs = append(rr.Kvs, kv)
			}
			op.Range = &rr
		}
		n.Responses = append(n.Responses, op)
	}
	return &n
}

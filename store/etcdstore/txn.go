package etcdstore

import (
	"context"
	"fmt"
)

// txn sends an encoded transaction and decodes its answer.
func (s *Store) txn(ctx context.Context, req []byte) (*txnResponse, error) {
	b, err := s.client.call(ctx, "/etcdserverpb.KV/Txn", req)
	if err != nil {
		return nil, err
	}
	resp := &txnResponse{}
	if err := decodeTxnResponse(b, resp); err != nil {
		return nil, Status{codeInternal, fmt.Sprintf("malformed Txn answer: %v", err)}
	}
	return resp, nil
}

// commitTxn sends a conditional transaction.
func (s *Store) commitTxn(ctx context.Context, req *txnRequest) (*txnResponse, error) {
	return s.txn(ctx, appendTxnRequest(nil, req))
}

// grant asks for a lease of ttl seconds.
func (s *Store) grant(ctx context.Context, ttl int64) (*leaseGrantResponse, error) {
	b, err := s.client.call(ctx, "/etcdserverpb.Lease/LeaseGrant", appendLeaseGrantRequest(nil, ttl))
	if err != nil {
		return nil, err
	}
	resp := &leaseGrantResponse{}
	if err := decodeLeaseGrantResponse(b, resp); err != nil {
		return nil, Status{codeInternal, fmt.Sprintf("malformed LeaseGrant answer: %v", err)}
	}
	return resp, nil
}

// absent is the compare "key does not exist" (its create revision is 0),
// as clientv3.Compare(clientv3.CreateRevision(key), "=", 0) builds it.
func absent(key string) compare {
	return compare{Key: []byte(key), Target: targetCreate, Result: compareEqual, Value: 0}
}

// modRevisionIs is the compare "key was last written at rev", as
// clientv3.Compare(clientv3.ModRevision(key), "=", rev) builds it.
func modRevisionIs(key string, rev int64) compare {
	return compare{Key: []byte(key), Target: targetMod, Result: compareEqual, Value: rev}
}

// putOp is clientv3.OpPut(key, value, clientv3.WithLease(lease)) as the
// request it becomes (no lease: 0).
func putOp(key string, value []byte, lease int64) requestOp {
	return requestOp{Put: &putRequest{Key: []byte(key), Value: value, Lease: lease}}
}

// deleteOp is clientv3.OpDelete(key) as the request it becomes.
func deleteOp(key string) requestOp {
	return requestOp{Delete: &deleteRequest{Key: []byte(key)}}
}

// getOp is clientv3.OpGet(key) as the request it becomes.
func getOp(key string) requestOp {
	return requestOp{Range: &rangeRequest{Key: []byte(key)}}
}

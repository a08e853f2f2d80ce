package etcdstore

import (
	"context"
	"math"
	"strings"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/eru-extend/resources/store"
)

// readAhead is how many pinned transactions of a large read are in flight
// at once.
const readAhead = 4

// pointCost is what etcd spends on a key read by itself, in keys read as
// part of a prefix: a point read is a whole range operation of the
// transaction, on the server and in the client (measured with
// BenchmarkReadNodes: 3,000 point reads cost about what 12,000 keys read
// as prefixes do).
const pointCost = 4

// readCallOpts are clientv3's default call options (wait for the
// connection, no response size limit below gRPC's own).
var readCallOpts = []grpc.CallOption{grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(math.MaxInt32)}

// ReadKeys implements store.KeyReader. The first transaction counts the
// keys under within and reads the first keys, which fixes the revision.
// When the prefixes hold fewer than pointCost times as many keys as asked
// for, they are read whole in one more transaction at that revision;
// otherwise the remaining keys are read in transactions of MaxTxnOps gets
// pinned to the revision, sent side by side rather than one after the
// other. The requests are built as etcd's own messages and sent on the
// client's connection (its interceptors and credentials included):
// clientv3's Op values cost several allocations a key, which a read of
// thousands of keys feels.
func (s *Store) ReadKeys(ctx context.Context, keys []string, within []string) (*store.Snapshot, error) {
	if len(keys)+len(within) <= MaxTxnOps || len(within) >= MaxTxnOps {
		return s.Read(ctx, keys, nil)
	}
	kv := pb.NewKVClient(s.client.ActiveConnection())
	txn := func(ops []*pb.RequestOp) (*pb.TxnResponse, error) {
		cctx, cancel := s.bound(ctx)
		defer cancel()
		resp, err := kv.Txn(cctx, &pb.TxnRequest{Success: ops}, readCallOpts...)
		if err != nil {
			return nil, s.fail(clientv3.ContextError(cctx, err))
		}
		return resp, nil
	}
	// The first transaction: a count of each prefix, then keys.
	counts := make([]*pb.RequestOp, len(within))
	for i, p := range within {
		key, end := s.span(p)
		counts[i] = rangeOp(&pb.RangeRequest{Key: key, RangeEnd: end, CountOnly: true})
	}
	head := MaxTxnOps - len(within)
	first, err := txn(append(counts, s.gets(keys[:head], 0)...))
	if err != nil {
		return nil, err
	}
	rev := first.Header.Revision
	var under int64
	for _, r := range first.Responses[:len(within)] {
		under += r.GetResponseRange().Count
	}
	// What is left to read, each a transaction pinned to rev.
	var txns [][]*pb.RequestOp
	rest := keys[head:]
	if under < pointCost*int64(len(keys)) {
		wholes := make([]*pb.RequestOp, len(within))
		for i, p := range within {
			key, end := s.span(p)
			wholes[i] = rangeOp(&pb.RangeRequest{Key: key, RangeEnd: end, Revision: rev})
		}
		txns = append(txns, wholes)
		rest = outside(rest, within)
	}
	for start := 0; start < len(rest); start += MaxTxnOps {
		txns = append(txns, s.gets(rest[start:min(start+MaxTxnOps, len(rest))], rev))
	}
	got := make([]*pb.TxnResponse, len(txns))
	errs := make([]error, len(txns))
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for range min(readAhead, len(txns)) {
		wg.Go(func() {
			for {
				mu.Lock()
				c := next
				next++
				mu.Unlock()
				if c >= len(txns) {
					return
				}
				if got[c], errs[c] = txn(txns[c]); errs[c] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	got = append(got, first)
	snap := &store.Snapshot{Revision: rev, Items: make(map[string]store.Item, len(keys))}
	for _, resp := range got {
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				key := strings.TrimPrefix(string(kv.Key), s.prefix)
				snap.Items[key] = store.Item{Key: key, Value: kv.Value, ModRevision: kv.ModRevision}
			}
		}
	}
	return snap, nil
}

// gets are point reads of keys at rev (0: the current revision), their
// keys laid out in one buffer.
func (s *Store) gets(keys []string, rev int64) []*pb.RequestOp {
	size := 0
	for _, k := range keys {
		size += len(s.prefix) + len(k)
	}
	buf := make([]byte, 0, size)
	ranges := make([]pb.RangeRequest, len(keys))
	ops := make([]*pb.RequestOp, len(keys))
	for i, k := range keys {
		at := len(buf)
		buf = append(append(buf, s.prefix...), k...)
		ranges[i] = pb.RangeRequest{Key: buf[at:len(buf):len(buf)], Revision: rev}
		ops[i] = rangeOp(&ranges[i])
	}
	return ops
}

// outside are the keys under none of the prefixes.
func outside(keys, prefixes []string) []string {
	var out []string
	for _, k := range keys {
		in := false
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				in = true
				break
			}
		}
		if !in {
			out = append(out, k)
		}
	}
	return out
}

// span is the key range of everything under prefix p.
func (s *Store) span(p string) (key, end []byte) {
	key = []byte(s.prefix + p)
	return key, []byte(clientv3.GetPrefixRangeEnd(string(key)))
}

func rangeOp(r *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

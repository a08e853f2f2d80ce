package etcdstore

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/eru-extend/resources/store"
)

// readAhead is how many pages of a large read are read at once, besides
// the one being handed over: it bounds both the transactions in flight and
// the pages held.
const readAhead = 4

// pageNames is how many names one page of a large read holds: with a
// record, a registration and a session each, about 380 KiB of a cluster's
// keys and values, and 512 names' keys under each prefix.
const pageNames = 512

// pointCost is what etcd spends on a key read by itself, in keys read as
// part of a range: a point read is a whole range operation of the
// transaction, on the server and in the client (measured with
// BenchmarkReadNodes: 3,000 point reads cost about what 12,000 keys read
// as prefixes do).
const pointCost = 4

// ReadNames implements store.NameReader. A read that fits one transaction
// is Read. Otherwise the names are taken in key order, pageNames at a time,
// and the first transaction reads r's keys and prefixes and counts, for
// each page and each prefix of r.Under, the keys between the page's first
// and last name: that fixes the revision every other transaction is pinned
// to. Each page then reads, under each prefix, that span whole when it
// holds fewer than pointCost times as many keys as the page has names
// (the names are dense there, as when a query names most of a cluster or
// a run of it), or else its names key by key. Pages are read readAhead at
// a time and handed over as they arrive, so that only those few are held.
func (s *Store) ReadNames(ctx context.Context, r store.NameRead, head func(*store.Snapshot) error, page func(*store.Snapshot, []int) error) error {
	fixed := len(r.Keys) + len(r.Prefixes)
	if fixed+len(r.Names)*len(r.Under) <= MaxTxnOps || len(r.Under) == 0 {
		return store.ReadNamesAtOnce(ctx, s, r, head, page)
	}
	txn := func(ctx context.Context, ops []requestOp) (*txnResponse, error) {
		// A page is pinned to the first transaction's revision: sending it
		// twice, or again after an election, reads the same.
		resp, err := s.readTxn(ctx, ops)
		if err != nil {
			return nil, s.fail(err)
		}
		return resp, nil
	}
	sorted := store.SortedNames(r.Names)
	pages := make([][]int, 0, (len(sorted)+pageNames-1)/pageNames)
	for start := 0; start < len(sorted); start += pageNames {
		pages = append(pages, sorted[start:min(start+pageNames, len(sorted))])
	}
	span := func(p string, idx []int) (key, end []byte) {
		return []byte(s.prefix + p + r.Names[idx[0]]), []byte(s.prefix + p + r.Names[idx[len(idx)-1]] + "\x00")
	}
	// The first transactions: r's keys and prefixes, then the counts; the
	// first fixes the revision, the others (a read of many thousands of
	// names) are pinned to it.
	ops := s.gets(r.Keys, 0)
	for _, p := range r.Prefixes {
		key, end := s.prefixSpan(p)
		ops = append(ops, rangeOp(&rangeRequest{Key: key, RangeEnd: end}))
	}
	for _, idx := range pages {
		for _, p := range r.Under {
			key, end := span(p, idx)
			ops = append(ops, rangeOp(&rangeRequest{Key: key, RangeEnd: end, CountOnly: true}))
		}
	}
	first, err := txn(ctx, ops[:min(MaxTxnOps, len(ops))])
	if err != nil {
		return err
	}
	rev := first.Header.Revision
	responses := first.Responses
	for start := MaxTxnOps; start < len(ops); start += MaxTxnOps {
		chunk := ops[start:min(start+MaxTxnOps, len(ops))]
		for _, op := range chunk {
			op.Range.Revision = rev
		}
		resp, err := txn(ctx, chunk)
		if err != nil {
			return err
		}
		responses = append(responses, resp.Responses...)
	}
	snap := &store.Snapshot{Revision: rev, Items: map[string]store.Item{}}
	s.collect(snap, responses[:fixed])
	if err := head(snap); err != nil {
		return err
	}
	counts := responses[fixed:]
	// plan is the transactions of page c.
	plan := func(c int) [][]requestOp {
		idx := pages[c]
		var ranges, points []requestOp
		for j, p := range r.Under {
			if countOf(counts[c*len(r.Under)+j]) < pointCost*int64(len(idx)) {
				key, end := span(p, idx)
				ranges = append(ranges, rangeOp(&rangeRequest{Key: key, RangeEnd: end, Revision: rev}))
				continue
			}
			keys := make([]string, len(idx))
			for i, n := range idx {
				keys[i] = p + r.Names[n]
			}
			points = append(points, s.gets(keys, rev)...)
		}
		all := append(ranges, points...)
		var txns [][]requestOp
		for start := 0; start < len(all); start += MaxTxnOps {
			txns = append(txns, all[start:min(start+MaxTxnOps, len(all))])
		}
		return txns
	}
	type read struct {
		c    int
		snap *store.Snapshot
		err  error
	}
	wctx, cancel := context.WithCancel(ctx)
	reads := make(chan read)
	var next atomic.Int64
	var wg sync.WaitGroup
	defer func() {
		cancel() // a reader waiting to hand a page over gives up
		wg.Wait()
	}()
	for range min(readAhead, len(pages)) {
		wg.Go(func() {
			for c := int(next.Add(1) - 1); c < len(pages); c = int(next.Add(1) - 1) {
				got := read{c: c, snap: &store.Snapshot{Revision: rev, Items: make(map[string]store.Item, len(pages[c])*len(r.Under))}}
				for _, ops := range plan(c) {
					resp, err := txn(wctx, ops)
					if err != nil {
						got.err = err
						break
					}
					s.collect(got.snap, resp.Responses)
				}
				select {
				case reads <- got:
				case <-wctx.Done():
					return
				}
				if got.err != nil {
					return
				}
			}
		})
	}
	for range pages {
		// A reader gives up handing its page over when the call's time
		// is up: so does this loop, or it would wait for pages no reader
		// is left to bring.
		var got read
		select {
		case got = <-reads:
		case <-wctx.Done():
			return s.fail(wctx.Err())
		}
		if got.err != nil {
			return got.err
		}
		if err := page(got.snap, pages[got.c]); err != nil {
			return err
		}
	}
	return nil
}

// collect adds the keys of range responses to snap, without the store's
// own bookkeeping.
func (s *Store) collect(snap *store.Snapshot, responses []responseOp) {
	for _, r := range responses {
		if r.Range == nil {
			continue
		}
		for _, kv := range r.Range.Kvs {
			key := strings.TrimPrefix(string(kv.Key), s.prefix)
			if strings.HasPrefix(key, markerPrefix) {
				continue
			}
			snap.Items[key] = store.Item{Key: key, Value: kv.Value, ModRevision: kv.ModRevision}
		}
	}
}

// gets are point reads of keys at rev (0: the current revision), their
// keys laid out in one buffer.
func (s *Store) gets(keys []string, rev int64) []requestOp {
	size := 0
	for _, k := range keys {
		size += len(s.prefix) + len(k)
	}
	buf := make([]byte, 0, size)
	ranges := make([]rangeRequest, len(keys))
	ops := make([]requestOp, len(keys))
	for i, k := range keys {
		at := len(buf)
		buf = append(append(buf, s.prefix...), k...)
		ranges[i] = rangeRequest{Key: buf[at:len(buf):len(buf)], Revision: rev}
		ops[i] = rangeOp(&ranges[i])
	}
	return ops
}

// prefixSpan is the key range of everything under prefix p.
func (s *Store) prefixSpan(p string) (key, end []byte) {
	key = []byte(s.prefix + p)
	return key, prefixEnd(key)
}

// prefixEnd is the end of the range of every key starting with key (as
// clientv3.GetPrefixRangeEnd computes it): key with its last byte below
// 0xff incremented and what follows dropped; "\x00" (every key) when all
// its bytes are 0xff.
func prefixEnd(key []byte) []byte {
	end := append([]byte{}, key...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}

func rangeOp(r *rangeRequest) requestOp { return requestOp{Range: r} }

// countOf is the count a range read answered.
func countOf(r responseOp) int64 {
	if r.Range == nil {
		return 0
	}
	return r.Range.Count
}

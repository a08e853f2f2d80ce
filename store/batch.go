package store

import (
	"context"
	"sort"
)

// NameRead is a read of many names' keys (a node's record, registration
// and session are its name under three prefixes) with a few other keys
// and whole prefixes (settings, pool records), all at one revision.
type NameRead struct {
	// Keys and Prefixes are read once, whole, before any name.
	Keys     []string
	Prefixes []string
	// Names are read under each of Under: the keys p+name. Names are
	// distinct and not empty.
	Names []string
	Under []string
}

// NameReader is a Store that reads a NameRead in pages: etcd sends the
// transactions of a large read side by side, pinned to one revision, and
// hands each page over as it arrives, so that a read of 10,000 nodes never
// holds all their bytes at once.
type NameReader interface {
	// ReadNames reads r at one revision. head gets the snapshot of Keys and
	// Prefixes first; then page gets, one call at a time, snapshots holding
	// the keys of the names at the indices idx of r.Names, until every name
	// has been in one page. A page's snapshot may hold other keys under
	// Under too; it is not kept once page returns. An error from head or
	// page ends the read and is returned as it is.
	ReadNames(ctx context.Context, r NameRead, head func(*Snapshot) error, page func(snap *Snapshot, idx []int) error) error
}

// ReadNames reads r in one consistent snapshot, page by page through the
// store's NameReader when it has one (see NameReader.ReadNames), else as
// one Read handed over as a single page. A query naming nodes reads them
// this way, so that its cost follows the nodes it names rather than the
// size of the cluster, and its memory a page rather than the whole read.
func ReadNames(ctx context.Context, s Store, r NameRead, head func(*Snapshot) error, page func(snap *Snapshot, idx []int) error) error {
	if nr, ok := s.(NameReader); ok {
		return nr.ReadNames(ctx, r, head, page)
	}
	return ReadNamesAtOnce(ctx, s, r, head, page)
}

// ReadNamesAtOnce reads r as one Read, handed over as one page: what
// ReadNames does on a store without pages, and what a NameReader may do
// with a read too small to page.
func ReadNamesAtOnce(ctx context.Context, s Store, r NameRead, head func(*Snapshot) error, page func(snap *Snapshot, idx []int) error) error {
	keys := append([]string(nil), r.Keys...)
	for _, n := range r.Names {
		for _, p := range r.Under {
			keys = append(keys, p+n)
		}
	}
	snap, err := s.Read(ctx, keys, r.Prefixes)
	if err != nil {
		return err
	}
	if err := head(snap); err != nil {
		return err
	}
	if len(r.Names) == 0 {
		return nil
	}
	idx := make([]int, len(r.Names))
	for i := range idx {
		idx[i] = i
	}
	return page(snap, idx)
}

// SortedNames are the indices of names in the order of the names, which
// is the order of their keys under any one prefix.
func SortedNames(names []string) []int {
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return names[idx[a]] < names[idx[b]] })
	return idx
}

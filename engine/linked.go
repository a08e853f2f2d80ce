package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Linked is implemented by a resource whose node writes also read and
// write records of its own besides the node's (storage's pool records,
// docs/pools.md). The engine reads the linked keys in the node's
// transaction, compares on all of them, and writes what Link returns with
// the node's record: one compare-and-swap for everything.
type Linked[N any] interface {
	// LinkedKeys are the keys a write of node from before to after reads
	// besides the node's own keys. It may name keys only the stored record
	// reveals: the engine then reads again with them.
	LinkedKeys(node string, before, after N) []string
	// Link decides the write once the linked keys are read: the record to
	// store (after, or after adjusted) and the linked records to put. An
	// error refuses the whole write.
	Link(l Link, before, after N) (N, map[string][]byte, error)
}

// Link is what a resource's Link may read of the write.
type Link struct {
	Node string
	// Verb is the protocol verb writing (add-node, set-node-resource-usage…).
	Verb string
	// Delta is the request's mode: false for an absolute write (core's
	// rollback replays its before so, as do set-node-resource-info and
	// fix-node-resource).
	Delta    bool
	Isolated bool
	Retired  bool
	Now      time.Time
	// Get reads a linked key (or any key of the transaction).
	Get func(string) ([]byte, bool)
	// Named reports whether the transaction read key (Get of any other
	// key fails the write).
	Named func(key string) bool
	// Scan reads every key under prefix now, outside the transaction: a
	// way to find which records to link, never a read to decide on. Link
	// names the records it found with MoreKeys, and decides on them once
	// the transaction has read them.
	Scan func(prefix string) (map[string][]byte, error)
}

// moreKeys is Link's answer when it needs records the transaction did not
// read.
type moreKeys struct{ keys []string }

func (m *moreKeys) Error() string {
	return fmt.Sprintf("engine: the write needs linked keys it did not read: %q", m.keys)
}

// MoreKeys is what Link returns when it found (by a Scan) records the
// write must read and compare: the engine starts the attempt again with
// them.
func MoreKeys(keys ...string) error { return &moreKeys{keys: keys} }

// errMoreKeys ends a transaction attempt that found linked keys it had not
// read; the write starts again reading them too.
var errMoreKeys = errors.New("engine: the write needs linked keys it did not read")

// missing returns the keys of need that are not in have.
func missing(have, need []string) []string {
	var out []string
	for _, k := range need {
		if !slices.Contains(have, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Remover is implemented by a resource whose records may keep something
// that forbids removing the node (storage's pool objects): CheckRemove
// refuses remove-node, which then writes nothing.
type Remover[N any] interface {
	CheckRemove(n N) error
}

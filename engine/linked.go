package engine

import (
	"errors"
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
}

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

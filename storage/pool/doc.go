// Package pool is the pure core of storage pools: a storage location (a Ceph
// or NFS mount) that several nodes reach, whose objects (volumes) reserve
// bytes against the pool's own capacity whichever node runs the workload.
//
// It holds the stored shapes (the pool record, a node's pool declarations,
// a node's pool objects) with strict codecs, the parsers of declarations and
// bindings, and the decisions the storage verbs take: applying declarations,
// slots and their apportioning among nodes, the admission of a usage write
// with the counter deltas derived from one node's before/after objects,
// attach, isolation, loss, moves, drift checks and capacity changes.
//
// Nothing here reads or writes a store or a file: every function takes
// values and returns values, so the verbs can run them inside one
// compare-and-swap transaction. The copier of moves lives in package move.
package pool

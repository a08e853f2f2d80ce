package pool

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eru-extend/resources/types"
)

// Isolate releases the use right of every object a node holds: the objects
// stay in its record, unheld, and keep reserving (the data is still in the
// pool); another node may attach them. It answers the objects and bytes it
// released; an isolated node's second isolation releases nothing.
func Isolate(objs Objects) (Objects, int, int64) {
	out := objs.Clone()
	var n int
	var bytes int64
	for id, obj := range out {
		if obj.Held {
			obj.Held = false
			out[id] = obj
			n++
			bytes += obj.Bytes
		}
	}
	return out, n, bytes
}

// Member is a node that declares a pool (admitted, not retired) and whether
// its current incarnation is isolated.
type Member struct {
	Node     string
	Isolated bool
}

// LostCounts is what declaring a pool lost reports.
type LostCounts struct {
	LostVolumes       int `json:"lost_volumes"`
	DiscardedCleanups int `json:"discarded_cleanups"`
}

// DeclareLost declares pool rec lost: allowed when every member is
// isolated or there is none (else failed_precondition naming the members
// in the way). lost_at is set, the reservation released, the object count
// zeroed, cleanups discarded, version + 1. nodes are every node record's
// objects; lost_volumes counts the objects living in the pool.
func DeclareLost(rec *Record, members []Member, nodes map[string]Objects, now time.Time) (*Record, LostCounts, error) {
	if rec.Lost() {
		return nil, LostCounts{}, types.Errorf(types.FailedPrecondition, "pool %s was already declared lost at %s", rec.ID, rec.LostAt.UTC().Format(timeFormat))
	}
	var inWay []string
	for _, m := range members {
		if !m.Isolated {
			inWay = append(inWay, m.Node)
		}
	}
	if len(inWay) > 0 {
		slices.Sort(inWay)
		return nil, LostCounts{}, types.Errorf(types.FailedPrecondition, "pool %s still has members that are not isolated: %s", rec.ID, strings.Join(inWay, ", "))
	}
	var counts LostCounts
	for _, objs := range nodes {
		for _, obj := range objs {
			if obj.Pool == rec.ID {
				counts.LostVolumes++
			}
		}
	}
	counts.DiscardedCleanups = len(rec.Cleanups)
	next := rec.Clone()
	at := now.UTC()
	next.LostAt = &at
	next.Reserved, next.Objects, next.Cleanups = 0, 0, nil
	next.Version++
	return next, counts, nil
}

// ObjectState is how an object reads: AVAILABLE, MOVING or LOST.
func ObjectState(obj Object, rec *Record) string {
	switch {
	case rec != nil && rec.Lost():
		return "LOST"
	case obj.MovingTo != "":
		return "MOVING"
	default:
		return "AVAILABLE"
	}
}

// SetCapacity replaces the capacity of pool rec. ifVersion is mandatory
// (nil: invalid_argument) and must be the record's version (else aborted);
// size must be > 0; a lost pool is failed_precondition. Lowering it below
// what is reserved evicts nothing. Setting the capacity it already has
// changes nothing, version included.
func SetCapacity(rec *Record, size int64, ifVersion *int64) (*Record, error) {
	switch {
	case ifVersion == nil:
		return nil, types.Invalid("pool %s: --if-version is mandatory for set-capacity (the pool is at version %d)", rec.ID, rec.Version)
	case size <= 0 || size > types.MaxExact:
		return nil, types.Invalid("pool %s: capacity %d is out of range (1 byte to 8 PiB)", rec.ID, size)
	case rec.Lost():
		return nil, types.Errorf(types.FailedPrecondition, "pool %s was declared lost; its capacity cannot change", rec.ID)
	case *ifVersion != rec.Version:
		return nil, types.Errorf(types.Aborted, "pool %s is at version %d, not %d; read it again", rec.ID, rec.Version, *ifVersion)
	}
	next := rec.Clone()
	if rec.Capacity != nil && *rec.Capacity == size {
		return next, nil
	}
	next.Capacity = &size
	next.Version++
	return next, nil
}

// Drift is one pool's counters against what the node records add up to.
type Drift struct {
	Pool              string `json:"pool"`
	Reserved          int64  `json:"reserved_bytes"`
	Recomputed        int64  `json:"recomputed_bytes"`
	DriftBytes        int64  `json:"drift_bytes"`
	Objects           int64  `json:"object_count"`
	RecomputedObjects int64  `json:"recomputed_objects"`
	// NoRecord marks objects that live in, or move to, a pool without a
	// record.
	NoRecord bool `json:"no_record,omitempty"`
}

// Drifted reports whether the counters disagree with the records.
func (d Drift) Drifted() bool {
	return d.NoRecord || d.DriftBytes != 0 || d.Objects != d.RecomputedObjects
}

// Check recomputes every pool's counters from every node record (one
// consistent read) and answers one line per pool, by id: a lost pool
// recomputes to 0. Objects naming a pool without a record are reported
// with NoRecord.
func Check(pools map[string]*Record, nodes map[string]Objects) []Drift {
	sum := Deltas(nil, slices.Collect(maps.Values(nodes)))
	ids := map[string]bool{}
	for p := range pools {
		ids[p] = true
	}
	for p := range sum {
		ids[p] = true
	}
	var out []Drift
	for _, p := range slices.Sorted(maps.Keys(ids)) {
		d := Drift{Pool: p}
		rec := pools[p]
		if rec == nil {
			d.NoRecord = true
		} else {
			d.Reserved, d.Objects = rec.Reserved, rec.Objects
		}
		if rec == nil || !rec.Lost() {
			d.Recomputed, d.RecomputedObjects = sum[p].Bytes, sum[p].Objects
		}
		d.DriftBytes = d.Reserved - d.Recomputed
		out = append(out, d)
	}
	return out
}

// Repair writes the recomputed counters of a drift line into the pool's
// record (the caller compares that no node record changed since the read
// Check ran on).
func Repair(rec *Record, d Drift) *Record {
	next := rec.Clone()
	next.Reserved, next.Objects = d.Recomputed, d.RecomputedObjects
	return next
}

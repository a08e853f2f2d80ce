package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/eru-extend/resources/types"
)

// KeyPrefix is where pool records live below the store prefix of the
// storage plugin: <prefix>/pools/<id>.
const KeyPrefix = "pools/"

// Key is the key of pool id below the plugin's store prefix.
func Key(id string) string { return KeyPrefix + id }

// Record is the stored pool, at <prefix>/pools/<id>. Its counters move only
// by deltas derived from one node's before/after objects (Admit), by a move's
// transitions, by SetCapacity and by DeclareLost; never by an absolute write.
type Record struct {
	ID string `json:"pool_id"`
	// Capacity is absent (nil) until an operator sets it; a pool without a
	// capacity takes no objects.
	Capacity *int64 `json:"capacity_bytes,omitempty"`
	// Reserved is the sum of the bytes of every object living in the pool
	// plus every object moving into it. It may exceed Capacity after the
	// capacity was lowered.
	Reserved int64 `json:"reserved_bytes"`
	// Version advances only when the capacity changes or the pool is
	// declared lost.
	Version int64 `json:"version"`
	// Objects counts the objects living in the pool (moving-in ones not
	// included).
	Objects int64 `json:"object_count"`
	// CleanupCount is len(Cleanups), kept in the record so that a reader of
	// the JSON sees it without the list.
	CleanupCount int64      `json:"cleanup_count"`
	DeclaredAt   time.Time  `json:"declared_at"`
	LostAt       *time.Time `json:"lost_at"`
	// Cleanups are copies the pool still keeps of objects that no longer
	// live there: a move's source, an aborted move's target. They take space
	// in the pool but reserve nothing.
	Cleanups []Cleanup `json:"cleanups,omitempty"`
}

// Cleanup is one copy waiting to be removed from a pool.
type Cleanup struct {
	Object string `json:"object_id"`
	// Reason is CleanupMoved (the source a settled move left) or
	// CleanupAborted (the target copy of an aborted move).
	Reason    string    `json:"reason"`
	CommandID string    `json:"command_id,omitempty"`
	Bytes     int64     `json:"bytes"`
	Since     time.Time `json:"since"`
}

// The reasons of a cleanup entry.
const (
	CleanupMoved   = "moved"
	CleanupAborted = "aborted"
)

// NewRecord is the record the first declaration of a pool creates: version
// 0, no capacity, nothing reserved.
func NewRecord(id string, now time.Time) *Record {
	return &Record{ID: id, DeclaredAt: now.UTC()}
}

// Lost reports whether the pool was declared lost.
func (r *Record) Lost() bool { return r.LostAt != nil }

// Free is what the pool still takes: capacity − reserved, 0 when the
// capacity is unset, the pool is lost, or it is over capacity.
func (r *Record) Free() int64 {
	if r.Capacity == nil || r.Lost() || r.Reserved >= *r.Capacity {
		return 0
	}
	return *r.Capacity - r.Reserved
}

// Clone returns a deep copy.
func (r *Record) Clone() *Record {
	c := *r
	if r.Capacity != nil {
		v := *r.Capacity
		c.Capacity = &v
	}
	if r.LostAt != nil {
		v := *r.LostAt
		c.LostAt = &v
	}
	c.Cleanups = append([]Cleanup(nil), r.Cleanups...)
	return &c
}

// Validate checks the record's invariants.
func (r *Record) Validate() error {
	if err := ValidID(r.ID); err != nil {
		return err
	}
	if r.Capacity != nil && (*r.Capacity <= 0 || *r.Capacity > types.MaxExact) {
		return types.Invalid("pool %s: capacity_bytes %d is out of range (1 to 2^53)", r.ID, *r.Capacity)
	}
	for name, v := range map[string]int64{"reserved_bytes": r.Reserved, "version": r.Version, "object_count": r.Objects} {
		if v < 0 || v > types.MaxExact {
			return types.Invalid("pool %s: %s %d is out of range (0 to 2^53)", r.ID, name, v)
		}
	}
	if r.CleanupCount != int64(len(r.Cleanups)) {
		return types.Invalid("pool %s: cleanup_count %d but %d cleanup entries", r.ID, r.CleanupCount, len(r.Cleanups))
	}
	if r.DeclaredAt.IsZero() {
		return types.Invalid("pool %s: declared_at is missing", r.ID)
	}
	if r.Lost() && r.Reserved != 0 {
		return types.Invalid("pool %s: lost but reserves %d bytes", r.ID, r.Reserved)
	}
	for _, c := range r.Cleanups {
		if err := ValidObjectID(c.Object); err != nil {
			return types.Invalid("pool %s: cleanup: %v", r.ID, err)
		}
		if c.Reason != CleanupMoved && c.Reason != CleanupAborted {
			return types.Invalid("pool %s: cleanup of %s: unknown reason %q", r.ID, c.Object, c.Reason)
		}
	}
	return nil
}

// Encode writes the record as stored, cleanup_count brought in line with
// the entries.
func (r *Record) Encode() ([]byte, error) {
	c := r.Clone()
	c.CleanupCount = int64(len(c.Cleanups))
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(c)
}

// DecodeRecord reads a stored pool record strictly: unknown fields,
// trailing data and broken invariants are refused.
func DecodeRecord(data []byte) (*Record, error) {
	r := &Record{}
	if err := decodeStrict(data, r); err != nil {
		return nil, types.Invalid("stored pool record: %v", err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeStrict reads exactly one JSON value into v, refusing unknown
// fields and anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

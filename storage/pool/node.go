package pool

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/eru-extend/resources/types"
)

// Declaration is one pool a node declares: where the pool is mounted on it.
type Declaration struct {
	Path string `json:"path"`
}

// Declarations are the pools of a node, stored in its capacity next to
// volumes and disks: "pools": {"ceph-a": {"path": "/mnt/ceph-a"}},
// "default_pool": "ceph-a". Pool bytes are not part of the node's flat
// storage budget.
type Declarations struct {
	Pools map[string]Declaration `json:"pools,omitempty"`
	// DefaultPool is the pool a binding without a pool goes to. Empty means
	// the only declared pool, when there is exactly one (see Default).
	DefaultPool string `json:"default_pool,omitempty"`
}

// Default is the node's effective default pool: the one named, else the
// only one declared, else "".
func (d Declarations) Default() string {
	if d.DefaultPool != "" {
		return d.DefaultPool
	}
	if len(d.Pools) == 1 {
		for id := range d.Pools {
			return id
		}
	}
	return ""
}

// IDs are the declared pool ids in order.
func (d Declarations) IDs() []string { return slices.Sorted(maps.Keys(d.Pools)) }

// Clone returns a deep copy.
func (d Declarations) Clone() Declarations {
	return Declarations{Pools: maps.Clone(d.Pools), DefaultPool: d.DefaultPool}
}

// Validate checks ids, paths and the default.
func (d Declarations) Validate() error {
	for _, id := range d.IDs() {
		if err := ValidID(id); err != nil {
			return err
		}
		if err := ValidPath(d.Pools[id].Path); err != nil {
			return types.Invalid("pool %s: %v", id, err)
		}
	}
	if d.DefaultPool != "" {
		if _, ok := d.Pools[d.DefaultPool]; !ok {
			return types.Invalid("default pool %q is not one of the declared pools", d.DefaultPool)
		}
	}
	return nil
}

// Apart checks that every pool of the node has a place of its own: no two
// pools at one path, and no pool's path inside another's. A pool's copy of
// an object is <path>/<object>; two pools sharing a place would share that
// copy, and a move between them, or removing one pool's copy, would remove
// the other's data. It is checked when a request declares pools, not on
// stored declarations (a record written before the check still decodes).
func (d Declarations) Apart() error {
	ids := d.IDs()
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			pa, pb := d.Pools[a].Path, d.Pools[b].Path
			switch {
			case pa == pb:
				return types.Invalid("pools %s and %s are both declared at %s; each pool needs a path of its own", a, b, pa)
			case Within(pb, pa):
				return types.Invalid("pool %s's path %s is inside pool %s's path %s; each pool needs a path of its own", b, pb, a, pa)
			case Within(pa, pb):
				return types.Invalid("pool %s's path %s is inside pool %s's path %s; each pool needs a path of its own", a, pa, b, pb)
			}
		}
	}
	return nil
}

// Within reports whether the clean absolute path p lies below dir.
func Within(p, dir string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// DecodeDeclarations reads the stored declarations strictly from the raw
// members "pools" and "default_pool" of a node's capacity (either may be
// absent).
func DecodeDeclarations(pools, defaultPool json.RawMessage) (Declarations, error) {
	var d Declarations
	if !types.IsNull(pools) {
		if err := decodeStrict(pools, &d.Pools); err != nil {
			return Declarations{}, types.Invalid("stored pool declarations: %v", err)
		}
	}
	if !types.IsNull(defaultPool) {
		if err := decodeStrict(defaultPool, &d.DefaultPool); err != nil {
			return Declarations{}, types.Invalid("stored default_pool: %v", err)
		}
	}
	if err := d.Validate(); err != nil {
		return Declarations{}, err
	}
	return d, nil
}

// Object is one pool object as a node's usage records it, under its id:
// "pool_objects": {"v-0123456789abcdef": {"pool": "ceph-a", "bytes": N,
// "held": true}}.
type Object struct {
	Pool  string `json:"pool"`
	Bytes int64  `json:"bytes"`
	// Held is true while this node holds the object's use right; isolation
	// clears it (the object still reserves: the data is in the pool).
	Held bool `json:"held"`
	// MovingTo is the pool a move copies the object to, where it reserves
	// its bytes too until the move settles; MoveCommandID is that move's
	// command id. Both empty while no move is in progress.
	MovingTo      string `json:"moving_to,omitempty"`
	MoveCommandID string `json:"move_command_id,omitempty"`
	// AttachedFrom is the node whose record the object was attached from
	// (a failover): an absolute restore of this node that drops the object
	// (core rolling the attaching deploy back) gives it back to that node,
	// unheld, instead of deleting it. Empty for an object created here.
	AttachedFrom string `json:"attached_from,omitempty"`
}

// Objects are a node's pool objects by id.
type Objects map[string]Object

// Clone returns a copy.
func (o Objects) Clone() Objects {
	c := make(Objects, len(o))
	maps.Copy(c, o)
	return c
}

// IDs are the object ids in order.
func (o Objects) IDs() []string { return slices.Sorted(maps.Keys(o)) }

// CountByPool counts the objects living in each pool.
func (o Objects) CountByPool() map[string]int {
	n := map[string]int{}
	for _, obj := range o {
		n[obj.Pool]++
	}
	return n
}

// MovingInto names the first object (by id) a move is copying into pool id.
func (o Objects) MovingInto(id string) (string, bool) {
	for _, obj := range o.IDs() {
		if o[obj].MovingTo == id {
			return obj, true
		}
	}
	return "", false
}

// HeldBytes sums the bytes of the objects this node holds, per pool (the
// storage_pool_held_bytes metric).
func (o Objects) HeldBytes() map[string]int64 {
	n := map[string]int64{}
	for _, obj := range o {
		if obj.Held {
			n[obj.Pool] += obj.Bytes
		}
	}
	return n
}

// Validate checks every object.
func (o Objects) Validate() error {
	for _, id := range o.IDs() {
		obj := o[id]
		if err := ValidObjectID(id); err != nil {
			return err
		}
		if err := ValidID(obj.Pool); err != nil {
			return types.Invalid("object %s: %v", id, err)
		}
		if obj.Bytes <= 0 || obj.Bytes > types.MaxExact {
			return types.Invalid("object %s: bytes %d is out of range (1 to 2^53)", id, obj.Bytes)
		}
		if (obj.MovingTo == "") != (obj.MoveCommandID == "") {
			return types.Invalid("object %s: moving_to and move_command_id go together", id)
		}
		if obj.MovingTo != "" {
			if err := ValidID(obj.MovingTo); err != nil {
				return types.Invalid("object %s: moving_to: %v", id, err)
			}
			if obj.MovingTo == obj.Pool {
				return types.Invalid("object %s: moving to the pool it lives in", id)
			}
		}
	}
	return nil
}

// DecodeObjects reads a node's stored pool objects strictly (the raw
// member "pool_objects" of its usage; absent or null is none).
func DecodeObjects(raw json.RawMessage) (Objects, error) {
	o := Objects{}
	if !types.IsNull(raw) {
		if err := decodeStrict(raw, &o); err != nil {
			return nil, types.Invalid("stored pool objects: %v", err)
		}
	}
	if o == nil {
		o = Objects{}
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// PathCheck is what a heartbeat found at one declared pool path, kept in
// the node's observation: "pools": {"ceph-a": {"available": false,
// "reason": "/mnt/ceph-a is not a mount point"}}.
type PathCheck struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}

// Attachment is one (node, pool) pair as `storage pools get` prints it.
type Attachment struct {
	Node        string `json:"node_id"`
	Path        string `json:"path"`
	DefaultPool bool   `json:"default_pool"`
	Available   bool   `json:"available"`
	Reason      string `json:"reason,omitempty"`
	Held        int    `json:"held_object_count"`
}

// ReasonLost is the reason of an attachment to a lost pool.
const ReasonLost = "lost"

// AttachmentOf describes the attachment of a node that declares pool rec.ID
// (rec nil: no record yet). check is the node's last heartbeat check of
// the path, nil when the node never heartbeat (available). A lost pool is
// never available.
func AttachmentOf(node string, rec *Record, d Declarations, check *PathCheck, objs Objects) (Attachment, bool) {
	id := ""
	if rec != nil {
		id = rec.ID
	}
	decl, ok := d.Pools[id]
	if !ok {
		return Attachment{}, false
	}
	a := Attachment{Node: node, Path: decl.Path, DefaultPool: d.Default() == id, Available: true}
	switch {
	case rec.Lost():
		a.Available, a.Reason = false, ReasonLost
	case check != nil && !check.Available:
		a.Available, a.Reason = false, check.Reason
	}
	for _, obj := range objs {
		if obj.Pool == id && obj.Held {
			a.Held++
		}
	}
	return a, true
}

// View is a pool as `storage pools get` prints it: the record's public
// fields and its attachments, read from the node records.
type View struct {
	ID           string       `json:"pool_id"`
	Capacity     *int64       `json:"capacity_bytes,omitempty"`
	Reserved     int64        `json:"reserved_bytes"`
	Version      int64        `json:"version"`
	Objects      int64        `json:"object_count"`
	CleanupCount int64        `json:"cleanup_count"`
	DeclaredAt   string       `json:"declared_at"`
	LostAt       *string      `json:"lost_at"`
	Attachments  []Attachment `json:"attachments"`
}

// NewView builds the printed pool; attachments are ordered by node.
func NewView(rec *Record, atts []Attachment) View {
	v := View{
		ID: rec.ID, Capacity: rec.Capacity, Reserved: rec.Reserved, Version: rec.Version,
		Objects: rec.Objects, CleanupCount: int64(len(rec.Cleanups)),
		DeclaredAt:  rec.DeclaredAt.UTC().Format(timeFormat),
		Attachments: slices.Clone(atts),
	}
	if rec.LostAt != nil {
		s := rec.LostAt.UTC().Format(timeFormat)
		v.LostAt = &s
	}
	if v.Attachments == nil {
		v.Attachments = []Attachment{}
	}
	slices.SortFunc(v.Attachments, func(a, b Attachment) int {
		if a.Node < b.Node {
			return -1
		}
		if a.Node > b.Node {
			return 1
		}
		return 0
	})
	return v
}

const timeFormat = "2006-01-02T15:04:05Z07:00"

package pool

import (
	"encoding/json"
	"maps"
	"math"
	"slices"

	"github.com/eru-extend/resources/types"
)

// Plan is where one pool binding of a workload lives: the workload
// resource's pool_plan_request / pool_plan_limit map each binding (stored
// form) to one, e.g. {"pool": "ceph-a", "object": "v-…", "bytes": 107374182400}.
// In a realloc's delta_resource, bytes is the difference (negative when it
// shrinks).
type Plan struct {
	Pool   string `json:"pool"`
	Object string `json:"object"`
	Bytes  int64  `json:"bytes"`
	// From is, for a binding that attaches an existing object, the node
	// whose record had the object when calculate-deploy planned it: the
	// usage write reads and writes that record in its transaction.
	From string `json:"from,omitempty"`
}

// Plans are one workload's pool plans by binding.
type Plans map[string]Plan

// DecodePlans reads a pool_plan_* member strictly (absent or null is
// none). signed allows negative bytes (a delta resource).
func DecodePlans(raw json.RawMessage, signed bool) (Plans, error) {
	p := Plans{}
	if !types.IsNull(raw) {
		if err := decodeStrict(raw, &p); err != nil {
			return nil, types.Invalid("pool plan: %v", err)
		}
	}
	if p == nil {
		p = Plans{}
	}
	for _, b := range slices.Sorted(maps.Keys(p)) {
		plan := p[b]
		if _, err := ParseBinding(b, signed); err != nil {
			return nil, err
		}
		if err := ValidID(plan.Pool); err != nil {
			return nil, types.Invalid("pool plan of %s: %v", types.Clip([]byte(b)), err)
		}
		if err := ValidObjectID(plan.Object); err != nil {
			return nil, types.Invalid("pool plan of %s: %v", types.Clip([]byte(b)), err)
		}
		if plan.Bytes > types.MaxExact || plan.Bytes < -types.MaxExact || (!signed && plan.Bytes <= 0) {
			return nil, types.Invalid("pool plan of %s: bytes %d is out of range", types.Clip([]byte(b)), plan.Bytes)
		}
	}
	return p, nil
}

// SumPlans adds the plans of several workloads into one change's objects
// (object id → pool and bytes). An object named with two pools is refused.
func SumPlans(all ...Plans) (map[string]Amount, error) {
	out := map[string]Amount{}
	for _, plans := range all {
		for _, b := range slices.Sorted(maps.Keys(plans)) {
			p := plans[b]
			a, ok := out[p.Object]
			if ok && a.Pool != p.Pool {
				return nil, types.Invalid("object %s is planned in pools %s and %s", p.Object, a.Pool, p.Pool)
			}
			out[p.Object] = Amount{Pool: p.Pool, Bytes: a.Bytes + p.Bytes}
		}
	}
	return out, nil
}

// RoomFor is calculate-deploy's check: count new objects of bytes each fit
// in pool rec (see Room), without overflowing.
func RoomFor(rec *Record, count int, bytes int64) error {
	if count <= 0 || bytes <= 0 {
		return types.Invalid("pool %s: %d objects of %d bytes asked", rec.ID, count, bytes)
	}
	if bytes > math.MaxInt64/int64(count) {
		return types.Errorf(types.ResourceExhausted, "pool %s: %d objects of %s do not fit in any pool", rec.ID, count, Human(bytes))
	}
	return Room(rec, int64(count)*bytes)
}

// ObjectView is one object as `storage pools objects` and `storage pools
// object` print it.
type ObjectView struct {
	ID            string `json:"object_id"`
	Pool          string `json:"pool"`
	Bytes         int64  `json:"capacity_bytes"`
	Node          string `json:"node_id"`
	Held          bool   `json:"held"`
	State         string `json:"state"`
	MovingTo      string `json:"moving_to,omitempty"`
	MoveCommandID string `json:"move_command_id,omitempty"`
	Kind          string `json:"kind"`
}

// ListObjects lists the objects of pool p (every pool when p is ""),
// narrowed to node when it is not "", ordered by id. An object moving out
// of a pool is listed under the pool it moves to.
func ListObjects(p, node string, nodes map[string]Objects, pools map[string]*Record) []ObjectView {
	out := []ObjectView{}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		if node != "" && n != node {
			continue
		}
		for id, obj := range nodes[n] {
			listed := obj.Pool
			if obj.MovingTo != "" {
				listed = obj.MovingTo
			}
			if p != "" && listed != p {
				continue
			}
			out = append(out, ObjectView{ID: id, Pool: obj.Pool, Bytes: obj.Bytes, Node: n, Held: obj.Held,
				State: ObjectState(obj, pools[obj.Pool]), MovingTo: obj.MovingTo, MoveCommandID: obj.MoveCommandID, Kind: "VOLUME"})
		}
	}
	slices.SortFunc(out, func(a, b ObjectView) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

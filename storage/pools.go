package storage

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/types"
)

// The storage pools of a node record (docs/pools.md): declarations in the
// capacity, objects in the usage, and the pool records a node write links
// to its own.

// PoolKey is the store key of pool id's record. Pool records live outside
// the node records' prefix, so that a range read of the nodes never meets
// them.
func PoolKey(id string) string { return "/" + pool.Key(id) }

// PoolPrefix is where every pool record lives.
const PoolPrefix = "/" + pool.KeyPrefix

// Declarations are the pools the node declares.
func (n *Node) Declarations() pool.Declarations {
	return pool.Declarations{Pools: n.Capacity.Pools, DefaultPool: n.Capacity.DefaultPool}
}

// Objects are the pool objects the node's record keeps.
func (n *Node) Objects() pool.Objects { return n.Usage.PoolObjects }

// setDeclarations stores d in the capacity; empty members stay absent.
func (r *Resource) setDeclarations(d pool.Declarations) {
	r.Pools, r.DefaultPool = d.Pools, d.DefaultPool
	if len(r.Pools) == 0 {
		r.Pools = nil
	}
}

// declare applies a request's pool declarations to the node's capacity: a
// pool the node still keeps objects in cannot be dropped.
func (n *Node) declare(req pool.DeclarationRequest) error {
	change, err := pool.ApplyDeclarations(n.Declarations(), req, n.Objects())
	if err != nil {
		return err
	}
	n.Capacity.setDeclarations(change.Declarations)
	return nil
}

// parsePools reads the pool members of a node request.
func (q *NodeRequest) parsePools(m map[string]json.RawMessage) error {
	if raw, ok := m["pools"]; ok && !types.IsNull(raw) {
		pools, err := pool.ParsePools(raw)
		if err != nil {
			return err
		}
		q.Pools = pools
	}
	if raw, ok := m["default-pool"]; ok && !types.IsNull(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return errInvalid("default-pool: want a pool id, got %s", clip(raw))
		}
		id := ""
		if s != "" {
			var err error
			if id, err = pool.ParseDefaultPool(s); err != nil {
				return err
			}
		}
		q.DefaultPool = &id
	}
	if raw, ok := m["rm-pools"]; ok && !types.IsNull(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return errInvalid("rm-pools: want \"p1,p2\", got %s", clip(raw))
		}
		ids, err := pool.ParseRmPools(s)
		if err != nil {
			return err
		}
		q.RmPools = ids
	}
	return nil
}

// storedDeclarations reads the stored-form pool members of a resource
// (a rollback snapshot): absent members are no pools.
func storedDeclarations(m map[string]json.RawMessage) (pool.DeclarationRequest, error) {
	if m == nil {
		return pool.DeclarationRequest{}, nil
	}
	d, err := pool.DecodeDeclarations(m["pools"], m["default_pool"])
	if err != nil {
		return pool.DeclarationRequest{}, err
	}
	pools := d.Pools
	if pools == nil {
		pools = map[string]pool.Declaration{}
	}
	def := d.DefaultPool
	return pool.DeclarationRequest{Absolute: true, Pools: pools, DefaultPool: &def}, nil
}

// validatePools checks the record's declarations and objects, and that
// each half of the record carries only its own pool members.
func (n *Node) validatePools() error {
	if err := n.Declarations().Validate(); err != nil {
		return err
	}
	if err := n.Usage.PoolObjects.Validate(); err != nil {
		return err
	}
	if len(n.Usage.Pools) > 0 || n.Usage.DefaultPool != "" {
		return errInvalid("usage holds pool declarations: only capacity declares pools")
	}
	if len(n.Capacity.PoolObjects) > 0 {
		return errInvalid("capacity holds pool objects: only usage keeps them")
	}
	return nil
}

// LinkedKeys are the records a write reads besides the node's: every pool
// the write declares anew (its record may have to be created) and, for a
// write that changes pool objects, every pool they live in and the node
// records an attach takes objects from.
func (Rules) LinkedKeys(node string, before, after *Node) []string {
	var keys []string
	if objectsChange(before, after) {
		for _, k := range linkedPoolKeys(before, after) {
			if k != nodes.RecordPrefix("storage")+node {
				keys = append(keys, k)
			}
		}
	}
	for _, id := range after.Declarations().IDs() {
		if _, ok := before.Capacity.Pools[id]; !ok {
			keys = append(keys, PoolKey(id))
		}
	}
	return keys
}

// objectsChange reports whether a write may change the node's pool objects.
func objectsChange(before, after *Node) bool {
	return after.pending != nil || !maps.EqualFunc(before.Usage.PoolObjects, after.Usage.PoolObjects, func(a, b pool.Object) bool { return a == b })
}

// Link creates the record of every pool the write declares first, in the
// node's transaction (version 0, no capacity), and admits a write that
// changes pool objects (pool.Admit) against the pool records read with it.
func (Rules) Link(l engine.Link, before, after *Node) (*Node, map[string][]byte, error) {
	puts := map[string][]byte{}
	if objectsChange(before, after) {
		holders := map[string]*Node{}
		if after.pending != nil {
			for _, from := range after.pending.sources(before) {
				if from == l.Node {
					continue
				}
				data, ok := l.Get(nodes.RecordPrefix("storage") + from)
				if !ok {
					continue
				}
				h, err := DecodeNode(data)
				if err != nil {
					return nil, nil, types.Wrap(types.DataLoss, err, "storage record of node "+from)
				}
				holders[from] = h
			}
		}
		if err := restoreHolders(l, before, after, holders); err != nil {
			return nil, nil, err
		}
		next, admitted, err := admitPools(l, before, after, holders)
		if err != nil {
			return nil, nil, err
		}
		after = next
		maps.Copy(puts, admitted)
	}
	for _, id := range after.Declarations().IDs() {
		if _, ok := before.Capacity.Pools[id]; ok {
			continue
		}
		key := PoolKey(id)
		if _, ok := l.Get(key); ok {
			continue
		}
		data, err := pool.NewRecord(id, l.Now).Encode()
		if err != nil {
			return nil, nil, types.Wrap(types.Internal, err, "pool "+id)
		}
		puts[key] = data
	}
	return after, puts, nil
}

// restoreHolders adds to holders the records of the other nodes that keep
// an object an absolute restore names and this node's record lacks (an
// object attached elsewhere since the snapshot was taken). A scan finds
// them; the transaction then reads and compares them, so the restore
// neither puts one object in two records nor takes one from under another
// node's workload (pool.Admit leaves a held object there and takes an
// unheld one back). An object found nowhere is recreated.
func restoreHolders(l engine.Link, before, after *Node, holders map[string]*Node) error {
	ids := restoredIDs(before, after)
	for id := range ids {
		for _, h := range holders {
			if _, ok := h.Usage.PoolObjects[id]; ok {
				delete(ids, id)
			}
		}
	}
	if len(ids) == 0 || l.Scan == nil {
		return nil
	}
	prefix := nodes.RecordPrefix("storage")
	records, err := l.Scan(prefix)
	if err != nil {
		return err
	}
	var more []string
	for _, key := range slices.Sorted(maps.Keys(records)) {
		name, _ := strings.CutPrefix(key, prefix)
		if name == l.Node || name == "" || strings.Contains(name, "/") || holders[name] != nil {
			continue
		}
		if n, err := DecodeNode(records[key]); err != nil || !keepsAny(n, ids) {
			continue
		}
		if !l.Named(key) {
			more = append(more, key)
			continue
		}
		data, ok := l.Get(key)
		if !ok {
			continue // gone since the scan: the compare on its absence holds
		}
		h, err := DecodeNode(data)
		if err != nil {
			return types.Wrap(types.DataLoss, err, "storage record of node "+name)
		}
		holders[name] = h
	}
	if len(more) > 0 {
		return engine.MoreKeys(more...)
	}
	return nil
}

// restoredIDs are the objects an absolute restore names that the node's
// record lacks.
func restoredIDs(before, after *Node) map[string]bool {
	ids := map[string]bool{}
	switch pc := after.pending; {
	case pc == nil:
		for id := range after.Usage.PoolObjects {
			ids[id] = true
		}
	case pc.restore && pc.change.Mode == pool.Absolute:
		for id, a := range pc.change.Objects {
			if a.Bytes > 0 {
				ids[id] = true
			}
		}
	}
	for id := range before.Usage.PoolObjects {
		delete(ids, id)
	}
	return ids
}

// keepsAny reports whether n's record keeps one of the objects ids.
func keepsAny(n *Node, ids map[string]bool) bool {
	for id := range n.Usage.PoolObjects {
		if ids[id] {
			return true
		}
	}
	return false
}

// Release is an isolation's part of the node's pool objects: every object
// becomes unheld and stays in the record, still reserving (the data is in
// the pool); another node may attach it.
func (Rules) Release(n *Node) *Node {
	if len(n.Usage.PoolObjects) == 0 {
		return n
	}
	out := n.Clone()
	out.Usage.PoolObjects, _, _ = pool.Isolate(n.Usage.PoolObjects)
	return out
}

// HeldObjects counts the pool objects the node's workloads hold: to the
// node registry they are usage (engine.ObjectHolder), so a drained node
// holding one is DRAINING and cannot be retired until its workloads let
// go or it is isolated.
func (Rules) HeldObjects(n *Node) int64 {
	var held int64
	for _, obj := range n.Usage.PoolObjects {
		if obj.Held {
			held++
		}
	}
	return held
}

// CheckRemove refuses to forget a node whose record keeps pool objects:
// they reserve their pools' space, and only this record knows them.
func (Rules) CheckRemove(n *Node) error {
	if k := len(n.Usage.PoolObjects); k > 0 {
		return types.Errorf(types.FailedPrecondition, "the node keeps %d pool objects (%s); remove its workloads or attach the objects elsewhere first", k, strings.Join(n.Usage.PoolObjects.IDs(), ", "))
	}
	return nil
}

// ReleasedFigures count the pool objects and bytes an isolation unheld.
func (Rules) ReleasedFigures(before, after *Node) []types.Figure {
	var objects, bytes int64
	for id, obj := range before.Usage.PoolObjects {
		if a, ok := after.Usage.PoolObjects[id]; obj.Held && ok && !a.Held {
			objects++
			bytes += obj.Bytes
		}
	}
	return []types.Figure{{Name: "released_pool_objects", Value: objects}, {Name: "released_pool_bytes", Value: bytes}}
}

// Retire ends the node's pool declarations (its attachments disappear) and
// unholds its objects: they keep reserving until attached elsewhere or
// deleted by a decrease.
func (Rules) Retire(n *Node) (*Node, bool) {
	if len(n.Capacity.Pools) == 0 && len(n.Usage.PoolObjects) == 0 {
		return n, false
	}
	out := Rules{}.Release(n).Clone()
	out.Capacity.setDeclarations(pool.Declarations{})
	return out, true
}

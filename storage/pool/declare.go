package pool

import (
	"maps"
	"slices"

	"github.com/eru-extend/resources/types"
)

// DeclarationRequest is what one node request (add-node,
// set-node-resource-capacity) says about pools. A nil member says nothing.
type DeclarationRequest struct {
	// Absolute is the request's mode: absolute replaces the node's pools
	// (when Pools is given) and alone may carry RmPools; delta adds.
	Absolute bool
	Pools    map[string]Declaration
	// DefaultPool names the default; a pointer to "" clears it.
	DefaultPool *string
	RmPools     []string
}

// DeclarationChange is a node's declarations after a request, and the
// pools the request added (the integration creates their records when
// missing, in the same transaction) and removed.
type DeclarationChange struct {
	Declarations Declarations
	Added        []string
	Removed      []string
}

// ApplyDeclarations applies a request to a node's declarations. objs are the
// objects the node's record keeps: a pool the node still keeps objects in
// cannot be dropped (failed_precondition naming the pool and the count),
// nor a pool one of them is moving into (failed_precondition naming the
// object and the move: the move could then neither settle nor be aborted
// on this node). Pools a request declares must each have a path of their
// own (Declarations.Apart).
func ApplyDeclarations(cur Declarations, req DeclarationRequest, objs Objects) (DeclarationChange, error) {
	next := cur.Clone()
	if next.Pools == nil {
		next.Pools = map[string]Declaration{}
	}
	if len(req.RmPools) > 0 && !req.Absolute {
		return DeclarationChange{}, types.Invalid("rm-pools is accepted only in absolute mode")
	}
	if req.Pools != nil {
		if req.Absolute {
			next.Pools = maps.Clone(req.Pools)
		} else {
			for _, id := range slices.Sorted(maps.Keys(req.Pools)) {
				d := req.Pools[id]
				if old, ok := next.Pools[id]; ok && old.Path != d.Path {
					return DeclarationChange{}, types.Invalid("pool %s is already declared at %s; change its path in absolute mode", id, old.Path)
				}
				next.Pools[id] = d
			}
		}
	}
	for _, id := range req.RmPools {
		if _, ok := req.Pools[id]; ok {
			return DeclarationChange{}, types.Invalid("pool %s is both declared and removed by the request", id)
		}
		if _, ok := next.Pools[id]; !ok {
			return DeclarationChange{}, types.Invalid("rm-pools: pool %s is not declared on this node", id)
		}
		delete(next.Pools, id)
	}
	if req.Pools != nil {
		if err := next.Apart(); err != nil {
			return DeclarationChange{}, err
		}
	}
	held := objs.CountByPool()
	var change DeclarationChange
	for _, id := range cur.IDs() {
		if _, ok := next.Pools[id]; !ok {
			if n := held[id]; n > 0 {
				return DeclarationChange{}, types.Errorf(types.FailedPrecondition, "pool %s still has %d objects on this node; move or remove them before dropping the pool", id, n)
			}
			if obj, ok := objs.MovingInto(id); ok {
				o := objs[obj]
				return DeclarationChange{}, types.Errorf(types.FailedPrecondition,
					"object %s is moving from pool %s into pool %s; finish or abort that move (storage pools move %s --to %s --command-id %s [--abort]) before dropping the pool",
					obj, o.Pool, id, obj, id, o.MoveCommandID)
			}
			change.Removed = append(change.Removed, id)
		}
	}
	for _, id := range next.IDs() {
		if _, ok := cur.Pools[id]; !ok {
			change.Added = append(change.Added, id)
		}
	}
	switch {
	case req.DefaultPool != nil:
		next.DefaultPool = *req.DefaultPool
	case next.DefaultPool != "":
		if _, ok := next.Pools[next.DefaultPool]; !ok {
			next.DefaultPool = ""
		}
	}
	if len(next.Pools) == 0 {
		next.Pools = nil
	}
	if err := next.Validate(); err != nil {
		return DeclarationChange{}, err
	}
	change.Declarations = next
	return change, nil
}

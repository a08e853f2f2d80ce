package storage

import (
	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/types"
)

// CapacityChange is a set-node-resource-capacity change decoded once:
// resource_request in request form (or a rollback snapshot in stored
// form), else resource in stored form; absolute (delta false) or
// added/subtracted (delta true, incr). It holds at most one of request and
// stored; neither is no change to the devices.
type CapacityChange struct {
	delta, incr bool
	request     *NodeRequest
	stored      *Resource
	// decl are the pool declarations, applied on their own after the
	// devices: the device paths restore them as they were.
	decl pool.DeclarationRequest
}

// DecodeCapacityChange reads the change the engine picked (types.ChangeOf).
func DecodeCapacityChange(c types.Change, delta, incr bool) (*CapacityChange, error) {
	out := &CapacityChange{delta: delta, incr: incr}
	switch c.Form {
	case types.RequestForm:
		if isSnapshot(c.Members) {
			stored, err := decodeStoredMembers(c.Members, c.Raw, "resource_request", whole)
			if err != nil {
				return nil, err
			}
			out.stored = &stored
			if out.decl, err = storedDeclarations(c.Members); err != nil {
				return nil, err
			}
			out.decl.Absolute = !delta
			return out, nil
		}
		q, err := ParseNodeRequest(c.Members, delta)
		if err != nil {
			return nil, err
		}
		if delta && q.HasRmDisks {
			return nil, errInvalid("rm-disks is only valid in absolute mode (delta false)")
		}
		out.request, out.decl = q, q.declarations(!delta)
	case types.StoredForm:
		stored, err := decodeStoredMembers(c.Members, c.Raw, "resource", shapeFor(delta))
		if err != nil {
			return nil, err
		}
		out.stored = &stored
		if c.Members["pools"] != nil || c.Members["default_pool"] != nil || !delta {
			if out.decl, err = storedDeclarations(c.Members); err != nil {
				return nil, err
			}
			out.decl.Absolute = !delta
			if delta {
				out.decl.DefaultPool = nil
			}
		}
	}
	return out, nil
}

// Apply answers the node with its capacity changed; n is left as it was.
func (c *CapacityChange) Apply(n *Node) (*Node, error) {
	out := n.Clone()
	var err error
	switch {
	case c.stored != nil:
		err = out.Capacity.apply(*c.stored, &out.Usage, c.delta, c.incr)
	case c.request != nil && c.delta:
		err = out.Capacity.apply(c.request.toResource(), &out.Usage, true, c.incr)
	case c.request != nil:
		err = out.Capacity.applyAbsolute(c.request)
	}
	if err != nil {
		return nil, err
	}
	out.Capacity.setDeclarations(n.Declarations())
	if err := out.declare(c.decl); err != nil {
		return nil, err
	}
	if err := out.syncUsage(); err != nil {
		return nil, err
	}
	return out, out.Validate()
}

// UsageChange is a set-node-resource-usage change decoded once: the first
// present of resource_request (request form, or a rollback snapshot),
// resource (stored form) and the workloads of workloads_resource, whose sum
// is the change. delta adds (incr) or subtracts it, else it replaces the
// usage.
type UsageChange struct {
	delta, incr bool
	form        types.Form
	// change is the change in stored form (for workloads, their sum).
	change Resource
	// workloads are the workloads of a workloads-form change.
	workloads []*Workload
}

// DecodeUsageChange reads the change the engine picked (types.ChangeOf).
func DecodeUsageChange(c types.Change, delta, incr bool) (*UsageChange, error) {
	out := &UsageChange{delta: delta, incr: incr, form: c.Form}
	var err error
	switch c.Form {
	case types.RequestForm:
		if isSnapshot(c.Members) {
			if out.change, err = decodeStoredMembers(c.Members, c.Raw, "resource_request", whole); err != nil {
				return nil, err
			}
			out.form = types.StoredForm // a snapshot: its pool objects are restored too
			return out, nil
		}
		q, err := ParseNodeRequest(c.Members, delta)
		if err != nil {
			return nil, err
		}
		if q.HasRmDisks {
			return nil, errInvalid("rm-disks is not a usage")
		}
		if q.hasPools() {
			return nil, errInvalid("pools, default-pool and rm-pools are declarations, not a usage")
		}
		out.change = q.toResource()
	case types.StoredForm:
		if out.change, err = decodeStoredMembers(c.Members, c.Raw, "resource", shapeFor(delta)); err != nil {
			return nil, err
		}
	default:
		if out.workloads, err = DecodeWorkloads(c.Raw); err != nil {
			return nil, err
		}
		if out.change, err = sumWorkloads(out.workloads); err != nil {
			return nil, err
		}
		out.form = types.WorkloadsForm
	}
	return out, nil
}

// Apply computes the usage write without validating it: the result may
// hold negative components, which the node registry's ledger may absorb
// before the record is validated (Settle). n is left as it was.
func (c *UsageChange) Apply(n *Node) (*Node, error) {
	old := n.Usage.amounts()
	var next types.Amounts
	var err error
	switch {
	case !c.delta:
		next = types.Amounts{}
		for k := range old {
			next[k] = 0
		}
		for k, v := range c.change.amounts() {
			next[k] = v
		}
	case c.incr:
		next, err = addAmounts(old, c.change.amounts(), 1)
	default:
		next, err = addAmounts(old, c.change.amounts(), -1)
	}
	if err != nil {
		return nil, err
	}
	// A binding count may go below zero here: the isolation ledger may
	// give it back (an isolated node's workload removed); what it does
	// not is clamped by Settle.
	out := n.WithHeld(next)
	if out.pending, err = c.poolChange(); err != nil {
		return nil, err
	}
	return out, nil
}

// CapacityChange decodes a capacity change.
func (Rules) CapacityChange(c types.Change, delta, incr bool) (engine.Edit[*Node], error) {
	return engine.AsEdit[*Node](DecodeCapacityChange(c, delta, incr))
}

// UsageChange decodes a usage change.
func (Rules) UsageChange(c types.Change, delta, incr bool) (engine.Edit[*Node], error) {
	return engine.AsEdit[*Node](DecodeUsageChange(c, delta, incr))
}

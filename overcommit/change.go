package overcommit

import (
	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/types"
)

// CapacityChange is a set-node-resource-capacity change decoded once: a
// request ({"cpu", "memory"}) or a stored-form snapshot in
// resource_request, or stored-form figures in resource (as the protocol
// names them); absolute or as a delta. Has says which figures it sets.
type CapacityChange struct {
	delta, incr    bool
	change         Amount
	hasCPU, hasMem bool
	// stored is a change in resource: both figures, no shrink check.
	stored bool
	// none: the request carried no change; the record is answered as it
	// is, unchecked.
	none bool
}

// DecodeCapacityChange reads the change the engine picked (types.ChangeOf).
func DecodeCapacityChange(c types.Change, delta, incr bool) (*CapacityChange, error) {
	out := &CapacityChange{delta: delta, incr: incr, none: c.Form == types.NoChange}
	var err error
	switch {
	case c.Form == types.StoredForm:
		if out.change, err = decodeAmountMembers(c.Members, c.Raw, "resource"); err != nil {
			return nil, err
		}
		out.hasCPU, out.hasMem, out.stored = true, true, true
	case c.Form != types.RequestForm:
	case isSnapshot(c.Members):
		if out.change, err = decodeAmountMembers(c.Members, c.Raw, "resource_request"); err != nil {
			return nil, err
		}
		out.hasCPU, out.hasMem = true, true
	default:
		// a delta may be negative: core's SetNode always sends incr, so
		// `--extra-resources '{"compute":{"cpu":-4}}'` is how a node shrinks.
		q, err := parseNodeRequest(c.Members, delta)
		if err != nil {
			return nil, err
		}
		out.change, out.hasCPU, out.hasMem = Amount{CPUMillis: q.CPU, MemoryBytes: q.Memory}, q.HasCPU, q.HasMemory
	}
	return out, nil
}

// Apply answers the node with its host figures changed; n is left as it
// was.
func (c *CapacityChange) Apply(n *Node) (*Node, error) {
	out := *n
	if c.none {
		return &out, nil
	}
	out.Capacity = apply(out.Capacity, c.change, c.hasCPU, c.hasMem, c.delta, c.incr)
	if c.delta && !c.stored {
		if err := checkShrink(n.Capacity, out.Capacity); err != nil {
			return nil, err
		}
	}
	return &out, out.Validate()
}

// UsageChange is a set-node-resource-usage change decoded once: the first
// present of resource_request (a request, or a rollback snapshot),
// resource (stored form) and the sum of workloads_resource.
type UsageChange struct {
	delta, incr    bool
	change         Amount
	hasCPU, hasMem bool
}

// DecodeUsageChange reads the change the engine picked (types.ChangeOf).
func DecodeUsageChange(c types.Change, delta, incr bool) (*UsageChange, error) {
	out := &UsageChange{delta: delta, incr: incr, hasCPU: true, hasMem: true}
	var err error
	switch {
	case c.Form == types.RequestForm && isSnapshot(c.Members):
		if out.change, err = decodeAmountMembers(c.Members, c.Raw, "resource_request"); err != nil {
			return nil, err
		}
	case c.Form == types.RequestForm:
		q, err := parseNodeRequest(c.Members, false)
		if err != nil {
			return nil, err
		}
		out.change, out.hasCPU, out.hasMem = Amount{CPUMillis: q.CPU, MemoryBytes: q.Memory}, q.HasCPU, q.HasMemory
	case c.Form == types.StoredForm:
		if out.change, err = decodeAmountMembers(c.Members, c.Raw, "resource"); err != nil {
			return nil, err
		}
	default:
		list, err := DecodeWorkloads(c.Raw)
		if err != nil {
			return nil, err
		}
		if out.change, err = sumWorkloads(list); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Apply computes the usage write without validating it; n is left as it
// was.
func (c *UsageChange) Apply(n *Node) (*Node, error) {
	out := *n
	out.Usage = apply(out.Usage, c.change, c.hasCPU, c.hasMem, c.delta, c.incr)
	return &out, nil
}

// CapacityChange decodes a capacity change.
func (Rules) CapacityChange(c types.Change, delta, incr bool) (engine.Edit[*Node], error) {
	return engine.AsEdit[*Node](DecodeCapacityChange(c, delta, incr))
}

// UsageChange decodes a usage change.
func (Rules) UsageChange(c types.Change, delta, incr bool) (engine.Edit[*Node], error) {
	return engine.AsEdit[*Node](DecodeUsageChange(c, delta, incr))
}

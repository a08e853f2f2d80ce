package storage

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/eru-extend/resources/types"
)

// AddNode builds a new node's record from the add-node request and the
// engine's report. What the request leaves out of volumes and disks comes
// from the engine's storage resource; with no storage value the flat budget
// is 80% of the engine's storage total. The volumes' total is added to the
// budget either way.
func AddNode(request json.RawMessage, info *types.EngineInfo) (*Node, error) {
	m, err := types.DecodeObject(request, "resource")
	if err != nil {
		return nil, err
	}
	q, err := ParseNodeRequest(m, false)
	if err != nil {
		return nil, err
	}
	if q.HasRmDisks {
		return nil, errInvalid("rm-disks: there are no disks to remove when adding a node")
	}
	if q.RmPools != nil {
		return nil, errInvalid("rm-pools: there are no pools to remove when adding a node")
	}
	var reported *Resource
	var engineTotal int64
	if info != nil {
		engineTotal = info.StorageTotal
		if raw := json.RawMessage(info.Resources["storage"]); len(raw) > 0 && !types.IsNull(raw) {
			m, err := types.DecodeObject(raw, "info.Resources.storage")
			if err != nil {
				return nil, err
			}
			r, err := decodeStoredMembers(m, raw, "info.Resources.storage", report)
			if err != nil {
				return nil, err
			}
			reported = &r
			// its storage stands for the engine's total only when it
			// carries one; else StorageTotal does.
			if !types.IsNull(m["storage"]) {
				engineTotal = r.Storage
			}
		}
	}
	n := NewNode()
	switch {
	case q.HasVolumes:
		for _, v := range q.Volumes {
			if v.Size > 0 {
				n.Capacity.Volumes[v.Device] = v.Size
			}
		}
	case reported != nil:
		for dev, size := range reported.Volumes {
			if size > 0 {
				n.Capacity.Volumes[dev] = size
			}
		}
	}
	switch {
	case q.HasDisks:
		n.Capacity.Disks = slices.Clone(q.Disks)
	case reported != nil:
		n.Capacity.Disks = reported.Clone().Disks
	}
	flat := q.Storage
	if !q.HasStorage {
		if engineTotal < 0 || engineTotal > types.MaxExact {
			return nil, errInvalid("info: engine storage total %d is out of range", engineTotal)
		}
		flat = engineTotal / 10 * 8
		flat += engineTotal % 10 * 8 / 10
	}
	total, ok := sumSizes(flat, n.Capacity.volumeTotal())
	if !ok {
		return nil, errInvalid("storage: the budget and the volumes add up to more than 8 PiB")
	}
	n.Capacity.Storage = total
	decl := q.declarations(true)
	if decl.Pools == nil && reported != nil && reported.Pools != nil {
		decl.Pools = reported.Pools
		if decl.DefaultPool == nil && reported.DefaultPool != "" {
			decl.DefaultPool = &reported.DefaultPool
		}
	}
	if err := n.declare(decl); err != nil {
		return nil, err
	}
	if err := n.syncUsage(); err != nil {
		return nil, err
	}
	return n, n.Validate()
}

// apply replaces the capacity with a stored-form resource (delta false, a
// rollback snapshot restored verbatim) or adds or subtracts it. A delta's
// values may be negative (eru-cli's `node set --delta --volume
// /data0:-100G`); a result below zero or below the usage is refused, naming
// the device and the amounts. A volume whose capacity reaches 0 goes; a
// disk whose quotas reach 0 stays (only rm-disks removes a disk).
func (r *Resource) apply(d Resource, usage *Resource, delta, incr bool) error {
	if !delta {
		*r = d.Clone()
		for dev, size := range r.Volumes {
			if size == 0 {
				delete(r.Volumes, dev)
			}
		}
		return nil
	}
	sign := int64(1)
	if !incr {
		sign = -1
	}
	for _, dev := range d.sortedDevices() {
		change := sign * d.Volumes[dev]
		old, ok := r.Volumes[dev]
		if !ok && change < 0 {
			return types.Errorf(types.FailedPrecondition, "volume %s: the node has no such volume to shrink by %s", dev, Human(-change))
		}
		v := old + change
		used := usage.Volumes[dev]
		switch {
		case v < 0:
			return types.Errorf(types.FailedPrecondition, "volume %s: capacity %s (%d bytes) %s would be below zero",
				dev, Human(old), old, signed(change))
		case v < used:
			return types.Errorf(types.FailedPrecondition, "volume %s: capacity %s (%d bytes) %s would be %s, below its usage %s (%d bytes)",
				dev, Human(old), old, signed(change), Human(v), Human(used), used)
		case v > types.MaxExact:
			return errInvalid("volume %s: capacity would exceed 8 PiB", dev)
		case v == 0:
			if usage.ZeroByte[dev] > 0 {
				return types.Errorf(types.FailedPrecondition, "volume %s still hosts %d workload bindings: it cannot be removed", dev, usage.ZeroByte[dev])
			}
			delete(r.Volumes, dev)
		default:
			r.Volumes[dev] = v
		}
	}
	change := sign * d.Storage
	s := r.Storage + change
	switch {
	case s < 0:
		return types.Errorf(types.FailedPrecondition, "storage: capacity %s (%d bytes) %s would be below zero", Human(r.Storage), r.Storage, signed(change))
	case s < usage.Storage:
		return types.Errorf(types.FailedPrecondition, "storage: capacity %s (%d bytes) %s would be %s, below its usage %s (%d bytes)",
			Human(r.Storage), r.Storage, signed(change), Human(s), Human(usage.Storage), usage.Storage)
	case s > types.MaxExact:
		return errInvalid("storage: capacity would exceed 8 PiB")
	}
	r.Storage = s
	for _, dd := range d.Disks {
		var change Quota
		for i, q := range dd.Quota() {
			change[i] = sign * q
		}
		cur := r.disk(dd.Device)
		if cur == nil {
			if !change.Covers(Quota{}) {
				return types.Errorf(types.FailedPrecondition, "disk %s: the node has no such disk to shrink", dd.Device)
			}
			r.Disks = append(r.Disks, Disk{Device: dd.Device, Mounts: slices.Clone(dd.Mounts)})
			r.Disks[len(r.Disks)-1].SetQuota(change)
			continue
		}
		var used Quota
		if u := usage.disk(dd.Device); u != nil {
			used = u.Quota()
		}
		q := cur.Quota().Plus(change)
		for i, v := range q {
			switch {
			case v < 0:
				return types.Errorf(types.FailedPrecondition, "disk %s: %s %d %s would be below zero", dd.Device, QuotaNames[i], cur.Quota()[i], signed(change[i]))
			case v < used[i]:
				return types.Errorf(types.FailedPrecondition, "disk %s: %s %d %s would be %d, below its usage %d", dd.Device, QuotaNames[i], cur.Quota()[i], signed(change[i]), v, used[i])
			case v > types.MaxExact:
				return errInvalid("disk %s: %s would exceed 2^53", dd.Device, QuotaNames[i])
			}
		}
		cur.SetQuota(q)
		if incr {
			for _, m := range dd.Mounts {
				if !slices.Contains(cur.Mounts, m) {
					cur.Mounts = append(cur.Mounts, m)
				}
			}
		}
	}
	r.normalize()
	return nil
}

// signed writes a change with its sign: "+ 10" or "- 10".
func signed(n int64) string {
	if n < 0 {
		return "- " + strconv.FormatInt(-n, 10)
	}
	return "+ " + strconv.FormatInt(n, 10)
}

// applyAbsolute sets what an absolute request names and keeps the rest:
// each listed volume gets its size (0 removes it), storage becomes the given
// budget plus the listed volumes' total (or, when not given, moves by the
// change of the volume total), each listed disk is replaced or added, and
// rm-disks removes disks.
func (r *Resource) applyAbsolute(q *NodeRequest) error {
	oldTotal := r.volumeTotal()
	for _, v := range q.Volumes {
		if v.Size == 0 {
			delete(r.Volumes, v.Device)
		} else {
			r.Volumes[v.Device] = v.Size
		}
	}
	switch {
	case q.HasStorage:
		total, ok := sumSizes(q.Storage, q.volumeTotal())
		if !ok {
			return errInvalid("storage: the budget and the volumes add up to more than 8 PiB")
		}
		r.Storage = total
	case q.HasVolumes:
		s := r.Storage + r.volumeTotal() - oldTotal
		if s < 0 {
			return types.Errorf(types.FailedPrecondition, "storage: removing volumes would take capacity %d below zero", r.Storage)
		}
		if s > types.MaxExact {
			return errInvalid("storage: capacity would exceed 8 PiB")
		}
		r.Storage = s
	}
	for _, d := range q.Disks {
		if cur := r.disk(d.Device); cur != nil {
			*cur = Disk{Device: d.Device, Mounts: slices.Clone(d.Mounts)}
			cur.SetQuota(d.Quota())
		} else {
			d.Mounts = slices.Clone(d.Mounts) // the request is applied again on a retry
			r.Disks = append(r.Disks, d)
		}
	}
	for _, dev := range q.RmDisks {
		if r.disk(dev) == nil {
			return types.Errorf(types.FailedPrecondition, "rm-disks: the node has no disk %s", dev)
		}
		r.Disks = slices.DeleteFunc(r.Disks, func(x Disk) bool { return x.Device == dev })
	}
	r.normalize()
	return nil
}

// shapeFor is what a stored-form change must carry: all of it when it
// replaces, any of it when it is a delta.
func shapeFor(delta bool) storedShape {
	if delta {
		return part
	}
	return whole
}

// Restore builds a record from set-node-resource-info's capacity and usage,
// both in stored form, verbatim.
func Restore(capacity, usage json.RawMessage) (*Node, error) {
	if types.IsNull(capacity) {
		return nil, errInvalid("capacity: missing")
	}
	c, err := decodeStored(capacity, "capacity", whole)
	if err != nil {
		return nil, err
	}
	n := &Node{Capacity: c}
	if !types.IsNull(usage) {
		u, err := decodeStored(usage, "usage", whole)
		if err != nil {
			return nil, err
		}
		n.Usage = u
	}
	n.Usage.normalize()
	if err := n.syncUsage(); err != nil {
		return nil, err
	}
	return n, n.Validate()
}

func addAmounts(a, b types.Amounts, sign int64) (types.Amounts, error) {
	out := a.Clone()
	for k, v := range b {
		s, ok := sumSizes(out[k], sign*v)
		if !ok {
			return nil, errInvalid("usage of %s would overflow", k)
		}
		out[k] = s
	}
	return out, nil
}

// Settle finishes a usage write the registry has adjusted: usage entries
// follow capacity's devices and the record is validated.
func (n *Node) Settle() (*Node, error) {
	out := n.Clone()
	// A record written before bindings charged no bytes were counted (or
	// by the upstream plugin) holds none: removing such a binding leaves
	// 0, once the isolation ledger has given back what it holds.
	for dev, v := range out.Usage.ZeroByte {
		if v < 0 {
			delete(out.Usage.ZeroByte, dev)
		}
	}
	// Validate before syncUsage: usage on a device capacity lacks is an
	// invalid write, which syncUsage would report as a device still
	// holding usage (its words for a capacity change).
	if err := out.Validate(); err != nil {
		return nil, err
	}
	if err := out.syncUsage(); err != nil {
		return nil, err
	}
	return out, out.Validate()
}

// Recompute sums the workloads' usage and lists every disagreement with the
// stored usage: storage, each volume device (either direction), each disk
// quota.
//
// Usage the node registry released when it isolated the node is still held
// by the workloads core lists until core removes them; it is not live usage,
// so it is taken off the workloads' sum first.
func (n *Node) Recompute(workloads []*Workload, released types.Amounts) (Resource, []string, error) {
	sum, err := sumWorkloads(workloads)
	if err != nil {
		return Resource{}, nil, err
	}
	computed := sum
	if len(released) > 0 {
		a := sum.amounts()
		for k, v := range released {
			a[k] = max(0, a[k]-v)
		}
		computed = resourceFromAmounts(a, &n.Capacity)
	}
	diffs := []string{}
	if computed.Storage != n.Usage.Storage {
		diffs = append(diffs, fmt.Sprintf("storage: stored usage %d, workloads hold %d", n.Usage.Storage, computed.Storage))
	}
	devs := map[string]bool{}
	for d := range n.Usage.Volumes {
		devs[d] = true
	}
	for d := range computed.Volumes {
		devs[d] = true
	}
	for _, d := range types.SortedKeys(devs) {
		if s, c := n.Usage.Volumes[d], computed.Volumes[d]; s != c {
			diffs = append(diffs, fmt.Sprintf("volume %s: stored usage %d, workloads hold %d", d, s, c))
		}
	}
	zero := map[string]bool{}
	for d := range n.Usage.ZeroByte {
		zero[d] = true
	}
	for d := range computed.ZeroByte {
		zero[d] = true
	}
	for _, d := range types.SortedKeys(zero) {
		if s, c := n.Usage.ZeroByte[d], computed.ZeroByte[d]; s != c {
			diffs = append(diffs, fmt.Sprintf("volume %s: stored usage holds %d bindings charged no bytes, workloads hold %d", d, s, c))
		}
	}
	disks := map[string]bool{}
	for _, d := range n.Usage.Disks {
		disks[d.Device] = true
	}
	for _, d := range computed.Disks {
		disks[d.Device] = true
	}
	for _, dev := range types.SortedKeys(disks) {
		var s, c Quota
		if d := n.Usage.disk(dev); d != nil {
			s = d.Quota()
		}
		if d := computed.disk(dev); d != nil {
			c = d.Quota()
		}
		for i := range s {
			if s[i] != c[i] {
				diffs = append(diffs, fmt.Sprintf("disk %s %s: stored usage %d, workloads hold %d", dev, QuotaNames[i], s[i], c[i]))
			}
		}
	}
	return computed, diffs, nil
}

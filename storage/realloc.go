package storage

import (
	"context"
	"fmt"
	"slices"

	"github.com/eru-extend/resources/types"
)

// ReallocResult is calculate-realloc's answer: the engine parameters of the
// resized workload, the change core commits to the node's usage, and the
// workload's new resource. Grows is true when the change adds to anything.
type ReallocResult struct {
	Engine   *EngineParams
	Delta    *Workload
	Workload *Workload
	Grows    bool
}

// Realloc merges a request of deltas into a workload's current resource:
// sizes and quotas add, a binding shrunk to nothing goes. Only when the
// request touches a binding that needs a device or IO quota is anything
// rescheduled; then bindings that match an existing plan entry by source,
// destination and flags stay on their device (a monopoly group stays whole
// when any of its bindings matches) and only the difference is charged,
// while the rest is scheduled afresh.
func (n *Node) Realloc(ctx context.Context, old *Workload, req *WorkloadRequest) (*ReallocResult, error) {
	next, err := mergeRequest(old, req)
	if err != nil {
		return nil, err
	}
	resched := false
	for _, b := range req.Request {
		if b.NeedsScheduling() {
			resched = true
		}
	}
	// A change of an IO limit changes the disks' limits the engine
	// applies: they are worked out again from the bindings.
	for _, b := range req.Limit {
		if !b.Quota.IsZero() {
			resched = true
		}
	}
	// A mount whose IO limit the request sets must have a disk to apply
	// it on, as at deploy.
	for i, r := range next.Request {
		sets := slices.ContainsFunc(req.Limit, func(b *VolumeBinding) bool { return !b.Quota.IsZero() && b.identity() == r.identity() })
		if sets && !n.unknown {
			if err := n.uncoveredLimit(next.Request[i:i+1], next.Limit[i:i+1]); err != nil {
				return nil, uncovered(err)
			}
		}
	}
	if n.unknown && (resched || next.StorageRequest > old.StorageRequest) {
		return nil, types.Errorf(types.ResourceExhausted, "no storage record for this node: add it (add-node) or set its capacity first")
	}
	var wl *Workload
	if resched {
		if wl, err = n.replan(ctx, old, next); err != nil {
			return nil, err
		}
	} else {
		wl = &Workload{
			VolumesRequest:    next.Request,
			VolumesLimit:      next.Limit,
			VolumePlanRequest: rekeyPlan(old.VolumePlanRequest, next.Request),
			VolumePlanLimit:   rekeyPlan(old.VolumePlanLimit, next.Limit),
			StorageRequest:    next.StorageRequest,
			StorageLimit:      next.StorageLimit,
			DisksRequest:      slices.Clone(old.DisksRequest),
			DisksLimit:        slices.Clone(old.DisksLimit),
		}
	}
	if grow := wl.StorageRequest - old.StorageRequest; grow > 0 && n.Usage.Storage+grow > n.Capacity.Storage {
		left := max(0, n.Capacity.Storage-n.Usage.Storage)
		return nil, types.Errorf(types.ResourceExhausted, "storage budget: the workload grows by %s, %s left (%d bytes)",
			Human(grow), Human(left), left)
	}
	delta := diffWorkloads(old, wl)
	held, err := sumWorkloads([]*Workload{delta})
	if err != nil {
		return nil, err
	}
	grows := false
	for _, v := range held.amounts() {
		if v > 0 {
			grows = true
		}
	}
	params, err := wl.EngineParams()
	if err != nil {
		return nil, err
	}
	params.VolumeChanged = volumesMoved(old, wl)
	return &ReallocResult{Engine: params, Delta: delta, Workload: wl, Grows: grows}, nil
}

// rekeyPlan carries a plan through a realloc that moves nothing: each
// binding's entry, found by the parsed binding, keyed by the binding's own
// stored form (an upstream record may spell its flags otherwise).
func rekeyPlan(p VolumePlan, bindings []*VolumeBinding) VolumePlan {
	index := planIndex(p)
	out := VolumePlan{}
	for _, b := range bindings {
		if devs, ok := index[b.identity()]; ok {
			c := make(map[string]int64, len(devs))
			for d, v := range devs {
				c[d] = v
			}
			out[b.String()] = c
		}
	}
	return out
}

// mergeRequest applies a realloc request's deltas to a workload.
func mergeRequest(old *Workload, req *WorkloadRequest) (*WorkloadRequest, error) {
	reqs, removed, err := mergeBindings(old.VolumesRequest, req.Request)
	if err != nil {
		return nil, err
	}
	oldLimits := old.VolumesLimit
	if len(oldLimits) == 0 {
		oldLimits = cloneBindings(old.VolumesRequest)
	}
	lims, _, err := mergeBindings(oldLimits, req.Limit)
	if err != nil {
		return nil, err
	}
	next := &WorkloadRequest{Request: reqs, Limit: make([]*VolumeBinding, len(reqs))}
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return nil, errInvalid("%v", err)
		}
		for _, l := range lims {
			if l.identity() == r.identity() && !removed[l.identity()] {
				c := *l
				next.Limit[i] = &c
			}
		}
		if next.Limit[i] == nil {
			c := *r
			next.Limit[i] = &c
		}
		raiseLimit(r, next.Limit[i])
	}
	if err := oneMountPerDestination(next.Request, nil); err != nil {
		return nil, err
	}
	flatHeld := max(0, satAdd(old.StorageRequest, -sizeOf(old.VolumesRequest)))
	flatReq := flatHeld + req.FlatRequest
	flatLim := max(0, satAdd(old.StorageLimit, -sizeOf(oldLimits))) + req.FlatLimit
	if flatReq < 0 {
		return nil, errInvalid("storage request would go below zero: the workload holds %s (%d bytes) besides its volumes, the request takes %s (%d bytes)",
			Human(flatHeld), flatHeld, Human(-req.FlatRequest), -req.FlatRequest)
	}
	next.FlatRequest, next.FlatLimit = flatReq, max(flatLim, flatReq)
	if err := next.total(); err != nil {
		return nil, err
	}
	return next, nil
}

// sizeOf is the bindings' total size (saturating: a stored workload may
// list any number of them).
func sizeOf(bs []*VolumeBinding) int64 {
	var t int64
	for _, b := range bs {
		t = satAdd(t, b.Size)
	}
	return t
}

// mergeBindings adds deltas to bindings of the same source, destination
// and flags, appends new ones, and drops those a delta shrank to nothing.
func mergeBindings(base, deltas []*VolumeBinding) ([]*VolumeBinding, map[identity]bool, error) {
	out := cloneBindings(base)
	removed := map[identity]bool{}
	for _, d := range deltas {
		i := slices.IndexFunc(out, func(b *VolumeBinding) bool { return b.identity() == d.identity() })
		if i < 0 {
			if d.Size < 0 || !d.Quota.Covers(Quota{}) {
				return nil, nil, errInvalid("volume %s: the workload has no such binding to shrink", d)
			}
			c := *d
			out = append(out, &c)
			continue
		}
		b := out[i]
		had := b.Size != 0 || !b.Quota.IsZero()
		held := b.Quota
		b.Size += d.Size
		b.Quota = b.Quota.Plus(d.Quota)
		if b.Size < 0 {
			return nil, nil, errInvalid("volume %s:%s would shrink below zero (by %d bytes)", b.Source, b.Destination, -b.Size)
		}
		for qi, q := range b.Quota {
			if q < 0 {
				return nil, nil, errInvalid("volume %s:%s %s would go below zero: %d %s", b.Source, b.Destination, QuotaNames[qi], held[qi], signed(d.Quota[qi]))
			}
		}
		if had && b.Size == 0 && b.Quota.IsZero() {
			removed[b.identity()] = true
			out = slices.Delete(out, i, i+1)
		}
	}
	return out, removed, nil
}

// replan places a workload's merged bindings, keeping affinity with its
// current plan. A monopoly group stays on its device, re-split among the
// group after the workload's other bindings on that device have their
// size.
func (n *Node) replan(ctx context.Context, old *Workload, next *WorkloadRequest) (*Workload, error) {
	oldHeld, err := sumWorkloads([]*Workload{old})
	if err != nil {
		return nil, err
	}
	// The node as it would be without this workload.
	base := n.Usage.amounts()
	for k, v := range oldHeld.amounts() {
		base[k] = max(0, base[k]-v)
	}
	without := resourceFromAmounts(base, &n.Capacity)
	h := NewHost(&n.Capacity, &without)
	s := h.state()
	devIndex := map[string]int{}
	for i, d := range h.Devices {
		devIndex[d.Name] = i
	}
	placed := map[identity]string{}
	for id, devs := range planIndex(old.VolumePlanRequest) {
		for dev := range devs {
			if _, known := devIndex[dev]; known {
				placed[id] = dev
			}
		}
	}

	bs := next.Request
	plan := Plan{Device: make([]string, len(bs)), Size: make([]int64, len(bs)), Disk: make([]int, len(bs))}
	for i := range plan.Disk {
		plan.Disk[i] = -1
	}
	d, err := newDemand(bs, &n.Capacity)
	if err != nil {
		return nil, uncovered(err)
	}
	var afresh []int
	touched := map[int]bool{}

	// The monopoly group stays whole where any of its bindings was.
	monoDev := -1
	for _, bi := range d.mono {
		if dev, ok := placed[bs[bi].identity()]; ok {
			monoDev = devIndex[dev]
			break
		}
	}
	if monoDev >= 0 {
		dev := &h.Devices[monoDev]
		// the workload's other bindings kept on the device take their size
		// first; the group splits the rest.
		var others int64
		for _, bi := range slices.Concat(d.normal, d.unlimited) {
			if placed[bs[bi].identity()] == dev.Name {
				others += bs[bi].Size
			}
		}
		room := s.free[monoDev] - others
		if room < d.monoTotal {
			return nil, types.Errorf(types.ResourceExhausted, "monopoly volumes of %s and the workload's other volumes of %s do not fit their device %s (%s, %d bytes)",
				Human(d.monoTotal), Human(others), dev.Name, Human(s.free[monoDev]), s.free[monoDev])
		}
		if !s.ioFits(monoDev, d.monoQuota) {
			return nil, types.Errorf(types.ResourceExhausted, "disk quota left for device %s does not cover %s", dev.Name, fmtQuota(d.monoQuota))
		}
		shares := split(room, d, d.mono)
		s.free[monoDev] = others
		s.chargeIO(monoDev, d.monoQuota)
		touched[monoDev] = true
		for j, bi := range d.mono {
			plan.Device[bi], plan.Size[bi], plan.Disk[bi] = dev.Name, shares[j], dev.Disk
		}
	} else {
		afresh = append(afresh, d.mono...)
	}

	for _, bi := range slices.Concat(d.normal, d.unlimited) {
		b := bs[bi]
		dev, ok := placed[b.identity()]
		if !ok {
			afresh = append(afresh, bi)
			continue
		}
		i := devIndex[dev]
		if s.free[i] < b.Size {
			return nil, types.Errorf(types.ResourceExhausted, "volume %s:%s cannot grow to %s on %s: %s free (%d bytes)", b.Source, b.Destination, Human(b.Size), dev, Human(s.free[i]), s.free[i])
		}
		if !s.ioFits(i, b.Quota) {
			return nil, types.Errorf(types.ResourceExhausted, "volume %s:%s: the disk of %s has not %s of IO quota left", b.Source, b.Destination, dev, fmtQuota(b.Quota))
		}
		s.free[i] -= b.Size
		s.chargeIO(i, b.Quota)
		touched[i] = true
		plan.Device[bi], plan.Size[bi], plan.Disk[bi] = dev, b.Size, h.Devices[i].Disk
	}

	for j, bi := range d.mounts {
		disk := d.mountDisk[j]
		if !s.io[disk].Covers(bs[bi].Quota) {
			return nil, types.Errorf(types.ResourceExhausted, "volume %s: disk %s has %s of IO quota left", bs[bi], n.Capacity.Disks[disk].Device, quotaLeft(s.io[disk], bs[bi].Quota))
		}
		s.io[disk] = s.io[disk].Minus(bs[bi].Quota)
		plan.Disk[bi] = disk
	}

	if len(afresh) > 0 {
		rest := &Host{Devices: slices.Clone(h.Devices), Disks: slices.Clone(s.io), DiskNames: h.DiskNames}
		for i := range rest.Devices {
			if touched[i] {
				rest.Devices[i].Unused = false // this workload keeps using it
			}
			rest.Devices[i].Free = s.free[i]
		}
		sub := make([]*VolumeBinding, len(afresh))
		for j, bi := range afresh {
			sub[j] = bs[bi]
		}
		plans, short, err := Schedule(ctx, rest, &n.Capacity, sub, 1, 1)
		if err != nil {
			return nil, uncovered(err)
		}
		if len(plans) == 0 {
			why := ""
			if short != nil {
				why = ": " + short.Reason
			}
			return nil, types.Errorf(types.ResourceExhausted, "no room on the node for %s%s", describe(sub), why)
		}
		for j, bi := range afresh {
			plan.Device[bi], plan.Size[bi], plan.Disk[bi] = plans[0].Device[j], plans[0].Size[j], plans[0].Disk[j]
		}
	}
	return n.workloadOf(next, plan), nil
}

func describe(bs []*VolumeBinding) string {
	s := ""
	for i, b := range bs {
		if i > 0 {
			s += ", "
		}
		s += b.String()
	}
	return s
}

func clonePlan(p VolumePlan) VolumePlan {
	out := VolumePlan{}
	for k, devs := range p {
		c := map[string]int64{}
		for d, v := range devs {
			c[d] = v
		}
		out[k] = c
	}
	return out
}

// diffWorkloads is the change from old to next in stored workload form:
// plan bytes per binding and device, storage, disk quotas.
func diffWorkloads(old, next *Workload) *Workload {
	return &Workload{
		VolumesRequest:    []*VolumeBinding{},
		VolumesLimit:      []*VolumeBinding{},
		VolumePlanRequest: diffPlans(old.VolumePlanRequest, next.VolumePlanRequest),
		VolumePlanLimit:   diffPlans(old.VolumePlanLimit, next.VolumePlanLimit),
		StorageRequest:    next.StorageRequest - old.StorageRequest,
		StorageLimit:      next.StorageLimit - old.StorageLimit,
		DisksRequest:      diffDisks(old.DisksRequest, next.DisksRequest),
		DisksLimit:        diffDisks(old.DisksLimit, next.DisksLimit),
		ZeroByte:          diffZeroByte(old, next),
	}
}

// diffZeroByte is the change of the bindings charged no bytes per device;
// never nil, so the delta is read as a delta of them.
func diffZeroByte(old, next *Workload) map[string]int64 {
	out := map[string]int64{}
	count := func(p VolumePlan, sign int64) {
		for _, devs := range p {
			for dev, v := range devs {
				if v == 0 {
					out[dev] += sign
				}
			}
		}
	}
	count(next.VolumePlanRequest, 1)
	count(old.VolumePlanRequest, -1)
	for dev, v := range out {
		if v == 0 {
			delete(out, dev)
		}
	}
	return out
}

func diffPlans(old, next VolumePlan) VolumePlan {
	out := VolumePlan{}
	add := func(p VolumePlan, sign int64) {
		for key, devs := range p {
			for dev, v := range devs {
				if out[key] == nil {
					out[key] = map[string]int64{}
				}
				out[key][dev] = satAdd(out[key][dev], sign*v)
			}
		}
	}
	add(next, 1)
	add(old, -1)
	for key, devs := range out {
		for dev, v := range devs {
			if v == 0 {
				delete(devs, dev)
			}
		}
		if len(devs) == 0 {
			delete(out, key)
		}
	}
	return out
}

func diffDisks(old, next []Disk) []Disk {
	var out []Disk
	find := func(dev string) *Disk {
		for i := range out {
			if out[i].Device == dev {
				return &out[i]
			}
		}
		return nil
	}
	add := func(ds []Disk, sign int64) {
		for _, d := range ds {
			cur := find(d.Device)
			if cur == nil {
				out = append(out, Disk{Device: d.Device, Mounts: slices.Clone(d.Mounts)})
				cur = &out[len(out)-1]
			}
			q := d.Quota()
			for i := range q {
				q[i] *= sign
			}
			cur.SetQuota(cur.Quota().Plus(q))
		}
	}
	add(next, 1)
	add(old, -1)
	out = slices.DeleteFunc(out, func(d Disk) bool { return d.Quota().IsZero() })
	if out == nil {
		out = []Disk{}
	}
	return out
}

// String describes a workload briefly, for error messages.
func (w *Workload) String() string {
	return fmt.Sprintf("workload of %d volumes, %d bytes", len(w.VolumesRequest), w.StorageRequest)
}

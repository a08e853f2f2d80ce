package storage

import (
	"context"
	"slices"
	"sort"

	"github.com/google/btree"

	"github.com/eru-extend/resources/types"
)

// This file is the scheduler: pure functions from a host's free space and
// IO quota and a workload's bindings to placement plans. It follows the
// seed's "How a plan is built":
//
//  1. bindings are split by kind and ordered by size (ties by full form);
//  2. normal bindings go best-fit onto used devices (the least free space
//     that holds them), plan after plan until one fails or the limit is
//     reached;
//  3. each workload's monopoly bindings take one unused device, the smallest
//     that holds them, and split it in proportion to their sizes, the
//     rounding remainder going to the first;
//  4. while monopoly capacity exceeds normal capacity, unused devices are
//     converted to used ones, smallest first among those that hold the
//     smallest normal binding (a device too small for any stays whole for
//     monopoly groups), and the last pass counts;
//  5. unlimited bindings go to the device with the most space left;
//  6. mount bindings are not placed; their IO quota is charged to the disk
//     covering their source.
//
// IO quota is checked and charged against what each disk has left after the
// node's usage and every earlier binding of the plans being built.
//
// Cost: the number of conversions is found by bisection, each probe a
// packing of at most limit plans; normal bindings find their device in an
// ordered tree per disk, monopoly groups with a cursor over the unused
// devices. A search is O((devices + plans·bindings·log devices) · log
// devices) and stops with deadline_exceeded when its context is done.

// Host is the scheduler's view of a node: each volume device with its free
// space, and each disk with the IO quota left.
type Host struct {
	Devices []Device
	Disks   []Quota // quota left per disk, indexed like the node's disks
	// DiskNames are the disks' devices, for messages.
	DiskNames []string
}

// Device is one volume device as the scheduler sees it.
type Device struct {
	Name   string
	Free   int64
	Unused bool // nothing is placed on it: it is offered whole
	Disk   int  // the covering disk's index, -1 when none covers it
}

// NewHost builds the scheduler's view of capacity minus usage.
func NewHost(capacity, usage *Resource) *Host {
	h := &Host{Disks: make([]Quota, len(capacity.Disks))}
	for _, d := range capacity.Disks {
		h.DiskNames = append(h.DiskNames, d.Device)
	}
	for i, d := range capacity.Disks {
		left := d.Quota()
		if u := usage.disk(d.Device); u != nil {
			left = left.Minus(u.Quota())
		}
		h.Disks[i] = left
	}
	for _, name := range capacity.sortedDevices() {
		used := usage.Volumes[name]
		h.Devices = append(h.Devices, Device{
			Name: name,
			Free: capacity.Volumes[name] - used,
			// a device hosting a binding charged no bytes is not unused:
			// no monopoly group may take it whole.
			Unused: used == 0 && usage.ZeroByte[name] == 0,
			Disk:   capacity.coveringDisk(name),
		})
	}
	return h
}

// Plan is where one workload's bindings go, aligned with the bindings the
// scheduler was given: the device (empty for a mount binding), the bytes
// charged there, and the disk whose IO quota the binding is charged to (-1
// for none).
type Plan struct {
	Device []string
	Size   []int64
	Disk   []int
}

// demand is a workload's bindings split by kind.
type demand struct {
	bindings  []*VolumeBinding
	normal    []int // indices into bindings, ordered by size
	mono      []int
	unlimited []int
	mounts    []int // mount bindings with an IO quota
	mountDisk []int // their covering disks
	monoTotal int64
	monoQuota Quota
	minNormal int64
	io        bool // some binding asks for IO quota
}

// errUncovered is returned for a mount binding asking IO quota on a path no
// disk covers.
type errUncovered struct{ binding *VolumeBinding }

func (e errUncovered) Error() string {
	return "volume " + e.binding.String() + " asks for IO quota but no disk's mounts cover " + e.binding.Source
}

func newDemand(bindings []*VolumeBinding, capacity *Resource) (*demand, error) {
	d := &demand{bindings: bindings}
	order := make([]*VolumeBinding, len(bindings))
	copy(order, bindings)
	sortBindings(order)
	index := make(map[*VolumeBinding]int, len(bindings))
	for i, b := range bindings {
		index[b] = i
	}
	for _, b := range order {
		i := index[b]
		if !b.Quota.IsZero() {
			d.io = true
		}
		switch b.Kind() {
		case Normal:
			if len(d.normal) == 0 || b.Size < d.minNormal {
				d.minNormal = b.Size
			}
			d.normal = append(d.normal, i)
		case Monopoly:
			d.mono = append(d.mono, i)
			d.monoTotal += b.Size
			d.monoQuota = d.monoQuota.Plus(b.Quota)
		case Unlimited:
			d.unlimited = append(d.unlimited, i)
		case Mount:
			if b.Quota.IsZero() {
				continue
			}
			disk := capacity.coveringDisk(b.Source)
			if disk < 0 {
				return nil, errUncovered{b}
			}
			d.mounts = append(d.mounts, i)
			d.mountDisk = append(d.mountDisk, disk)
		}
	}
	return d, nil
}

// needsDevices reports whether the workload places anything on a device.
func (d *demand) needsDevices() bool {
	return len(d.normal)+len(d.mono)+len(d.unlimited) > 0
}

// state is the scheduler's scratch copy of a host during one pass.
type state struct {
	host *Host
	free []int64
	io   []Quota
}

func (h *Host) state() *state {
	s := &state{host: h, free: make([]int64, len(h.Devices)), io: make([]Quota, len(h.Disks))}
	for i, d := range h.Devices {
		s.free[i] = d.Free
	}
	copy(s.io, h.Disks)
	return s
}

// ioFits reports whether device i's covering disk has q left; a device no
// disk covers takes only bindings without IO quota.
func (s *state) ioFits(i int, q Quota) bool {
	disk := s.host.Devices[i].Disk
	if disk < 0 {
		return q.IsZero()
	}
	return s.io[disk].Covers(q)
}

func (s *state) chargeIO(i int, q Quota) {
	if disk := s.host.Devices[i].Disk; disk >= 0 {
		s.io[disk] = s.io[disk].Minus(q)
	}
}

// classes splits the devices into used and unused, each ordered by free
// space ascending, ties by name.
func (h *Host) classes() (used, unused []int) {
	for i := range h.Devices {
		if h.Devices[i].Unused {
			unused = append(unused, i)
		} else {
			used = append(used, i)
		}
	}
	byFree := func(list []int) {
		sort.SliceStable(list, func(a, b int) bool {
			da, db := &h.Devices[list[a]], &h.Devices[list[b]]
			if da.Free != db.Free {
				return da.Free < db.Free
			}
			return da.Name < db.Name
		})
	}
	byFree(used)
	byFree(unused)
	return used, unused
}

// probe counts the search's steps and stops it when its context is done.
type probe struct {
	ctx   context.Context
	steps int
}

func newProbe(ctx context.Context) *probe { return &probe{ctx: ctx} }

// step is called once per binding placed; every 1024 steps it checks the
// deadline.
func (p *probe) step() error {
	p.steps++
	if p.ctx == nil || p.steps&1023 != 0 {
		return nil
	}
	return p.done()
}

// done reports deadline_exceeded once the context is done.
func (p *probe) done() error {
	if p.ctx == nil {
		return nil
	}
	if err := p.ctx.Err(); err != nil {
		return types.Errorf(types.DeadlineExceeded, "the plan search stopped at the call's deadline (%v); nothing was written", err)
	}
	return nil
}

// devItem orders devices by free space, ties by name (devices are indexed
// in name order).
type devItem struct {
	free int64
	idx  int
}

func lessDev(a, b devItem) bool {
	if a.free != b.free {
		return a.free < b.free
	}
	return a.idx < b.idx
}

// normalPacker places normal bindings best-fit on a set of used devices:
// one ordered tree of devices per covering disk, so a placement costs a
// lookup per disk whose quota covers the binding.
type normalPacker struct {
	s      *state
	groups map[int]*btree.BTreeG[devItem]
	disks  []int // group keys in order; -1 is the devices no disk covers
}

func newNormalPacker(s *state, devices []int) *normalPacker {
	p := &normalPacker{s: s, groups: map[int]*btree.BTreeG[devItem]{}}
	for _, i := range devices {
		disk := s.host.Devices[i].Disk
		t := p.groups[disk]
		if t == nil {
			t = btree.NewG(8, lessDev)
			p.groups[disk] = t
			p.disks = append(p.disks, disk)
		}
		t.ReplaceOrInsert(devItem{s.free[i], i})
	}
	sort.Ints(p.disks)
	return p
}

// place puts binding b on the device with the least free space that holds
// it and whose disk has its IO quota left, and returns that device or -1.
func (p *normalPacker) place(b *VolumeBinding) int {
	best, bestDisk := devItem{idx: -1}, 0
	for _, disk := range p.disks {
		if disk < 0 && !b.Quota.IsZero() || disk >= 0 && !p.s.io[disk].Covers(b.Quota) {
			continue
		}
		p.groups[disk].AscendGreaterOrEqual(devItem{b.Size, -1}, func(it devItem) bool {
			if best.idx < 0 || lessDev(it, best) {
				best, bestDisk = it, disk
			}
			return false
		})
	}
	if best.idx < 0 {
		return -1
	}
	t := p.groups[bestDisk]
	t.Delete(best)
	p.s.free[best.idx] -= b.Size
	p.s.chargeIO(best.idx, b.Quota)
	t.ReplaceOrInsert(devItem{p.s.free[best.idx], best.idx})
	return best.idx
}

// mostRoom is the largest free space among the packer's devices, and its
// device (-1 when it has none).
func (p *normalPacker) mostRoom() (int64, int) {
	best := devItem{idx: -1}
	for _, disk := range p.disks {
		if it, ok := p.groups[disk].Max(); ok && (best.idx < 0 || lessDev(best, it)) {
			best = it
		}
	}
	return best.free, best.idx
}

// monoPicker hands out unused devices to monopoly groups, smallest first.
// A device passed over stays passed over: unused devices do not grow, and
// disks' quota only shrinks during a search.
type monoPicker struct {
	s       *state
	devices []int // ordered by free space ascending
	next    int
}

func newMonoPicker(s *state, devices []int) *monoPicker {
	return &monoPicker{s: s, devices: devices}
}

// pick takes the smallest untaken device holding total bytes whose disk has
// the group's IO quota left, charges it, and returns it or -1.
func (m *monoPicker) pick(total int64, q Quota) int {
	for m.next < len(m.devices) {
		i := m.devices[m.next]
		m.next++
		if m.s.free[i] < total || !m.s.ioFits(i, q) {
			continue
		}
		m.s.chargeIO(i, q)
		return i
	}
	return -1
}

// countNormal counts how many workloads' normal bindings fit on devices.
func countNormal(pr *probe, h *Host, d *demand, devices []int, limit int) (int, error) {
	if len(d.normal) == 0 {
		return limit, nil
	}
	p := newNormalPacker(h.state(), devices)
	for plans := 0; plans < limit; plans++ {
		for _, bi := range d.normal {
			if err := pr.step(); err != nil {
				return 0, err
			}
			if p.place(d.bindings[bi]) < 0 {
				return plans, nil
			}
		}
	}
	return limit, nil
}

// countMono counts how many workloads' monopoly groups fit on devices.
func countMono(h *Host, d *demand, devices []int, limit int) int {
	if len(d.mono) == 0 {
		return limit
	}
	m := newMonoPicker(h.state(), devices)
	for plans := 0; plans < limit; plans++ {
		if m.pick(d.monoTotal, d.monoQuota) < 0 {
			return plans
		}
	}
	return limit
}

// layout is the host's devices as the conversion sees them.
type layout struct {
	h    *Host
	used []int // used devices, by free space
	// conv are the unused devices that hold the smallest normal binding, in
	// the order they are converted (smallest first); keep are those too
	// small for any, which stay whole for monopoly groups.
	conv, keep []int
}

func newLayout(h *Host, d *demand) *layout {
	used, unused := h.classes()
	l := &layout{h: h, used: used}
	for _, i := range unused {
		if len(d.normal) > 0 && h.Devices[i].Free >= d.minNormal {
			l.conv = append(l.conv, i)
		} else {
			l.keep = append(l.keep, i)
		}
	}
	return l
}

// at is the devices normal plans use and those monopoly groups may take
// when the first k devices of conv are converted.
func (l *layout) at(k int) (used, unused []int) {
	used = slices.Concat(l.used, l.conv[:k])
	rest := l.conv[k:]
	unused = make([]int, 0, len(rest)+len(l.keep))
	i, j := 0, 0
	for i < len(rest) || j < len(l.keep) {
		if j == len(l.keep) || i < len(rest) && lessDev(l.item(rest[i]), l.item(l.keep[j])) {
			unused = append(unused, rest[i])
			i++
		} else {
			unused = append(unused, l.keep[j])
			j++
		}
	}
	return used, unused
}

func (l *layout) item(i int) devItem { return devItem{l.h.Devices[i].Free, i} }

// point is how many devices are converted for a search of limit plans: the
// fewest after which monopoly capacity no longer exceeds normal capacity
// (all of conv when it always does). Monopoly capacity only falls and
// normal capacity only grows as devices are converted, so the point is
// found by bisection.
func (l *layout) point(pr *probe, d *demand, limit int) (int, error) {
	var planBytes int64
	for _, bi := range d.normal {
		planBytes += d.bindings[bi].Size
	}
	// free space of the used devices plus the first k converted, for a
	// bound that spares the packing when it already decides.
	prefix := make([]int64, len(l.conv)+1)
	var base int64
	for _, i := range l.used {
		base = satAdd(base, l.h.Devices[i].Free)
	}
	prefix[0] = base
	for k, i := range l.conv {
		prefix[k+1] = satAdd(prefix[k], l.h.Devices[i].Free)
	}
	stops := func(k int) (bool, error) {
		used, unused := l.at(k)
		m := countMono(l.h, d, unused, limit)
		if planBytes > 0 && int64(m) > prefix[k]/planBytes {
			return false, nil
		}
		n, err := countNormal(pr, l.h, d, used, limit)
		return m <= n, err
	}
	lo, hi := 0, len(l.conv)
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := stops(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// candidates are the conversion counts a search tries, from the point k
// up. Without IO quota the passes are independent and k is exact. With IO
// quota, normal and monopoly bindings share disks, which the point does not
// weigh: a group may take a small device whose disk the normal bindings
// then lack. So opening further devices may make more plans: k+1, k+2,
// k+4, ... and all of conv are tried too. Nor is the point itself the
// first k where monopoly capacity stops exceeding normal capacity: a
// smaller normal binding may take a newly opened device's disk quota that a
// larger one needed, so normal capacity can fall as devices open and the
// bisection overshoot the crossing. So k-1, k-2, k-4, ... and 0 are tried
// as well; the best counts, the fewest devices opened first.
func (l *layout) candidates(d *demand, k int) []int {
	out := []int{k}
	if !d.io {
		return out
	}
	for step := 1; k+step < len(l.conv); step *= 2 {
		out = append(out, k+step)
	}
	for step := 1; k-step > 0; step *= 2 {
		out = append(out, k-step)
	}
	if k > 0 {
		out = append(out, 0)
	}
	if k < len(l.conv) {
		out = append(out, len(l.conv))
	}
	return out
}

// Count returns how many workloads with these bindings fit on the host, at
// most limit: the capacity query, weighing the host's full potential. most
// is the limit a deploy searches with (scheduler.max_deploy_count, see
// Schedule): with IO quota the conversion points are not exact (see
// candidates), and a deploy of one more than the count searches from its
// own count's point, so the count is raised while that search finds its
// plans. A capacity of N then means a deploy of N+1 fails, with IO quota
// as without.
func Count(ctx context.Context, h *Host, capacity *Resource, bindings []*VolumeBinding, limit, most int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	d, err := newDemand(bindings, capacity)
	if err != nil {
		return 0, err
	}
	if d.needsDevices() && len(h.Devices) == 0 {
		return 0, nil
	}
	pr := newProbe(ctx)
	// exact holds the conversion counts already built without reaching
	// their limit: their count is all they make, never more than made,
	// so the raising searches skip them.
	exact := map[int]bool{}
	r, err := searchSkipping(pr, h, d, limit, limit, false, exact)
	if err != nil {
		return 0, err
	}
	made := r.made
	for d.io && made < limit {
		next, err := searchSkipping(pr, h, d, made+1, max(made+1, most), false, exact)
		if err != nil {
			return 0, err
		}
		if next.made <= made {
			break
		}
		made = next.made
	}
	return made, nil
}

// Shortfall explains why a search made fewer plans than asked: the binding
// that could not be placed in the next plan and the limit that stopped it.
type Shortfall struct {
	Binding *VolumeBinding
	Reason  string
}

// Schedule returns count plans for workloads with these bindings, or as
// many as fit when fewer do, with what stopped the next one. It opens
// unused devices only as far as count needs, keeping the rest whole for
// later monopoly requests; most is the capacity query's limit
// (scheduler.max_deploy_count), so that a deploy of the count the query
// answered finds its plans.
func Schedule(ctx context.Context, h *Host, capacity *Resource, bindings []*VolumeBinding, count, most int) ([]Plan, *Shortfall, error) {
	if count <= 0 {
		return nil, nil, nil
	}
	d, err := newDemand(bindings, capacity)
	if err != nil {
		return nil, nil, err
	}
	if d.needsDevices() && len(h.Devices) == 0 {
		return nil, &Shortfall{Binding: firstPlaced(d), Reason: "the node has no volumes"}, nil
	}
	r, err := search(newProbe(ctx), h, d, count, max(count, most), true)
	if err != nil {
		return nil, nil, err
	}
	if r.made < count {
		return r.plans, r.short, nil
	}
	return r.plans, nil, nil
}

func firstPlaced(d *demand) *VolumeBinding {
	for _, list := range [][]int{d.normal, d.mono, d.unlimited} {
		if len(list) > 0 {
			return d.bindings[list[0]]
		}
	}
	return nil
}

// result is a search's outcome.
type result struct {
	plans []Plan
	made  int
	short *Shortfall
}

// search builds up to limit plans, trying the conversion points of limit
// and of most (the larger limit of a capacity query) and stopping at the
// first that makes limit plans; else the best counts.
func search(pr *probe, h *Host, d *demand, limit, most int, keep bool) (result, error) {
	return searchSkipping(pr, h, d, limit, most, keep, nil)
}

// searchSkipping is search that builds no conversion count in exact, and
// adds to exact (when not nil) each count it built that made fewer plans
// than limit: a build makes its plans one after another whatever the
// limit, so such a count makes that many and no more at any limit.
func searchSkipping(pr *probe, h *Host, d *demand, limit, most int, keep bool, exact map[int]bool) (result, error) {
	l := newLayout(h, d)
	k, err := l.point(pr, d, limit)
	if err != nil {
		return result{}, err
	}
	cands := l.candidates(d, k)
	if most > limit {
		km, err := l.point(pr, d, most)
		if err != nil {
			return result{}, err
		}
		cands = append(cands, l.candidates(d, km)...)
	}
	slices.Sort(cands)
	cands = slices.Compact(cands)
	var best result
	first := true
	for _, k := range cands {
		if exact[k] {
			continue
		}
		used, unused := l.at(k)
		r, err := build(pr, h, d, used, unused, limit, keep)
		if err != nil {
			return result{}, err
		}
		if exact != nil && r.made < limit {
			exact[k] = true
		}
		if first || r.made > best.made {
			best, first = r, false
		}
		if best.made >= limit {
			break
		}
	}
	return best, nil
}

// build makes up to limit plans on the chosen device classes, charging IO
// quota across all bindings of all plans, and returns them, how many it
// made and, when short, what stopped the next. With keep false it only
// counts.
func build(pr *probe, h *Host, d *demand, used, unused []int, limit int, keep bool) (result, error) {
	s := h.state()
	packer := newNormalPacker(s, used)
	picker := newMonoPicker(s, unused)
	var r result
	n := len(d.bindings)
	for r.made < limit && r.short == nil {
		var p Plan
		if keep {
			p = Plan{Device: make([]string, n), Size: make([]int64, n), Disk: make([]int, n)}
			for i := range p.Disk {
				p.Disk[i] = -1
			}
		}
		for _, bi := range d.normal {
			if err := pr.step(); err != nil {
				return result{}, err
			}
			b := d.bindings[bi]
			dev := packer.place(b)
			if dev < 0 {
				r.short = normalShort(h, s, packer, b)
				break
			}
			if keep {
				p.Device[bi], p.Size[bi], p.Disk[bi] = h.Devices[dev].Name, b.Size, h.Devices[dev].Disk
			}
		}
		if r.short == nil && len(d.mono) > 0 {
			if err := pr.step(); err != nil {
				return result{}, err
			}
			dev := picker.pick(d.monoTotal, d.monoQuota)
			if dev < 0 {
				r.short = monoShort(h, d, unused)
			} else {
				shares := split(s.free[dev], d, d.mono)
				s.free[dev] = 0
				if keep {
					for j, bi := range d.mono {
						p.Device[bi], p.Size[bi], p.Disk[bi] = h.Devices[dev].Name, shares[j], h.Devices[dev].Disk
					}
				}
			}
		}
		for j, bi := range d.mounts {
			if r.short != nil {
				break
			}
			disk, q := d.mountDisk[j], d.bindings[bi].Quota
			if !s.io[disk].Covers(q) {
				r.short = &Shortfall{Binding: d.bindings[bi], Reason: "disk " + h.diskName(disk) + " has " + quotaLeft(s.io[disk], q) + " of IO quota left"}
				break
			}
			s.io[disk] = s.io[disk].Minus(q)
			if keep {
				p.Disk[bi] = disk
			}
		}
		if r.short != nil {
			break
		}
		r.made++
		if keep {
			r.plans = append(r.plans, p)
		}
	}
	if keep && len(d.unlimited) > 0 && len(r.plans) > 0 {
		dev := mostFree(h, s)
		for _, p := range r.plans {
			for _, bi := range d.unlimited {
				p.Device[bi], p.Size[bi], p.Disk[bi] = h.Devices[dev].Name, 0, h.Devices[dev].Disk
			}
		}
	}
	return r, nil
}

// normalShort says why normal binding b found no device.
func normalShort(h *Host, s *state, p *normalPacker, b *VolumeBinding) *Shortfall {
	room, dev := p.mostRoom()
	if dev < 0 || room < b.Size {
		if len(h.Devices) == 0 {
			return &Shortfall{Binding: b, Reason: "the node has no volumes"}
		}
		best := mostFree(h, s)
		if s.free[best] < b.Size {
			return &Shortfall{Binding: b, Reason: "no volume has " + Human(b.Size) + " free: the most is " +
				Human(s.free[best]) + " on " + h.Devices[best].Name + " (" + itoa(s.free[best]) + " bytes)"}
		}
		used := "no used volume has " + Human(b.Size) + " free"
		if dev >= 0 {
			used += " (the most is " + Human(room) + " on " + h.Devices[dev].Name + ")"
		}
		return &Shortfall{Binding: b, Reason: used + " and the unused ones are kept whole for monopoly groups"}
	}
	// some device has the room: its disk lacks the quota.
	for _, disk := range p.disks {
		if t := p.groups[disk]; t != nil {
			if it, ok := t.Max(); ok && it.free >= b.Size {
				if disk < 0 {
					return &Shortfall{Binding: b, Reason: "the volumes with " + Human(b.Size) + " free (" + h.Devices[it.idx].Name + ") are on no disk, and it asks IO quota"}
				}
				return &Shortfall{Binding: b, Reason: "the volumes with " + Human(b.Size) + " free (" + h.Devices[it.idx].Name +
					") are on disk " + h.diskName(disk) + ", which has " + quotaLeft(s.io[disk], b.Quota) + " of IO quota left"}
			}
		}
	}
	return &Shortfall{Binding: b, Reason: "no volume with " + Human(b.Size) + " free has its IO quota left"}
}

func (h *Host) diskName(i int) string {
	if i >= 0 && i < len(h.DiskNames) {
		return h.DiskNames[i]
	}
	return "#" + itoa(int64(i))
}

// monoShort says why a monopoly group found no unused device.
func monoShort(h *Host, d *demand, unused []int) *Shortfall {
	b := d.bindings[d.mono[0]]
	var most int64 = -1
	name := ""
	for _, i := range unused {
		if h.Devices[i].Free > most {
			most, name = h.Devices[i].Free, h.Devices[i].Name
		}
	}
	switch {
	case most < 0:
		return &Shortfall{Binding: b, Reason: "its monopoly group (" + Human(d.monoTotal) + ") needs an unused volume and none is left"}
	case most < d.monoTotal:
		return &Shortfall{Binding: b, Reason: "its monopoly group needs an unused volume of " + Human(d.monoTotal) +
			": the largest is " + name + " with " + Human(most) + " (" + itoa(most) + " bytes)"}
	}
	fit := 0
	for _, i := range unused {
		if h.Devices[i].Free >= d.monoTotal {
			fit++
		}
	}
	reason := "its monopoly group needs an unused volume of " + Human(d.monoTotal) + ": the node has " + itoa(int64(fit)) +
		" (a volume hosting any binding is not unused), taken by the plans before it"
	if !d.monoQuota.IsZero() {
		reason += " or on disks without " + fmtQuota(d.monoQuota) + " of IO quota left"
	}
	return &Shortfall{Binding: b, Reason: reason}
}

// quotaLeft renders what a disk has left against what is asked.
func quotaLeft(left, asked Quota) string {
	return fmtQuota(left) + " (asked " + fmtQuota(asked) + ")"
}

// mostFree is the device with the most free space, ties by name.
func mostFree(h *Host, s *state) int {
	best := 0
	for i := 1; i < len(h.Devices); i++ {
		if s.free[i] > s.free[best] || (s.free[i] == s.free[best] && h.Devices[i].Name < h.Devices[best].Name) {
			best = i
		}
	}
	return best
}

// split divides a device of size bytes among a monopoly group (splitSizes).
func split(size int64, d *demand, group []int) []int64 {
	sizes := make([]int64, len(group))
	for j, bi := range group {
		sizes[j] = d.bindings[bi].Size
	}
	return splitSizes(size, sizes)
}

package storage

import (
	"container/heap"
	"sort"
)

// This file is the scheduler: pure functions from a host's free space and
// IO quota and a workload's bindings to placement plans. It follows the
// seed's "How a plan is built":
//
//  1. bindings are split by kind and ordered by size (ties by full form);
//  2. normal bindings go best-fit onto used devices, via a min-heap of free
//     space, plan after plan until one fails or the limit is reached;
//  3. each workload's monopoly bindings take one unused device, the smallest
//     that holds them, and split it in proportion to their sizes, the
//     rounding remainder going to the first;
//  4. while monopoly capacity exceeds normal capacity, unused devices are
//     converted to used ones, smallest first, and the last pass counts;
//  5. unlimited bindings go to the device with the most space left;
//  6. mount bindings are not placed; their IO quota is charged to the disk
//     covering their source.
//
// IO quota is checked and charged against what each disk has left after the
// node's usage and every earlier binding of the plans being built.

// Host is the scheduler's view of a node: each volume device with its free
// space, and each disk with the IO quota left.
type Host struct {
	Devices []Device
	Disks   []Quota // quota left per disk, indexed like the node's disks
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
			Name:   name,
			Free:   capacity.Volumes[name] - used,
			Unused: used == 0,
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

// freeHeap is a min-heap of devices by free space, ties by name.
type freeHeap struct {
	s    *state
	devs []int
}

func (f *freeHeap) Len() int { return len(f.devs) }
func (f *freeHeap) Less(a, b int) bool {
	ia, ib := f.devs[a], f.devs[b]
	if f.s.free[ia] != f.s.free[ib] {
		return f.s.free[ia] < f.s.free[ib]
	}
	return ia < ib // devices are indexed in name order
}
func (f *freeHeap) Swap(a, b int) { f.devs[a], f.devs[b] = f.devs[b], f.devs[a] }
func (f *freeHeap) Push(x any)    { f.devs = append(f.devs, x.(int)) }
func (f *freeHeap) Pop() any {
	last := f.devs[len(f.devs)-1]
	f.devs = f.devs[:len(f.devs)-1]
	return last
}

// normalPacker places normal bindings best-fit on a set of used devices.
type normalPacker struct {
	s       *state
	h       *freeHeap
	d       *demand
	skipped []int
}

func newNormalPacker(s *state, d *demand, devices []int) *normalPacker {
	h := &freeHeap{s: s, devs: append([]int(nil), devices...)}
	heap.Init(h)
	return &normalPacker{s: s, h: h, d: d}
}

// place puts binding b on the device with the least free space that holds
// it and whose disk has its IO quota left, and returns that device or -1.
func (p *normalPacker) place(b *VolumeBinding) int {
	p.skipped = p.skipped[:0]
	found := -1
	for p.h.Len() > 0 {
		i := heap.Pop(p.h).(int)
		if p.s.free[i] < p.d.minNormal {
			continue // too small for any normal binding from now on: drop it
		}
		if p.s.free[i] >= b.Size && p.s.ioFits(i, b.Quota) {
			found = i
			break
		}
		p.skipped = append(p.skipped, i)
	}
	for _, i := range p.skipped {
		heap.Push(p.h, i)
	}
	if found >= 0 {
		p.s.free[found] -= b.Size
		p.s.chargeIO(found, b.Quota)
		heap.Push(p.h, found)
	}
	return found
}

// monoPicker hands out unused devices to monopoly groups, smallest first.
type monoPicker struct {
	s       *state
	devices []int // ordered by free space ascending
	taken   []bool
}

func newMonoPicker(s *state, devices []int) *monoPicker {
	return &monoPicker{s: s, devices: devices, taken: make([]bool, len(devices))}
}

// pick takes the smallest untaken device holding total bytes whose disk has
// the group's IO quota left, charges it, and returns it or -1.
func (m *monoPicker) pick(total int64, q Quota) int {
	for j, i := range m.devices {
		if m.taken[j] || m.s.free[i] < total || !m.s.ioFits(i, q) {
			continue
		}
		m.taken[j] = true
		m.s.chargeIO(i, q)
		return i
	}
	return -1
}

// countNormal counts how many workloads' normal bindings fit on devices.
func countNormal(h *Host, d *demand, devices []int, limit int) int {
	if len(d.normal) == 0 {
		return limit
	}
	p := newNormalPacker(h.state(), d, devices)
	for plans := 0; plans < limit; plans++ {
		for _, bi := range d.normal {
			if p.place(d.bindings[bi]) < 0 {
				return plans
			}
		}
	}
	return limit
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

// convert decides how many unused devices (smallest first) become used:
// for as long as monopoly capacity exceeds normal capacity.
func convert(h *Host, d *demand, limit int) (used, unused []int) {
	used, unused = h.classes()
	var free int64 // the used devices' free space, for the bound below
	for _, i := range used {
		free += h.Devices[i].Free
	}
	var planBytes int64
	for _, bi := range d.normal {
		planBytes += d.bindings[bi].Size
	}
	k := 0
	for k < len(unused) {
		m := countMono(h, d, unused[k:], limit)
		// Each normal plan takes planBytes of the used devices' free
		// space, so free/planBytes bounds the normal count: a pass whose
		// bound is below the monopoly count converts on without packing.
		if planBytes == 0 || int64(m) <= free/planBytes {
			n := countNormal(h, d, append(used[:len(used):len(used)], unused[:k]...), limit)
			if m <= n {
				break
			}
		}
		free += h.Devices[unused[k]].Free
		k++
	}
	return append(used[:len(used):len(used)], unused[:k]...), unused[k:]
}

// Count returns how many workloads with these bindings fit on the host, at
// most limit: the capacity query, weighing the host's full potential.
func Count(h *Host, capacity *Resource, bindings []*VolumeBinding, limit int) (int, error) {
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
	if !d.io {
		// nothing shares a disk's quota: the passes' counts are exact.
		used, unused := convert(h, d, limit)
		return min(countNormal(h, d, used, limit), countMono(h, d, unused, limit)), nil
	}
	_, made := search(h, d, limit, false)
	return made, nil
}

// Schedule returns count plans for workloads with these bindings, or as
// many as fit when fewer do. It opens unused devices only as far as count
// needs, keeping the rest whole for later monopoly requests.
func Schedule(h *Host, capacity *Resource, bindings []*VolumeBinding, count int) ([]Plan, error) {
	if count <= 0 {
		return nil, nil
	}
	d, err := newDemand(bindings, capacity)
	if err != nil {
		return nil, err
	}
	if d.needsDevices() && len(h.Devices) == 0 {
		return nil, nil
	}
	plans, _ := search(h, d, count, true)
	return plans, nil
}

// search converts devices and builds up to limit plans.
//
// convert weighs each pass's IO quota on its own, not the quota normal and
// monopoly bindings share on one disk: a group may take a small unused
// device whose disk the normal bindings then lack. When that leaves the
// plans short, further devices are opened, smallest first, and the best
// pass counts; so a deploy of the count the capacity query answered (with
// a larger limit, and so as many conversions or more) finds its plans.
func search(h *Host, d *demand, limit int, keep bool) ([]Plan, int) {
	used, unused := convert(h, d, limit)
	plans, made := build(h, d, used, unused, limit, keep)
	if d.io && made < limit {
		all, spare := h.classes()
		for k := len(used) - len(all) + 1; k <= len(spare) && made < limit; k++ {
			if more, n := build(h, d, append(all[:len(all):len(all)], spare[:k]...), spare[k:], limit, keep); n > made {
				plans, made = more, n
			}
		}
	}
	return plans, made
}

// build makes up to limit plans on the chosen device classes, charging IO
// quota across all bindings of all plans, and returns them and how many it
// made. With keep false it only counts.
func build(h *Host, d *demand, used, unused []int, limit int, keep bool) ([]Plan, int) {
	s := h.state()
	packer := newNormalPacker(s, d, used)
	picker := newMonoPicker(s, unused)
	var plans []Plan
	made := 0
	n := len(d.bindings)
	for made < limit {
		var p Plan
		if keep {
			p = Plan{Device: make([]string, n), Size: make([]int64, n), Disk: make([]int, n)}
			for i := range p.Disk {
				p.Disk[i] = -1
			}
		}
		ok := true
		for _, bi := range d.normal {
			dev := packer.place(d.bindings[bi])
			if dev < 0 {
				ok = false
				break
			}
			if keep {
				p.Device[bi], p.Size[bi], p.Disk[bi] = h.Devices[dev].Name, d.bindings[bi].Size, h.Devices[dev].Disk
			}
		}
		if ok && len(d.mono) > 0 {
			dev := picker.pick(d.monoTotal, d.monoQuota)
			if dev < 0 {
				ok = false
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
			if !ok {
				break
			}
			disk, q := d.mountDisk[j], d.bindings[bi].Quota
			if !s.io[disk].Covers(q) {
				ok = false
				break
			}
			s.io[disk] = s.io[disk].Minus(q)
			if keep {
				p.Disk[bi] = disk
			}
		}
		if !ok {
			break
		}
		made++
		if keep {
			plans = append(plans, p)
		}
	}
	if keep && len(d.unlimited) > 0 && len(plans) > 0 {
		dev := mostFree(h, s)
		for _, p := range plans {
			for _, bi := range d.unlimited {
				p.Device[bi], p.Size[bi], p.Disk[bi] = h.Devices[dev].Name, 0, h.Devices[dev].Disk
			}
		}
	}
	return plans, made
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

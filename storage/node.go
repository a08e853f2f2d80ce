package storage

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/types"
)

// Disk is a physical device: the mount points it serves and its IO quota.
// The JSON key spellings are what core has stored.
type Disk struct {
	Device    string   `json:"device"`
	Mounts    []string `json:"mounts"`
	ReadIOPS  int64    `json:"read_IOPS"`
	WriteIOPS int64    `json:"write_IOPS"`
	ReadBPS   int64    `json:"read_bps"`
	WriteBPS  int64    `json:"write_bps"`
}

// Quota returns the disk's four quotas.
func (d *Disk) Quota() Quota { return Quota{d.ReadIOPS, d.WriteIOPS, d.ReadBPS, d.WriteBPS} }

// SetQuota replaces the disk's four quotas.
func (d *Disk) SetQuota(q Quota) {
	d.ReadIOPS, d.WriteIOPS, d.ReadBPS, d.WriteBPS = q[0], q[1], q[2], q[3]
}

// Resource is a node's capacity or usage in stored form: volume sizes by
// device, disks with their quotas, and the flat storage total.
type Resource struct {
	Volumes map[string]int64 `json:"volumes"`
	Disks   []Disk           `json:"disks"`
	Storage int64            `json:"storage"`
	// ZeroByte counts, per volume device, the workload bindings placed
	// there that are charged no bytes (unlimited ones): such a device is
	// not unused, though its usage in bytes is 0. Usage only; absent in
	// records written before it existed, which read as holding none.
	ZeroByte map[string]int64 `json:"zero_byte_bindings,omitempty"`
	// Pools and DefaultPool are the shared storage pools the node declares
	// (capacity only, docs/pools.md); absent when none, so records without
	// pools stay as they were.
	Pools       map[string]pool.Declaration `json:"pools,omitempty"`
	DefaultPool string                      `json:"default_pool,omitempty"`
	// PoolObjects are the pool objects whose records this node keeps (usage
	// only); their bytes are not part of Storage.
	PoolObjects pool.Objects `json:"pool_objects,omitempty"`
}

// ZeroByteKey is the key of Resource.ZeroByte in the stored form.
const ZeroByteKey = "zero_byte_bindings"

// Node is one node's record: what it offers and what workloads hold.
type Node struct {
	Capacity Resource `json:"capacity"`
	Usage    Resource `json:"usage"`
	// unknown marks the empty record of a node storage has never seen.
	unknown bool
	// pending is the pool part of a usage write, admitted in the write's
	// transaction once the pool records are read (Rules.Link).
	pending *poolChange
}

// normalize makes nil collections empty, so they encode as {} and [].
func (r *Resource) normalize() {
	if r.Volumes == nil {
		r.Volumes = map[string]int64{}
	}
	if r.Disks == nil {
		r.Disks = []Disk{}
	}
	for i := range r.Disks {
		if r.Disks[i].Mounts == nil {
			r.Disks[i].Mounts = []string{}
		}
	}
}

// Clone returns a deep copy.
func (r Resource) Clone() Resource {
	c := Resource{Volumes: make(map[string]int64, len(r.Volumes)), Storage: r.Storage, Disks: make([]Disk, len(r.Disks))}
	for k, v := range r.Volumes {
		c.Volumes[k] = v
	}
	if len(r.ZeroByte) > 0 {
		c.ZeroByte = make(map[string]int64, len(r.ZeroByte))
		for k, v := range r.ZeroByte {
			c.ZeroByte[k] = v
		}
	}
	for i, d := range r.Disks {
		d.Mounts = slices.Clone(d.Mounts)
		c.Disks[i] = d
	}
	c.Pools, c.DefaultPool = maps.Clone(r.Pools), r.DefaultPool
	if len(r.PoolObjects) > 0 {
		c.PoolObjects = r.PoolObjects.Clone()
	}
	return c
}

// Clone returns a deep copy.
func (n *Node) Clone() *Node {
	return &Node{Capacity: n.Capacity.Clone(), Usage: n.Usage.Clone(), pending: n.pending}
}

// disk returns the disk named device, or nil.
func (r *Resource) disk(device string) *Disk {
	for i := range r.Disks {
		if r.Disks[i].Device == device {
			return &r.Disks[i]
		}
	}
	return nil
}

// volumeTotal is the sum of the volume sizes (saturating: a record that
// was not validated may hold anything).
func (r *Resource) volumeTotal() int64 {
	var t int64
	for _, v := range r.Volumes {
		t = satAdd(t, v)
	}
	return t
}

// NewNode returns an empty record: no volumes, no disks, no storage.
func NewNode() *Node {
	n := &Node{}
	n.Capacity.normalize()
	n.Usage.normalize()
	return n
}

// DecodeNode reads a stored record.
func DecodeNode(data []byte) (*Node, error) {
	n, ok := decodeNodeFast(data)
	if !ok {
		n = &Node{}
		if err := json.Unmarshal(data, n); err != nil {
			return nil, fmt.Errorf("stored storage record: %w", err)
		}
	}
	n.Capacity.normalize()
	n.Usage.normalize()
	return n, nil
}

// syncUsage gives usage an entry (0) for every capacity volume and disk and
// drops the entries of devices capacity no longer has, refusing when such a
// device still holds something.
func (n *Node) syncUsage() error {
	n.Capacity.normalize()
	n.Usage.normalize()
	for dev, used := range n.Usage.Volumes {
		if _, ok := n.Capacity.Volumes[dev]; !ok {
			if used != 0 {
				return types.Errorf(types.FailedPrecondition, "volume %s still holds %d bytes of usage", dev, used)
			}
			delete(n.Usage.Volumes, dev)
		}
	}
	for dev := range n.Capacity.Volumes {
		if _, ok := n.Usage.Volumes[dev]; !ok {
			n.Usage.Volumes[dev] = 0
		}
	}
	for dev, count := range n.Usage.ZeroByte {
		if _, ok := n.Capacity.Volumes[dev]; !ok && count != 0 {
			return types.Errorf(types.FailedPrecondition, "volume %s still holds %d workload bindings", dev, count)
		}
		if count == 0 {
			delete(n.Usage.ZeroByte, dev)
		}
	}
	if len(n.Usage.ZeroByte) == 0 {
		n.Usage.ZeroByte = nil
	}
	n.Capacity.ZeroByte = nil
	var disks []Disk
	for _, cd := range n.Capacity.Disks {
		d := Disk{Device: cd.Device, Mounts: slices.Clone(cd.Mounts)}
		if ud := n.Usage.disk(cd.Device); ud != nil {
			d.SetQuota(ud.Quota())
		}
		disks = append(disks, d)
	}
	for _, ud := range n.Usage.Disks {
		if n.Capacity.disk(ud.Device) == nil && !ud.Quota().IsZero() {
			return types.Errorf(types.FailedPrecondition, "disk %s still holds quota %v of usage", ud.Device, ud.Quota())
		}
	}
	n.Usage.Disks = disks
	n.Usage.normalize()
	return nil
}

// Validate checks the invariants every stored record keeps: nothing
// negative or beyond 2^53, no usage above capacity, no usage on a device
// capacity does not have.
func (n *Node) Validate() error {
	if err := n.Capacity.validate("capacity"); err != nil {
		return err
	}
	if err := n.Usage.validate("usage"); err != nil {
		return err
	}
	if dev, bad := firstBad(n.Usage.Volumes, func(dev string, used int64) bool {
		capacity, ok := n.Capacity.Volumes[dev]
		return (!ok && used != 0) || used > capacity
	}); bad {
		used := n.Usage.Volumes[dev]
		capacity, ok := n.Capacity.Volumes[dev]
		if !ok {
			return errInvalid("usage of volume %s: the node has no such volume", dev)
		}
		return errInvalid("usage of volume %s would be %d bytes, above its capacity %d", dev, used, capacity)
	}
	if dev, bad := firstBad(n.Usage.ZeroByte, func(dev string, count int64) bool {
		_, ok := n.Capacity.Volumes[dev]
		return !ok && count != 0
	}); bad {
		return errInvalid("usage of volume %s: %d bindings on a volume the node does not have", dev, n.Usage.ZeroByte[dev])
	}
	if len(n.Capacity.ZeroByte) > 0 {
		return errInvalid("capacity holds %s: only usage counts bindings", ZeroByteKey)
	}
	for _, ud := range n.Usage.Disks {
		cd := n.Capacity.disk(ud.Device)
		if cd == nil {
			if !ud.Quota().IsZero() {
				return errInvalid("usage of disk %s: the node has no such disk", ud.Device)
			}
			continue
		}
		for i, q := range ud.Quota() {
			if q > cd.Quota()[i] {
				return errInvalid("usage of disk %s %s would be %d, above its capacity %d", ud.Device, QuotaNames[i], q, cd.Quota()[i])
			}
		}
	}
	if n.Usage.Storage > n.Capacity.Storage {
		return errInvalid("storage usage would be %d bytes, above the capacity %d", n.Usage.Storage, n.Capacity.Storage)
	}
	return n.validatePools()
}

// firstBad is the first key of m, in sorted order, whose entry is bad, so
// that a record with several faults is always refused naming the same one
// (a map's order varies from run to run); it allocates nothing.
func firstBad(m map[string]int64, bad func(string, int64) bool) (string, bool) {
	first, found := "", false
	for k, v := range m {
		if bad(k, v) && (!found || k < first) {
			first, found = k, true
		}
	}
	return first, found
}

// outOfRange says which bound of a record's figures v is past: zero, or
// 2^53 (the largest a float64, as core reads the figures, holds exactly).
func outOfRange(v int64) string {
	if v < 0 {
		return "out of range: below zero"
	}
	return fmt.Sprintf("out of range: above 2^53 (%d)", int64(types.MaxExact))
}

func (r *Resource) validate(what string) error {
	if r.Storage < 0 || r.Storage > types.MaxExact {
		return errInvalid("%s storage is %d, %s", what, r.Storage, outOfRange(r.Storage))
	}
	var total int64
	if _, ok := r.Volumes[""]; ok {
		return errInvalid("%s has a volume with no device name", what)
	}
	if dev, bad := firstBad(r.Volumes, func(_ string, v int64) bool { return v < 0 || v > types.MaxExact }); bad {
		return errInvalid("%s of volume %s is %d, %s", what, dev, r.Volumes[dev], outOfRange(r.Volumes[dev]))
	}
	for _, v := range r.Volumes {
		// volumeTotal must not wrap around: keep the total within 2^53 too.
		if total += v; total > types.MaxExact {
			return errInvalid("%s volumes add up to more than 8 PiB", what)
		}
	}
	if dev, bad := firstBad(r.ZeroByte, func(_ string, n int64) bool { return n < 0 || n > types.MaxExact }); bad {
		return errInvalid("%s of volume %s: %d bindings, %s", what, dev, r.ZeroByte[dev], outOfRange(r.ZeroByte[dev]))
	}
	seen := map[string]bool{}
	for _, d := range r.Disks {
		if d.Device == "" {
			return errInvalid("%s has a disk with no device name", what)
		}
		if seen[d.Device] {
			return errInvalid("%s lists disk %s twice", what, d.Device)
		}
		seen[d.Device] = true
		for i, q := range d.Quota() {
			if q < 0 || q > types.MaxExact {
				return errInvalid("%s of disk %s %s is %d, %s", what, d.Device, QuotaNames[i], q, outOfRange(q))
			}
		}
	}
	return nil
}

// Held flattens the usage into amounts for the node registry.
func (n *Node) Held() types.Amounts {
	return n.Usage.amounts()
}

func (r *Resource) amounts() types.Amounts {
	a := types.Amounts{"storage": r.Storage}
	for dev, v := range r.Volumes {
		a["volume:"+dev] = v
	}
	for dev, v := range r.ZeroByte {
		a["bindings:"+dev] = v
	}
	for _, d := range r.Disks {
		for i, q := range d.Quota() {
			a["disk:"+d.Device+":"+QuotaNames[i]] = q
		}
	}
	return a
}

// CheckLedgerKey refuses a key Held cannot produce in shape: the
// components are storage, volume:DEVICE and bindings:DEVICE of volumes and
// disk:DEVICE:QUOTA of disks (QuotaNames). The device is not checked against
// the node: a ledger outlives the devices it counts (capacity may drop a
// device after its isolation), and core's rollback replays such a ledger.
func CheckLedgerKey(key string) error {
	kind, rest, _ := strings.Cut(key, ":")
	switch {
	case key == "storage":
		return nil
	case (kind == "volume" || kind == "bindings") && rest != "":
		return nil
	case kind == "disk":
		i := strings.LastIndex(rest, ":")
		if i > 0 && slices.Contains(QuotaNames[:], rest[i+1:]) {
			return nil
		}
	}
	return errInvalid("%s is not a storage usage component (storage, volume:DEVICE, bindings:DEVICE, disk:DEVICE:QUOTA)", key)
}

// WithHeld returns the node with its usage components set from a (the
// inverse of Held, for the registry's ledger adjustments).
func (n *Node) WithHeld(a types.Amounts) *Node {
	out := n.Clone()
	out.Usage = resourceFromAmounts(a, &n.Capacity)
	if len(n.Usage.PoolObjects) > 0 {
		out.Usage.PoolObjects = n.Usage.PoolObjects.Clone()
	}
	out.Usage.normalize()
	return out
}

// resourceFromAmounts rebuilds a stored-form resource from amounts; disk
// mounts come from capacity when it has the disk.
func resourceFromAmounts(a types.Amounts, capacity *Resource) Resource {
	r := Resource{Volumes: map[string]int64{}, Storage: a["storage"]}
	quotas := map[string]*Quota{}
	var order []string
	for _, k := range a.Keys() {
		v := a[k]
		switch {
		case strings.HasPrefix(k, "volume:"):
			r.Volumes[strings.TrimPrefix(k, "volume:")] = v
		case strings.HasPrefix(k, "bindings:"):
			if v != 0 {
				if r.ZeroByte == nil {
					r.ZeroByte = map[string]int64{}
				}
				r.ZeroByte[strings.TrimPrefix(k, "bindings:")] = v
			}
		case strings.HasPrefix(k, "disk:"):
			rest := strings.TrimPrefix(k, "disk:")
			i := strings.LastIndex(rest, ":")
			if i < 0 {
				continue
			}
			dev, name := rest[:i], rest[i+1:]
			q := quotas[dev]
			if q == nil {
				q = &Quota{}
				quotas[dev] = q
				order = append(order, dev)
			}
			if j := slices.Index(QuotaNames[:], name); j >= 0 {
				q[j] = v
			}
		}
	}
	for _, dev := range order {
		d := Disk{Device: dev}
		if capacity != nil {
			if cd := capacity.disk(dev); cd != nil {
				d.Mounts = slices.Clone(cd.Mounts)
			}
		}
		d.SetQuota(*quotas[dev])
		r.Disks = append(r.Disks, d)
	}
	r.normalize()
	return r
}

// LedgerView renders released amounts in stored form, leaving out devices
// that released nothing.
func LedgerView(a types.Amounts) Released {
	r := resourceFromAmounts(a, nil)
	for dev, v := range r.Volumes {
		if v == 0 {
			delete(r.Volumes, dev)
		}
	}
	r.Disks = slices.DeleteFunc(r.Disks, func(d Disk) bool { return d.Quota().IsZero() })
	return Released{Volumes: r.Volumes, Disks: r.Disks, Storage: r.Storage}
}

// Released is what isolation released, as `nodes get` shows it: only the
// devices that held something.
type Released struct {
	Volumes map[string]int64 `json:"volumes,omitempty"`
	Disks   []Disk           `json:"disks,omitempty"`
	Storage int64            `json:"storage"`
}

// coveringDisk returns the index of the disk with the mount that is the
// longest path prefix of path (by path components), or -1.
func (r *Resource) coveringDisk(path string) int {
	best, bestLen := -1, -1
	for i, d := range r.Disks {
		for _, m := range d.Mounts {
			if covers(m, path) && len(m) > bestLen {
				best, bestLen = i, len(m)
			}
		}
	}
	return best
}

// covers reports whether mount is path or a parent directory of it.
func covers(mount, path string) bool {
	if mount == "/" {
		return strings.HasPrefix(path, "/")
	}
	mount = strings.TrimSuffix(mount, "/")
	return path == mount || strings.HasPrefix(path, mount+"/")
}

// sortedDevices lists volume devices in name order.
func (r *Resource) sortedDevices() []string {
	devs := make([]string, 0, len(r.Volumes))
	for d := range r.Volumes {
		devs = append(devs, d)
	}
	sort.Strings(devs)
	return devs
}

package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/types"
)

// VolumeSize is one device of a node request.
type VolumeSize struct {
	Device string
	Size   int64
}

// NodeRequest is a node resource as a person writes it (add-node,
// set-node-resource-capacity, and usage in request form).
type NodeRequest struct {
	Volumes    []VolumeSize
	HasVolumes bool
	Disks      []Disk
	HasDisks   bool
	Storage    int64
	HasStorage bool
	RmDisks    []string
	HasRmDisks bool
	// Pools, DefaultPool and RmPools are the request's pool declarations
	// (docs/pools.md); nil says nothing.
	Pools       map[string]pool.Declaration
	DefaultPool *string
	RmPools     []string
}

// hasPools reports whether the request says anything about pools.
func (q *NodeRequest) hasPools() bool {
	return q.Pools != nil || q.DefaultPool != nil || q.RmPools != nil
}

// declarations is the request's pool part for pool.ApplyDeclarations.
func (q *NodeRequest) declarations(absolute bool) pool.DeclarationRequest {
	return pool.DeclarationRequest{Absolute: absolute, Pools: q.Pools, DefaultPool: q.DefaultPool, RmPools: q.RmPools}
}

// volumeTotal is the total of the request's volume sizes.
func (q *NodeRequest) volumeTotal() int64 {
	var t int64
	for _, v := range q.Volumes {
		t += v.Size
	}
	return t
}

// ParseNodeRequest reads a node request. Its volumes are "device:size"
// strings (or an object of sizes), its disks
// "device:mounts:read_IOPS:write_IOPS:read_BPS:write_BPS" strings (or disk
// objects), storage a human size or a number of bytes, rm-disks
// "device,device". signed allows negative sizes and quotas: a delta, which
// is how eru-cli shrinks a node (`node set --delta --volume /data0:-100G`).
// Every device and mount is an absolute, clean path (CheckDevicePath).
func ParseNodeRequest(m map[string]json.RawMessage, signed bool) (*NodeRequest, error) {
	if err := types.RefuseUnknown(m, "storage request", "volumes", "disks", "storage", "rm-disks", "pools", "default-pool", "rm-pools"); err != nil {
		return nil, err
	}
	q := &NodeRequest{}
	if err := q.parsePools(m); err != nil {
		return nil, err
	}
	if raw, ok := m["volumes"]; ok && !types.IsNull(raw) {
		vols, err := parseVolumeSizes(raw, signed)
		if err != nil {
			return nil, err
		}
		q.Volumes, q.HasVolumes = vols, true
	}
	if raw, ok := m["disks"]; ok && !types.IsNull(raw) {
		disks, err := parseDisks(raw, signed)
		if err != nil {
			return nil, err
		}
		q.Disks, q.HasDisks = disks, true
	}
	if raw, ok := m["storage"]; ok && !types.IsNull(raw) {
		n, err := parseSizeValue(raw, signed)
		if err != nil {
			return nil, errInvalid("storage: %v", err)
		}
		q.Storage, q.HasStorage = n, true
	}
	if raw, ok := m["rm-disks"]; ok && !types.IsNull(raw) {
		var s string
		var list []string
		if err := json.Unmarshal(raw, &s); err == nil {
			list = strings.Split(s, ",")
		} else if err := json.Unmarshal(raw, &list); err != nil {
			return nil, errInvalid("rm-disks: want \"device,device\", got %s", clip(raw))
		}
		for _, d := range list {
			if d = strings.TrimSpace(d); d != "" {
				if err := CheckDevicePath("rm-disks: disk", d); err != nil {
					return nil, errInvalid("%v", err)
				}
				q.RmDisks = append(q.RmDisks, d)
			}
		}
		q.HasRmDisks = true
	}
	// Summed one by one: a plain total of many large volumes could wrap
	// around int64 and come back small.
	sizes := []int64{q.Storage}
	for _, v := range q.Volumes {
		sizes = append(sizes, v.Size)
	}
	if _, ok := sumSizes(sizes...); !ok {
		return nil, errInvalid("storage request: storage and volumes add up to more than 8 PiB")
	}
	return q, nil
}

const maxBytes = 1 << 53

func sumSizes(vals ...int64) (int64, bool) {
	var t int64
	for _, v := range vals {
		t += v
		if t > maxBytes || t < -maxBytes {
			return 0, false
		}
	}
	return t, true
}

func parseVolumeSizes(raw json.RawMessage, signed bool) ([]VolumeSize, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		out := make([]VolumeSize, 0, len(list))
		seen := map[string]bool{}
		for _, s := range list {
			i := strings.LastIndex(s, ":")
			if i <= 0 {
				return nil, errInvalid("volume %q: want device:size", clip([]byte(s)))
			}
			size, err := ParseSize(s[i+1:], signed)
			if err != nil {
				return nil, errInvalid("volume %q: %v", clip([]byte(s)), err)
			}
			dev := s[:i]
			if err := CheckDevicePath("volume device", dev); err != nil {
				return nil, errInvalid("volume %q: %v", clip([]byte(s)), err)
			}
			if seen[dev] {
				return nil, errInvalid("volume %s is listed twice", dev)
			}
			seen[dev] = true
			out = append(out, VolumeSize{Device: dev, Size: size})
		}
		return out, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, errInvalid("volumes: want a list of \"device:size\", got %s", clip(raw))
	}
	out := make([]VolumeSize, 0, len(obj))
	for dev, v := range obj {
		if dev == "" {
			return nil, errInvalid("volumes: a device name is empty")
		}
		if err := CheckDevicePath("volume device", dev); err != nil {
			return nil, errInvalid("volumes: %v", err)
		}
		size, err := parseSizeValue(v, signed)
		if err != nil {
			return nil, errInvalid("volume %s: %v", dev, err)
		}
		out = append(out, VolumeSize{Device: dev, Size: size})
	}
	slices.SortFunc(out, func(a, b VolumeSize) int { return strings.Compare(a.Device, b.Device) })
	return out, nil
}

func parseDisks(raw json.RawMessage, signed bool) ([]Disk, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errInvalid("disks: want a list, got %s", clip(raw))
	}
	out := make([]Disk, 0, len(items))
	seen := map[string]bool{}
	for _, item := range items {
		var d Disk
		var s string
		if err := json.Unmarshal(item, &s); err == nil {
			parsed, err := parseDiskString(s, signed)
			if err != nil {
				return nil, err
			}
			d = parsed
		} else if err := json.Unmarshal(item, &d); err != nil {
			return nil, errInvalid("disk %s: want \"device:mounts:read_IOPS:write_IOPS:read_BPS:write_BPS\"", clip(item))
		} else if err := refuseUnknownDiskKeys(item, "disks"); err != nil {
			return nil, err
		}
		if d.Device == "" {
			return nil, errInvalid("disk %s: no device", clip(item))
		}
		if err := checkDiskPaths(d); err != nil {
			return nil, err
		}
		for i, q := range d.Quota() {
			if (q < 0 && !signed) || q > maxBytes || q < -maxBytes {
				return nil, errInvalid("disk %s: %s %d is out of range", d.Device, QuotaNames[i], q)
			}
		}
		if seen[d.Device] {
			return nil, errInvalid("disk %s is listed twice", d.Device)
		}
		seen[d.Device] = true
		if d.Mounts == nil {
			d.Mounts = []string{}
		}
		out = append(out, d)
	}
	return out, nil
}

// diskKeys are the keys of a disk object, as stored: its device, its
// mounts and its quotas (a function, so that no caller can change the list
// for the others).
func diskKeys() []string {
	return append([]string{"device", "mounts"}, QuotaNames[:]...)
}

// refuseUnknownDiskKeys refuses a disk object with a key that is none of
// diskKeys (matched without regard to case, as encoding/json matches them):
// the decoder would drop it and read its quota as 0, wiping the quota the
// disk had.
func refuseUnknownDiskKeys(raw json.RawMessage, what string) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil // not an object: the decode says so
	}
	name := clip(raw)
	if dev := ""; json.Unmarshal(m["device"], &dev) == nil && dev != "" {
		name = dev
	}
	known := diskKeys()
	for _, k := range types.SortedKeys(m) {
		if !slices.ContainsFunc(known, func(key string) bool { return strings.EqualFold(key, k) }) {
			return errInvalid("%s: disk %s: unknown key %q (known: %s)", what, name, k, strings.Join(known, ", "))
		}
	}
	return nil
}

// checkDiskPaths checks a disk's device and mounts (CheckDevicePath).
func checkDiskPaths(d Disk) error {
	if err := CheckDevicePath("disk device", d.Device); err != nil {
		return errInvalid("%v", err)
	}
	for _, m := range d.Mounts {
		if err := CheckDevicePath("disk "+d.Device+": mount", m); err != nil {
			return errInvalid("%v", err)
		}
	}
	return nil
}

func parseDiskString(s string, signed bool) (Disk, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return Disk{}, errInvalid("disk %q has %d parts: want device:mounts:read_IOPS:write_IOPS:read_BPS:write_BPS", clip([]byte(s)), len(parts))
	}
	d := Disk{Device: parts[0], Mounts: []string{}}
	if d.Device == "" {
		return Disk{}, errInvalid("disk %q has no device", clip([]byte(s)))
	}
	if err := CheckDevicePath("disk device", d.Device); err != nil {
		return Disk{}, errInvalid("disk %q: %v", clip([]byte(s)), err)
	}
	for _, m := range strings.Split(parts[1], ",") {
		if m = strings.TrimSpace(m); m != "" {
			if err := CheckDevicePath("disk "+d.Device+": mount", m); err != nil {
				return Disk{}, errInvalid("%v", err)
			}
			d.Mounts = append(d.Mounts, m)
		}
	}
	var q Quota
	for i := range q {
		n, err := ParseSize(parts[2+i], signed)
		if err != nil {
			return Disk{}, errInvalid("disk %s: %s: %v", d.Device, QuotaNames[i], err)
		}
		q[i] = n
	}
	d.SetQuota(q)
	return d, nil
}

// isSnapshot reports whether a node resource is in stored form: volumes an
// object of numbers, disks a list of objects, storage a number. Such a
// resource is a rollback snapshot and is restored verbatim.
//
// null is none of these (a request's null key is an absent key), and neither
// is a string: json.Number would take "100", and a null would decode into
// an empty map or list and restore an empty capacity.
func isSnapshot(m map[string]json.RawMessage) bool {
	vols, disks, storage := bytes.TrimSpace(m["volumes"]), bytes.TrimSpace(m["disks"]), m["storage"]
	if len(vols) == 0 || vols[0] != '{' || len(disks) == 0 || disks[0] != '[' || !isNumber(storage) {
		return false
	}
	var v map[string]json.RawMessage
	var d []map[string]json.RawMessage
	if json.Unmarshal(vols, &v) != nil || json.Unmarshal(disks, &d) != nil {
		return false
	}
	for _, size := range v {
		if !isNumber(size) {
			return false
		}
	}
	for _, disk := range d {
		if disk == nil {
			return false
		}
	}
	return true
}

// isNumber reports whether raw is a JSON number literal.
func isNumber(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal(raw, &n) == nil
}

// storedShape says how much of the stored form a value must carry.
type storedShape int

const (
	// whole: all of volumes, disks and storage, nothing else — it replaces
	// what is stored, so a key left out or misspelt would wipe something.
	whole storedShape = iota
	// part: any of them, nothing else — it is added or subtracted.
	part
	// report: an engine's report; it supplies what it has, and keys it has
	// besides are its own business.
	report
)

// decodeStored reads a resource in stored form.
func decodeStored(raw json.RawMessage, what string, shape storedShape) (Resource, error) {
	m, err := types.DecodeObject(raw, what)
	if err != nil {
		return Resource{}, err
	}
	return decodeStoredMembers(m, raw, what, shape)
}

// decodeStoredMembers reads a resource in stored form whose object raw is
// already split into its members m (nil for null): m says which keys it
// carries, raw is decoded whole.
func decodeStoredMembers(m map[string]json.RawMessage, raw json.RawMessage, what string, shape storedShape) (Resource, error) {
	if shape != report {
		if err := types.RefuseUnknown(m, what+" (stored form)", "volumes", "disks", "storage", ZeroByteKey, "pools", "default_pool", "pool_objects"); err != nil {
			return Resource{}, err
		}
	}
	if shape == whole {
		for _, k := range []string{"volumes", "disks", "storage"} {
			if _, ok := m[k]; !ok {
				return Resource{}, errInvalid("%s: a stored storage resource replacing the node's needs %q (it has volumes, disks and storage)", what, k)
			}
		}
	}
	if shape != report {
		var disks []json.RawMessage
		if json.Unmarshal(m["disks"], &disks) == nil {
			for _, d := range disks {
				if err := refuseUnknownDiskKeys(d, what+" (stored form)"); err != nil {
					return Resource{}, err
				}
			}
		}
	}
	var r Resource
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&r); err != nil {
		return Resource{}, errInvalid("%s: not a stored storage resource: %v", what, err)
	}
	r.normalize()
	if err := r.validate(what); err != nil {
		return Resource{}, err
	}
	for _, dev := range r.sortedDevices() {
		if err := CheckDevicePath(what+": volume device", dev); err != nil {
			return Resource{}, errInvalid("%v", err)
		}
	}
	for _, d := range r.Disks {
		if err := checkDiskPaths(d); err != nil {
			return Resource{}, types.Wrap(types.InvalidArgument, err, what)
		}
	}
	return r, nil
}

// toResource turns a node request into stored form: storage is the flat
// budget plus the volumes' total.
func (q *NodeRequest) toResource() Resource {
	r := Resource{Volumes: map[string]int64{}, Disks: slices.Clone(q.Disks), Storage: q.Storage + q.volumeTotal()}
	for _, v := range q.Volumes {
		r.Volumes[v.Device] = v.Size
	}
	r.normalize()
	return r
}

func fmtQuota(q Quota) string {
	return fmt.Sprintf("%d:%d:%d:%d", q[0], q[1], q[2], q[3])
}

package storage

import (
	"github.com/eru-extend/resources/internal/fastjson"
	"github.com/eru-extend/resources/storage/pool"
)

// decodeNodeFast decodes a record in the form Encode writes it (no
// whitespace, no escapes, exact key names, each key once, integers only)
// without encoding/json's reflection, which was most of the time of a
// many-node capacity query. It answers ok false for anything else, and the
// caller decodes the record with encoding/json, so every record reads as
// it did: this path only takes input on which encoding/json gives the same
// result (FuzzDecodeNodeFast holds it to that). It reads a node's pool
// declarations; a record holding pool objects goes to encoding/json.
func decodeNodeFast(data []byte) (*Node, bool) {
	d := fastjson.New(data)
	n := &Node{}
	var seen [2]bool
	ok := d.Object(func(key []byte) bool {
		switch string(key) {
		case "capacity":
			return fastjson.Once(&seen[0]) && decodeResource(d, &n.Capacity)
		case "usage":
			return fastjson.Once(&seen[1]) && decodeResource(d, &n.Usage)
		}
		return false
	})
	return n, ok && d.Done()
}

func decodeResource(d *fastjson.Decoder, r *Resource) bool {
	var seen [6]bool
	return d.Object(func(key []byte) bool {
		ok := false
		switch string(key) {
		case "volumes":
			if ok = fastjson.Once(&seen[0]); ok {
				r.Volumes, ok = d.Amounts()
			}
		case "disks":
			ok = fastjson.Once(&seen[1]) && decodeDisks(d, r)
		case "storage":
			if ok = fastjson.Once(&seen[2]); ok {
				r.Storage, ok = d.Int()
			}
		case ZeroByteKey:
			if ok = fastjson.Once(&seen[3]); ok {
				r.ZeroByte, ok = d.Amounts()
			}
		case "pools":
			ok = fastjson.Once(&seen[4]) && decodePools(d, r)
		case "default_pool":
			if ok = fastjson.Once(&seen[5]); ok {
				r.DefaultPool, ok = d.Str()
			}
		}
		return ok
	})
}

// decodePools reads {"id":{"path":"…"},…}; a pool named twice is left to
// encoding/json.
func decodePools(d *fastjson.Decoder, r *Resource) bool {
	r.Pools = map[string]pool.Declaration{}
	return d.Object(func(key []byte) bool {
		id := string(key)
		if _, dup := r.Pools[id]; dup {
			return false
		}
		var decl pool.Declaration
		var seen bool
		ok := d.Object(func(key []byte) bool {
			if string(key) != "path" || !fastjson.Once(&seen) {
				return false
			}
			var ok bool
			decl.Path, ok = d.Str()
			return ok
		})
		r.Pools[id] = decl
		return ok
	})
}

func decodeDisks(d *fastjson.Decoder, r *Resource) bool {
	r.Disks = []Disk{}
	return d.Array(func() bool {
		r.Disks = append(r.Disks, Disk{})
		return decodeDisk(d, &r.Disks[len(r.Disks)-1])
	})
}

func decodeDisk(d *fastjson.Decoder, disk *Disk) bool {
	var seen [6]bool
	return d.Object(func(key []byte) bool {
		var field *int64
		ok := false
		switch string(key) {
		case "device":
			if ok = fastjson.Once(&seen[0]); ok {
				disk.Device, ok = d.Str()
			}
		case "mounts":
			ok = fastjson.Once(&seen[1]) && decodeMounts(d, disk)
		case "read_IOPS":
			ok, field = fastjson.Once(&seen[2]), &disk.ReadIOPS
		case "write_IOPS":
			ok, field = fastjson.Once(&seen[3]), &disk.WriteIOPS
		case "read_bps":
			ok, field = fastjson.Once(&seen[4]), &disk.ReadBPS
		case "write_bps":
			ok, field = fastjson.Once(&seen[5]), &disk.WriteBPS
		}
		if ok && field != nil {
			*field, ok = d.Int()
		}
		return ok
	})
}

func decodeMounts(d *fastjson.Decoder, disk *Disk) bool {
	disk.Mounts = []string{}
	return d.Array(func() bool {
		s, ok := d.Str()
		if ok {
			disk.Mounts = append(disk.Mounts, s)
		}
		return ok
	})
}

package storage

import "github.com/eru-extend/resources/internal/fastjson"

// decodeNodeFast decodes a record in the form Encode writes it (no
// whitespace, no escapes, exact key names, each key once, integers only)
// without encoding/json's reflection, which was most of the time of a
// many-node capacity query. It answers ok false for anything else, and the
// caller decodes the record with encoding/json, so every record reads as
// it did: this path only takes input on which encoding/json gives the same
// result (FuzzDecodeNodeFast holds it to that).
func decodeNodeFast(data []byte) (*Node, bool) {
	d := fastjson.New(data)
	n := &Node{}
	var seen [2]bool
	more, ok := d.Open('{', '}')
	for ok && more {
		var key []byte
		if key, ok = d.Key(); !ok {
			return nil, false
		}
		switch string(key) {
		case "capacity":
			ok = fastjson.Once(&seen[0]) && decodeResource(d, &n.Capacity)
		case "usage":
			ok = fastjson.Once(&seen[1]) && decodeResource(d, &n.Usage)
		default:
			ok = false
		}
		if ok {
			more, ok = d.Next('}')
		}
	}
	return n, ok && d.Done()
}

func decodeResource(d *fastjson.Decoder, r *Resource) bool {
	var seen [4]bool
	more, ok := d.Open('{', '}')
	for ok && more {
		var key []byte
		if key, ok = d.Key(); !ok {
			return false
		}
		switch string(key) {
		case "volumes":
			if ok = fastjson.Once(&seen[0]); ok {
				r.Volumes, ok = d.Amounts()
			}
		case "disks":
			if ok = fastjson.Once(&seen[1]); ok {
				ok = decodeDisks(d, r)
			}
		case "storage":
			if ok = fastjson.Once(&seen[2]); ok {
				r.Storage, ok = d.Int()
			}
		case ZeroByteKey:
			if ok = fastjson.Once(&seen[3]); ok {
				r.ZeroByte, ok = d.Amounts()
			}
		default:
			ok = false
		}
		if ok {
			more, ok = d.Next('}')
		}
	}
	return ok
}

func decodeDisks(d *fastjson.Decoder, r *Resource) bool {
	more, ok := d.Open('[', ']')
	r.Disks = []Disk{}
	for ok && more {
		r.Disks = append(r.Disks, Disk{})
		if ok = decodeDisk(d, &r.Disks[len(r.Disks)-1]); ok {
			more, ok = d.Next(']')
		}
	}
	return ok
}

func decodeDisk(d *fastjson.Decoder, disk *Disk) bool {
	var seen [6]bool
	more, ok := d.Open('{', '}')
	for ok && more {
		var key []byte
		if key, ok = d.Key(); !ok {
			return false
		}
		var field *int64
		switch string(key) {
		case "device":
			if ok = fastjson.Once(&seen[0]); ok {
				disk.Device, ok = d.Str()
			}
		case "mounts":
			if ok = fastjson.Once(&seen[1]); ok {
				ok = decodeMounts(d, disk)
			}
		case "read_IOPS":
			ok, field = fastjson.Once(&seen[2]), &disk.ReadIOPS
		case "write_IOPS":
			ok, field = fastjson.Once(&seen[3]), &disk.WriteIOPS
		case "read_bps":
			ok, field = fastjson.Once(&seen[4]), &disk.ReadBPS
		case "write_bps":
			ok, field = fastjson.Once(&seen[5]), &disk.WriteBPS
		default:
			ok = false
		}
		if ok && field != nil {
			*field, ok = d.Int()
		}
		if ok {
			more, ok = d.Next('}')
		}
	}
	return ok
}

func decodeMounts(d *fastjson.Decoder, disk *Disk) bool {
	more, ok := d.Open('[', ']')
	disk.Mounts = []string{}
	for ok && more {
		var s string
		if s, ok = d.Str(); ok {
			disk.Mounts = append(disk.Mounts, s)
			more, ok = d.Next(']')
		}
	}
	return ok
}

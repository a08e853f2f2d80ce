package storage

import (
	"math"
	"unicode/utf8"
)

// decodeNodeFast decodes a record in the form Encode writes it (no
// whitespace, no escapes, exact key names, each key once, integers only)
// without encoding/json's reflection, which was most of the time of a
// many-node capacity query. It answers ok false for anything else, and the
// caller decodes the record with encoding/json, so every record reads as
// it did: this path only takes input on which encoding/json gives the same
// result (FuzzDecodeNodeFast holds it to that).
func decodeNodeFast(data []byte) (*Node, bool) {
	d := fastDecoder{b: data}
	n := &Node{}
	var seen [2]bool
	more, ok := d.open('{', '}')
	for ok && more {
		var key []byte
		if key, ok = d.key(); !ok {
			return nil, false
		}
		switch string(key) {
		case "capacity":
			ok = once(&seen[0]) && d.resource(&n.Capacity)
		case "usage":
			ok = once(&seen[1]) && d.resource(&n.Usage)
		default:
			ok = false
		}
		if ok {
			more, ok = d.next('}')
		}
	}
	return n, ok && d.i == len(d.b)
}

type fastDecoder struct {
	b []byte
	i int
}

func once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
}

func (d *fastDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// open reads the start of an object or array: more is false when it is
// empty (its end read too).
func (d *fastDecoder) open(start, end byte) (more, ok bool) {
	if !d.byte(start) {
		return false, false
	}
	return !d.byte(end), true
}

// next reads what follows a member or element: a comma (more) or the end.
func (d *fastDecoder) next(end byte) (more, ok bool) {
	if d.byte(',') {
		return true, true
	}
	return false, d.byte(end)
}

// key reads an object's key and its colon.
func (d *fastDecoder) key() ([]byte, bool) {
	k, ok := d.raw()
	return k, ok && d.byte(':')
}

// raw reads a string without escapes or control characters, in valid UTF-8
// (what encoding/json reads byte for byte), and returns its bytes.
func (d *fastDecoder) raw() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		d.i++
	}
	return nil, false
}

func (d *fastDecoder) str() (string, bool) {
	s, ok := d.raw()
	return string(s), ok
}

// int reads an integer in JSON's form that fits an int64.
func (d *fastDecoder) int() (int64, bool) {
	neg := d.byte('-')
	start := d.i
	var u uint64
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(d.b[d.i]-'0')
		d.i++
	}
	digits := d.i - start
	if digits == 0 || digits > 1 && d.b[start] == '0' || digits > 19 {
		return 0, false
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return 0, false
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// amounts reads an object of integers; a key seen twice is refused.
func (d *fastDecoder) amounts() (map[string]int64, bool) {
	more, ok := d.open('{', '}')
	if !ok {
		return nil, false
	}
	m := map[string]int64{}
	for more {
		key, ok := d.key()
		if !ok {
			return nil, false
		}
		if _, dup := m[string(key)]; dup {
			return nil, false
		}
		v, ok := d.int()
		if !ok {
			return nil, false
		}
		m[string(key)] = v
		if more, ok = d.next('}'); !ok {
			return nil, false
		}
	}
	return m, true
}

func (d *fastDecoder) resource(r *Resource) bool {
	var seen [4]bool
	more, ok := d.open('{', '}')
	for ok && more {
		var key []byte
		if key, ok = d.key(); !ok {
			return false
		}
		switch string(key) {
		case "volumes":
			if ok = once(&seen[0]); ok {
				r.Volumes, ok = d.amounts()
			}
		case "disks":
			if ok = once(&seen[1]); ok {
				ok = d.disks(r)
			}
		case "storage":
			if ok = once(&seen[2]); ok {
				r.Storage, ok = d.int()
			}
		case ZeroByteKey:
			if ok = once(&seen[3]); ok {
				r.ZeroByte, ok = d.amounts()
			}
		default:
			ok = false
		}
		if ok {
			more, ok = d.next('}')
		}
	}
	return ok
}

func (d *fastDecoder) disks(r *Resource) bool {
	more, ok := d.open('[', ']')
	r.Disks = []Disk{}
	for ok && more {
		r.Disks = append(r.Disks, Disk{})
		if ok = d.disk(&r.Disks[len(r.Disks)-1]); ok {
			more, ok = d.next(']')
		}
	}
	return ok
}

func (d *fastDecoder) disk(disk *Disk) bool {
	var seen [6]bool
	more, ok := d.open('{', '}')
	for ok && more {
		var key []byte
		if key, ok = d.key(); !ok {
			return false
		}
		var field *int64
		switch string(key) {
		case "device":
			if ok = once(&seen[0]); ok {
				disk.Device, ok = d.str()
			}
		case "mounts":
			if ok = once(&seen[1]); ok {
				ok = d.mounts(disk)
			}
		case "read_IOPS":
			ok, field = once(&seen[2]), &disk.ReadIOPS
		case "write_IOPS":
			ok, field = once(&seen[3]), &disk.WriteIOPS
		case "read_bps":
			ok, field = once(&seen[4]), &disk.ReadBPS
		case "write_bps":
			ok, field = once(&seen[5]), &disk.WriteBPS
		default:
			ok = false
		}
		if ok && field != nil {
			*field, ok = d.int()
		}
		if ok {
			more, ok = d.next('}')
		}
	}
	return ok
}

func (d *fastDecoder) mounts(disk *Disk) bool {
	more, ok := d.open('[', ']')
	disk.Mounts = []string{}
	for ok && more {
		var s string
		if s, ok = d.str(); ok {
			disk.Mounts = append(disk.Mounts, s)
			more, ok = d.next(']')
		}
	}
	return ok
}

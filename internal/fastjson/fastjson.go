// Package fastjson reads the JSON that encoding/json.Marshal writes for
// plain records (no whitespace, no escapes, integers) without reflection.
// Every method answers ok false on anything outside that form, and the
// caller then decodes the whole input with encoding/json: a fast decoder
// built on it must only accept input that encoding/json reads the same way
// (each one has a fuzz test comparing the two).
package fastjson

import (
	"encoding/json"
	"math"
	"unicode/utf8"
)

// Decoder reads one input from the start.
type Decoder struct {
	b []byte
	i int
}

// New starts reading data.
func New(data []byte) *Decoder { return &Decoder{b: data} }

// Done reports whether the whole input has been read.
func (d *Decoder) Done() bool { return d.i == len(d.b) }

func (d *Decoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// Open reads the start of an object ('{', '}') or array ('[', ']'): more
// is false when it is empty (its end read too).
func (d *Decoder) Open(start, end byte) (more, ok bool) {
	if !d.byte(start) {
		return false, false
	}
	return !d.byte(end), true
}

// Next reads what follows a member or element: a comma (more) or the end.
func (d *Decoder) Next(end byte) (more, ok bool) {
	if d.byte(',') {
		return true, true
	}
	return false, d.byte(end)
}

// Object reads an object, calling member with each key once the decoder
// stands at its value; member reads the value and reports whether it could.
// It stops at the first member that could not.
func (d *Decoder) Object(member func(key []byte) bool) bool {
	more, ok := d.Open('{', '}')
	for ok && more {
		var key []byte
		if key, ok = d.Key(); !ok {
			return false
		}
		if ok = member(key); ok {
			more, ok = d.Next('}')
		}
	}
	return ok
}

// Array reads an array, calling elem for each element; elem reads it and
// reports whether it could.
func (d *Decoder) Array(elem func() bool) bool {
	more, ok := d.Open('[', ']')
	for ok && more {
		if ok = elem(); ok {
			more, ok = d.Next(']')
		}
	}
	return ok
}

// Key reads an object's key and its colon; the bytes are the input's.
func (d *Decoder) Key() ([]byte, bool) {
	k, ok := d.raw()
	return k, ok && d.byte(':')
}

// raw reads a string without escapes or control characters, in valid UTF-8
// (what encoding/json reads byte for byte), and returns its bytes.
func (d *Decoder) raw() ([]byte, bool) {
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

// Quoted reads a string as Raw does and returns it with its quotes, the
// form a json.Unmarshaler (time.Time) takes.
func (d *Decoder) Quoted() ([]byte, bool) {
	start := d.i
	_, ok := d.raw()
	return d.b[start:d.i], ok
}

// Str reads a string.
func (d *Decoder) Str() (string, bool) {
	s, ok := d.raw()
	return string(s), ok
}

// Bool reads true or false.
func (d *Decoder) Bool() (v, ok bool) {
	if d.literal("true") {
		return true, true
	}
	return false, d.literal("false")
}

// literal reads lit, if that is what comes next.
func (d *Decoder) literal(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// Null reads null, if that is what comes next.
func (d *Decoder) Null() bool { return d.literal("null") }

// Int reads an integer in JSON's form that fits an int64.
func (d *Decoder) Int() (int64, bool) {
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

// Amounts reads an object of integers into a new map; a key seen twice is
// refused (encoding/json would keep the last).
func (d *Decoder) Amounts() (map[string]int64, bool) {
	more, ok := d.Open('{', '}')
	if !ok {
		return nil, false
	}
	m := map[string]int64{}
	for more {
		key, ok := d.Key()
		if !ok {
			return nil, false
		}
		if _, dup := m[string(key)]; dup {
			return nil, false
		}
		v, ok := d.Int()
		if !ok {
			return nil, false
		}
		m[string(key)] = v
		if more, ok = d.Next('}'); !ok {
			return nil, false
		}
	}
	return m, true
}

// Composite reads an object or an array, of any content encoding/json
// accepts, and returns its bytes (the form a json.RawMessage holds).
// Anything else is refused before a byte is read: a string followed by
// white space is valid JSON, but encoding/json holds the string without
// the white space.
func (d *Decoder) Composite() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '{' && d.b[d.i] != '[' {
		return nil, false // neither an object nor an array
	}
	start, depth := d.i, 0
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			if !d.skipString() {
				return nil, false
			}
			continue
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
		d.i++
		if depth == 0 {
			v := d.b[start:d.i]
			return v, json.Valid(v)
		}
	}
	return nil, false
}

// skipString steps over a string, escapes and all, leaving its checking to
// whoever checks the value it is in.
func (d *Decoder) skipString() bool {
	for d.i++; d.i < len(d.b); d.i++ {
		switch d.b[d.i] {
		case '\\':
			d.i++
		case '"':
			d.i++
			return true
		}
	}
	return false
}

// Once marks a member seen, and reports false when it already was (a key
// repeated is left to encoding/json).
func Once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
}

package serve

import (
	"bytes"
	"encoding/json"
)

// peek decodes the naming fields of a verb's request as encoding/json
// decodes them into named (keys matched without regard to case, the last
// of a repeated key winning, a value that is not a string ignored), without
// decoding the rest: a capacity query names 10,000 nodes, which
// json.Unmarshal would decode and check only for peek to drop them. A
// request that is not a JSON object answers zero; one that is malformed
// may answer the names read before the fault (the verb itself reports it;
// the names only pick the call's flow and a write's node lock).
func peek(stdin []byte) named {
	var n named
	p := peeker{b: stdin}
	if !p.byte('{') {
		return n
	}
	if p.byte('}') {
		return n
	}
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return n
		}
		p.space()
		start := p.i
		if !p.skip() {
			return n
		}
		value := stdin[start:p.i]
		if len(value) > 0 && value[0] == '"' {
			if field := n.field(key); field != nil {
				if v, ok := unquote(value); ok {
					*field = v
				}
			}
		}
		if p.byte(',') {
			continue
		}
		return n
	}
}

// field is the field of n that a request's key sets, nil for none.
func (n *named) field(key []byte) *string {
	if bytes.IndexByte(key, '\\') >= 0 {
		var k string
		if json.Unmarshal(key, &k) != nil {
			return nil
		}
		key = []byte(k)
	} else {
		key = key[1 : len(key)-1]
	}
	switch {
	case bytes.EqualFold(key, []byte("podname")):
		return &n.Podname
	case bytes.EqualFold(key, []byte("nodename")):
		return &n.Nodename
	}
	return nil
}

// unquote is a JSON string's value: a plain one (printable ASCII, no
// escapes) as it is, any other as encoding/json reads it.
func unquote(q []byte) (string, bool) {
	plain := true
	for _, c := range q[1 : len(q)-1] {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return string(q[1 : len(q)-1]), true
	}
	var s string
	return s, json.Unmarshal(q, &s) == nil
}

// peeker walks a JSON document without decoding it.
type peeker struct {
	b []byte
	i int
}

func (p *peeker) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte reads c after white space.
func (p *peeker) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string after white space, quotes included.
func (p *peeker) str() ([]byte, bool) {
	p.space()
	start := p.i
	if p.i >= len(p.b) || p.b[p.i] != '"' || !p.skipString() {
		return nil, false
	}
	return p.b[start:p.i], true
}

// skipString passes the string at p.i, its quotes included.
func (p *peeker) skipString() bool {
	p.i++
	for {
		j := bytes.IndexAny(p.b[p.i:], `"\`)
		if j < 0 {
			return false
		}
		p.i += j
		if p.b[p.i] == '"' {
			p.i++
			return true
		}
		p.i += 2 // a backslash and the byte it escapes
		if p.i > len(p.b) {
			return false
		}
	}
}

// skip passes one value: a string, an object or array (nested ones
// counted, strings passed whole), or a literal up to what ends it.
func (p *peeker) skip() bool {
	if p.i >= len(p.b) {
		return false
	}
	switch p.b[p.i] {
	case '"':
		return p.skipString()
	case '{', '[':
		depth := 0
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case '"':
				if !p.skipString() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					p.i++
					return true
				}
			}
			p.i++
		}
		return false
	}
	start := p.i
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return p.i > start
		}
		p.i++
	}
	return p.i > start
}

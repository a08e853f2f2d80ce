package forward

import (
	"bytes"
	"unicode/utf8"
)

// Named is what the daemon and the front read of a verb's request: the
// fields that name its pod and node.
type Named struct {
	Podname  string `json:"podname"`
	Nodename string `json:"nodename"`
}

// Names reads the naming fields of a verb's request as encoding/json
// decodes them into Named (keys matched without regard to case, the last
// of a repeated key winning, a value that is not a string ignored), without
// decoding the rest and without encoding/json: a capacity query names
// 10,000 nodes, which json.Unmarshal would decode and check only to drop
// them, and the front links no JSON codec. A request that is not a JSON
// object answers zero; one that is malformed may answer the names read
// before the fault (the verb itself reports it; the names only pick the
// call's flow and a write's node lock, and name the node in a message).
func Names(stdin []byte) Named {
	var n Named
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
func (n *Named) field(key []byte) *string {
	k, ok := unquote(key)
	if !ok {
		return nil
	}
	key = []byte(k)
	switch {
	case bytes.EqualFold(key, []byte("podname")):
		return &n.Podname
	case bytes.EqualFold(key, []byte("nodename")):
		return &n.Nodename
	}
	return nil
}

// unquote is a JSON string's value as encoding/json reads it: escapes
// decoded (a lone or broken surrogate read as U+FFFD), each byte of
// invalid UTF-8 read as U+FFFD; false for a control character or a bad
// escape.
func unquote(q []byte) (string, bool) {
	s := q[1 : len(q)-1]
	plain := true
	for _, c := range s {
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return string(s), true
	}
	b := make([]byte, 0, len(s)+utf8.UTFMax)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			switch s[i+1] {
			case '"', '\\', '/', '\'':
				b = append(b, s[i+1])
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(s[i:])
				if r < 0 {
					return "", false
				}
				i += 6
				if 0xd800 <= r && r < 0xe000 { // a surrogate: its pair must follow
					if r2 := hex4(s[i:]); r < 0xdc00 && 0xdc00 <= r2 && r2 < 0xe000 {
						b = utf8.AppendRune(b, (r-0xd800)<<10|(r2-0xdc00)+0x10000)
						i += 6
						continue
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	return string(b), true
}

// hex4 is the code of the \uXXXX escape s starts with; -1 when it does not.
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
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

package types

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// AppendJSON appends the answer as encoding/json encodes it with HTML
// escaping off (the plugins' answers), byte for byte, without reflection:
// a capacity answer holds a map entry per node, and encoding/json sorts a
// map's keys through reflection (at 10,000 nodes most of the serve daemon's
// time for a remembered query). A value encoding/json refuses (a NaN or an
// infinite float) is refused with its error.
func (d DeployCapacity) AppendJSON(b []byte) ([]byte, error) {
	if d.Nodes == nil {
		b = append(b, `{"nodes_deploy_capacity_map":null,"total":`...)
		return append(strconv.AppendInt(b, int64(d.Total), 10), '}'), nil
	}
	start, names := len(b), d.sortedNames()
	b = slices.Grow(b, len(names)*(len(`"":{"capacity":,"usage":,"rate":,"weight":},`)+48)+64)
	b = append(b, `{"nodes_deploy_capacity_map":{`...)
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, n)
		c, ok := d.Nodes[n]
		if !ok { // d.order named another node: sort the keys after all
			d.order = nil
			return d.AppendJSON(b[:start])
		}
		if !finite(c.Usage) || !finite(c.Rate) || !finite(c.Weight) {
			_, err := json.Marshal(plainDeployCapacity(d))
			return b[:start], err
		}
		b = append(b, `:{"capacity":`...)
		b = strconv.AppendInt(b, int64(c.Capacity), 10)
		b = append(b, `,"usage":`...)
		b = appendFloat(b, c.Usage)
		b = append(b, `,"rate":`...)
		b = appendFloat(b, c.Rate)
		b = append(b, `,"weight":`...)
		b = appendFloat(b, c.Weight)
		b = append(b, '}')
	}
	b = append(b, `},"total":`...)
	return append(strconv.AppendInt(b, int64(d.Total), 10), '}'), nil
}

// sortedNames are d.order when it is strictly increasing and as long as
// d.Nodes (AppendJSON then finds each of them in d.Nodes, or sorts after
// all), else the keys of d.Nodes sorted, as encoding/json writes them.
func (d DeployCapacity) sortedNames() []string {
	if len(d.order) == len(d.Nodes) && increasing(d.order) {
		return d.order
	}
	names := make([]string, 0, len(d.Nodes))
	for n := range d.Nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// increasing reports whether every name sorts after the one before it.
func increasing(names []string) bool {
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			return false
		}
	}
	return true
}

// MarshalJSON is AppendJSON for encoding/json (which escapes HTML in it
// when asked, as it would have).
func (d DeployCapacity) MarshalJSON() ([]byte, error) { return d.AppendJSON(nil) }

// plainDeployCapacity is DeployCapacity without its methods: encoding/json's
// own encoding of it.
type plainDeployCapacity DeployCapacity

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendFloat is encoding/json's encoding of a float64.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString is encoding/json's encoding of a string with HTML escaping
// off: a plain name (printable ASCII without a quote or a backslash) as it
// is, any other through encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

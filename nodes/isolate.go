package nodes

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/eru-extend/resources/types"
)

// IsolateResult is isolate's answer: the record after, and each plugin's
// released figures as top-level keys (released_volumes,
// released_cpu_millis, ...), in the plugins' order. The registry does not
// know the figures' names; each plugin contributes its own.
type IsolateResult struct {
	Node    *View
	Figures []types.Figure
}

// add sums figures into the result by name.
func (r *IsolateResult) add(figures []types.Figure) {
	for _, f := range figures {
		i := slices.IndexFunc(r.Figures, func(g types.Figure) bool { return g.Name == f.Name })
		if i < 0 {
			r.Figures = append(r.Figures, f)
			continue
		}
		r.Figures[i].Value += f.Value
	}
}

// Figure is the value of the named figure (0 when absent).
func (r *IsolateResult) Figure(name string) int64 {
	for _, f := range r.Figures {
		if f.Name == name {
			return f.Value
		}
	}
	return 0
}

// MarshalJSON writes {"node": ..., "<figure>": N, ...}.
func (r IsolateResult) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"node":`)
	node, err := json.Marshal(r.Node)
	if err != nil {
		return nil, err
	}
	buf.Write(node)
	for _, f := range r.Figures {
		name, err := json.Marshal(f.Name)
		if err != nil {
			return nil, err
		}
		buf.WriteByte(',')
		buf.Write(name)
		buf.WriteByte(':')
		buf.WriteString(strconv.FormatInt(f.Value, 10))
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON wrote (a replayed answer); the
// figures come back ordered by name.
func (r *IsolateResult) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*r = IsolateResult{}
	for _, k := range types.SortedKeys(m) {
		if k == "node" {
			if err := json.Unmarshal(m[k], &r.Node); err != nil {
				return err
			}
			continue
		}
		var v int64
		if err := json.Unmarshal(m[k], &v); err != nil {
			return err
		}
		r.Figures = append(r.Figures, types.Figure{Name: k, Value: v})
	}
	return nil
}

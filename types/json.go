package types

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// IsNull reports whether a raw JSON value is absent or null.
func IsNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// DecodeObject reads a JSON object into its raw members; an absent or null
// value is no object (nil, no error). what names the value in errors.
func DecodeObject(raw json.RawMessage, what string) (map[string]json.RawMessage, error) {
	if IsNull(raw) {
		return nil, nil
	}
	if raw = bytes.TrimSpace(raw); raw[0] != '{' {
		return nil, Invalid("%s: want a JSON object, got %s", what, ClipJSON(raw))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, Invalid("%s: %v", what, err)
	}
	return m, nil
}

// RefuseUnknown fails on a key of m outside allowed, so that a typo is not
// silently a request for nothing.
func RefuseUnknown(m map[string]json.RawMessage, what string, allowed ...string) error {
	for _, k := range SortedKeys(m) {
		if !slices.Contains(allowed, k) {
			return Invalid("%s: unknown key %q (known: %s)", what, k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// DecodeEach reads a JSON list whose items decode reads, leaving out null
// items (core sends null for a workload that has nothing of a resource). An
// absent or null list is empty.
func DecodeEach[T any](raw json.RawMessage, what string, decode func(json.RawMessage) (T, error)) ([]T, error) {
	items, err := DecodeList(raw, what)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(items))
	for i, item := range items {
		if IsNull(item) {
			continue
		}
		v, err := decode(item)
		if err != nil {
			return nil, Invalid("%s[%d]: %v", what, i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// DecodeList reads a JSON list into its raw items. An absent or null list
// is empty.
func DecodeList(raw json.RawMessage, what string) ([]json.RawMessage, error) {
	if IsNull(raw) {
		return nil, nil
	}
	if raw = bytes.TrimSpace(raw); raw[0] != '[' {
		return nil, Invalid("%s: want a list, got %s", what, ClipJSON(raw))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, Invalid("%s: %v", what, err)
	}
	return items, nil
}

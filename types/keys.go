package types

import (
	"maps"
	"slices"
)

// SortedKeys are a map's keys in order.
func SortedKeys[M ~map[string]V, V any](m M) []string { return slices.Sorted(maps.Keys(m)) }

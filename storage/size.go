package storage

import (
	"encoding/json"

	"github.com/eru-extend/resources/types"
)

// ParseSize reads a byte size or quota (see types.ParseSize).
func ParseSize(s string, signed bool) (int64, error) { return types.ParseSize(s, signed) }

func parseSizeValue(raw json.RawMessage, signed bool) (int64, error) {
	return types.ParseSizeJSON(raw, signed)
}

func clip(raw []byte) string { return types.Clip(raw) }

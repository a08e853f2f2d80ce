package types

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/docker/go-units"
)

// ParseSize reads a byte size or a quota: a plain integer or a human size
// with go-units RAMInBytes semantics ("1T" = "1TiB" = 2^40). A leading minus
// is accepted only when signed is true (realloc deltas); go-units itself
// never takes one. Sizes beyond 2^53 are refused: core reads every answer
// through float64 and would change them.
func ParseSize(s string, signed bool) (int64, error) {
	return ParseSizeAtMost(s, signed, MaxExact)
}

// ParseSizeAtMost is ParseSize with a tighter limit: a size (its magnitude,
// when signed) above most is refused, naming most.
func ParseSizeAtMost(s string, signed bool, most int64) (int64, error) {
	text := strings.TrimSpace(s)
	neg := false
	switch {
	case strings.HasPrefix(text, "-"):
		if !signed {
			return 0, fmt.Errorf("size %q is negative", Clip([]byte(s)))
		}
		neg, text = true, text[1:]
	case strings.HasPrefix(text, "+"):
		text = text[1:]
	}
	if text == "" {
		return 0, fmt.Errorf("size %q is empty", Clip([]byte(s)))
	}
	if plain, err := strconv.ParseUint(text, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		// A plain count of bytes is read exactly: go-units goes through
		// float64, which would round 2^53+1 down into range.
		if err != nil || plain > uint64(most) {
			return 0, fmt.Errorf("size %q is too large (at most %s)", Clip([]byte(s)), SizeLimit(most))
		}
		if neg {
			return -int64(plain), nil
		}
		return int64(plain), nil
	}
	if _, err := strconv.ParseFloat(text, 64); err == nil {
		return 0, fmt.Errorf("size %q is not a whole number of bytes (use a unit for fractions, like 1.5G)", Clip([]byte(s)))
	}
	n, err := units.RAMInBytes(text)
	if err != nil {
		return 0, fmt.Errorf("size %q is not a number of bytes or a human size like 10G", Clip([]byte(s)))
	}
	if n < 0 || n > most {
		return 0, fmt.Errorf("size %q is too large (at most %s)", Clip([]byte(s)), SizeLimit(most))
	}
	if neg {
		n = -n
	}
	return n, nil
}

// ParseSizeJSON reads a size given in JSON as a number or a string.
func ParseSizeJSON(raw json.RawMessage, signed bool) (int64, error) {
	return ParseSizeJSONAtMost(raw, signed, MaxExact)
}

// ParseSizeJSONAtMost is ParseSizeJSON with a tighter limit (ParseSizeAtMost).
func ParseSizeJSONAtMost(raw json.RawMessage, signed bool, most int64) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return ParseSizeAtMost(s, signed, most)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("size %s is neither a number nor a string", ClipJSON(raw))
	}
	return ParseSizeAtMost(n.String(), signed, most)
}

// SizeLimit writes a size limit exactly, in the largest binary unit that
// divides it ("8 PiB", "512 TiB", "1536 B"), for a message naming it.
func SizeLimit(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for n != 0 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return strconv.FormatInt(n, 10) + " " + units[i]
}

// Clip shortens raw input for an error message to at most 40 bytes (and
// an ellipsis), cut between runes, and keeps it valid UTF-8.
func Clip(raw []byte) string {
	const most = 40
	s := strings.ToValidUTF8(string(raw), "?")
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ClipJSON is Clip of raw JSON shown as it is (not quoted): its blanks,
// line breaks among them, are folded into single spaces, so that the
// message stays one line.
func ClipJSON(raw []byte) string { return Clip(bytes.Join(bytes.Fields(raw), []byte{' '})) }

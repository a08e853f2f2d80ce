// Package overcommit is the compute resource: virtual CPU and memory
// admitted against a node's host resources times an overcommit ratio — the
// node's own override, or else the cluster-wide default (docs/overcommit.md).
//
// Ratios are in thousandths (1000 is 1x). Schedulable CPU and memory are
// computed when read, never stored, so a changed ratio applies at the next
// placement; lowering one below what is reserved stops new placement and
// evicts nothing.
package overcommit

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/eru-extend/resources/types"
)

// Ratio bounds, in thousandths.
const (
	MinRatio     = 1
	MaxRatio     = 16000
	DefaultRatio = 1000
)

// DefaultsKey is where the cluster-wide defaults live.
const DefaultsKey = "/overcommit/defaults"

// Defaults are the cluster-wide ratios and their version.
type Defaults struct {
	CPU     int64 `json:"cpu"`
	Memory  int64 `json:"memory"`
	Version int64 `json:"version"`
}

// DecodeDefaults reads the stored defaults; absent defaults are 1000/1000
// at version 0.
func DecodeDefaults(data []byte, ok bool) (Defaults, error) {
	d := Defaults{CPU: DefaultRatio, Memory: DefaultRatio}
	if !ok {
		return d, nil
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, types.Wrap(types.Internal, err, "stored overcommit defaults are corrupt")
	}
	return d, nil
}

// defaultsOf reads the defaults from a verb's environment.
func defaultsOf(env types.Env) Defaults {
	data, ok := env.Shared[DefaultsKey]
	d, err := DecodeDefaults(data, ok)
	if err != nil {
		return Defaults{CPU: DefaultRatio, Memory: DefaultRatio}
	}
	return d
}

// ParseRatio reads a ratio in thousandths and checks its range.
func ParseRatio(what, s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, types.Invalid("%s ratio %q is not an integer (thousandths: 1000 is 1x)", what, types.Clip([]byte(s)))
	}
	return n, CheckRatio(what, n)
}

// CheckRatio refuses a ratio outside [1, 16000].
func CheckRatio(what string, n int64) error {
	if n < MinRatio || n > MaxRatio {
		return types.Invalid("%s ratio %d is out of range: want %d to %d thousandths", what, n, MinRatio, MaxRatio)
	}
	return nil
}

// Source says where a ratio in effect comes from.
type Source string

// Sources of a ratio.
const (
	SourceDefault Source = "DEFAULT"
	SourceNode    Source = "NODE"
)

// Effective is a ratio in effect and its source.
type Effective struct {
	Ratio  int64  `json:"ratio"`
	Source Source `json:"source"`
}

// effective picks the override when set, else the default.
func effective(override *int64, def int64) Effective {
	if override != nil {
		return Effective{Ratio: *override, Source: SourceNode}
	}
	return Effective{Ratio: def, Source: SourceDefault}
}

// schedulable is host × ratio / 1000, rounded down, without overflow: a
// product whose quotient does not fit an int64 saturates (bits.Div64 would
// panic on it).
func schedulable(host, ratio int64) int64 {
	if host <= 0 || ratio <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(host), uint64(ratio))
	if hi >= 1000 {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, 1000)
	return int64(min(q, math.MaxInt64))
}

// MaxHost is the largest host figure accepted: at the largest ratio its
// schedulable figure still fits core's float64 decoding exactly.
const MaxHost = types.MaxExact / 16

// MaxUsage is the largest usage figure (and usage change) accepted: the
// largest schedulable figure, MaxHost at the largest ratio.
const MaxUsage = MaxHost * (MaxRatio / DefaultRatio)

// limitText says a limit (MaxHost, MaxUsage) in a figure's unit, for a
// message naming it: millicores for CPU, bytes (and binary units) for
// memory.
func limitText(most int64, cpu bool) string {
	if cpu {
		return fmt.Sprintf("%d millicores", most)
	}
	return fmt.Sprintf("%d bytes, %s", most, types.SizeLimit(most))
}

// maxHostCPUs is MaxHost as a request writes it, in CPUs (formatted when
// an error needs it, not at every start of the binary).
func maxHostCPUs() string { return fmt.Sprintf("%d.%03d CPUs", MaxHost/1000, MaxHost%1000) }

// ParseMillis reads a CPU count (integer or decimal, e.g. "1.5") as
// millicores, exactly: at most three decimals, and a non-zero value below
// one millicore is an error. signed allows a leading minus (realloc deltas).
func ParseMillis(s string, signed bool) (int64, error) {
	text := strings.TrimSpace(s)
	neg := false
	switch {
	case strings.HasPrefix(text, "-"):
		if !signed {
			return 0, fmt.Errorf("cpu %q is negative", types.Clip([]byte(s)))
		}
		neg, text = true, text[1:]
	case strings.HasPrefix(text, "+"):
		text = text[1:]
	}
	whole, frac, _ := strings.Cut(text, ".")
	if whole == "" && frac == "" || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("cpu %q is not a decimal number of CPUs like 2 or 0.5", types.Clip([]byte(s)))
	}
	if len(frac) > 3 {
		if strings.Trim(frac[3:], "0") != "" {
			return 0, fmt.Errorf("cpu %q is finer than one millicore (at most three decimals)", types.Clip([]byte(s)))
		}
		frac = frac[:3]
	}
	frac += strings.Repeat("0", 3-len(frac))
	whole = strings.TrimLeft(whole, "0") // "007" is 7, not a 3-digit count
	if len(whole) > 13 {
		return 0, fmt.Errorf("cpu %q is too large (at most %s)", types.Clip([]byte(s)), maxHostCPUs())
	}
	w, _ := strconv.ParseInt("0"+whole, 10, 64)
	f, _ := strconv.ParseInt(frac, 10, 64)
	n := w*1000 + f
	if n > MaxHost {
		return 0, fmt.Errorf("cpu %q is too large (at most %s)", types.Clip([]byte(s)), maxHostCPUs())
	}
	if neg {
		n = -n
	}
	return n, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseMillisJSON reads a CPU count given as a JSON number or string.
func parseMillisJSON(raw json.RawMessage, signed bool) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return ParseMillis(s, signed)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("cpu %s is neither a number nor a string", types.ClipJSON(raw))
	}
	return ParseMillis(n.String(), signed)
}

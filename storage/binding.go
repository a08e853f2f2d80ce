package storage

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/eru-extend/resources/types"
)

// Kind is how the scheduler treats a volume binding.
type Kind int

// The four kinds of binding (seed: "Four kinds of binding fall out of that").
const (
	// Mount: the source is a real host path. Not placed; its IO quota is
	// charged to the disk covering the path.
	Mount Kind = iota
	// Normal: AUTO with a size. Placed on a used device, best fit.
	Normal
	// Monopoly: AUTO with flag m. Its workload's monopoly bindings take an
	// unused device to themselves and split it proportionally.
	Monopoly
	// Unlimited: AUTO, size 0, no IO quota. Placed on the device with the
	// most space left, charged nothing.
	Unlimited
)

func (k Kind) String() string {
	return [...]string{"mount", "normal", "monopoly", "unlimited"}[k]
}

// Quota is an IO quota: read IOPS, write IOPS, read BPS, write BPS.
type Quota [4]int64

// QuotaNames are the stored key spellings of the four quotas.
var QuotaNames = [4]string{"read_IOPS", "write_IOPS", "read_bps", "write_bps"}

// IsZero reports whether no quota is asked.
func (q Quota) IsZero() bool { return q == Quota{} }

// Plus returns q + o, each quota saturating at the int64 limits rather
// than wrapping (a saturated figure is then refused as out of range).
func (q Quota) Plus(o Quota) Quota {
	for i := range q {
		q[i] = satAdd(q[i], o[i])
	}
	return q
}

// Minus returns q - o, saturating like Plus.
func (q Quota) Minus(o Quota) Quota {
	for i := range q {
		if o[i] == math.MinInt64 {
			q[i] = satAdd(satAdd(q[i], math.MaxInt64), 1)
			continue
		}
		q[i] = satAdd(q[i], -o[i])
	}
	return q
}

// satAdd is a + b, held at ±MaxInt64 instead of wrapping around (so that
// its result can always be negated).
func satAdd(a, b int64) int64 {
	if s, ok := types.AddInt64(a, b); ok && s != math.MinInt64 {
		return s
	}
	if b > 0 {
		return math.MaxInt64
	}
	return -math.MaxInt64
}

// Covers reports whether every quota of q is at least o's.
func (q Quota) Covers(o Quota) bool {
	for i := range q {
		if q[i] < o[i] {
			return false
		}
	}
	return true
}

// VolumeBinding is one volume a workload asks for:
// source:destination[:flags[:size[:read_IOPS:write_IOPS:read_BPS:write_BPS]]].
type VolumeBinding struct {
	Source      string
	Destination string
	Flags       string // letters sorted; "rw" when none were given
	Size        int64
	Quota       Quota
}

// ParseBinding reads a binding in any of its written forms. signed allows
// negative sizes and quotas, which only a realloc request may carry.
func ParseBinding(s string, signed bool) (*VolumeBinding, error) {
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 2, 3, 4, 8:
	default:
		return nil, fmt.Errorf("volume %q has %d parts: want source:destination[:flags[:size[:read_IOPS:write_IOPS:read_BPS:write_BPS]]]", clip([]byte(s)), len(parts))
	}
	b := &VolumeBinding{Source: parts[0], Destination: parts[1], Flags: "rw"}
	if b.Destination == "" {
		return nil, fmt.Errorf("volume %q has no destination", clip([]byte(s)))
	}
	if len(parts) > 2 && parts[2] != "" {
		flags, err := normalizeFlags(parts[2])
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", clip([]byte(s)), err)
		}
		b.Flags = flags
	}
	if len(parts) > 3 {
		size, err := ParseSize(parts[3], signed)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", clip([]byte(s)), err)
		}
		b.Size = size
	}
	if len(parts) == 8 {
		for i := range b.Quota {
			q, err := ParseSize(parts[4+i], signed)
			if err != nil {
				return nil, fmt.Errorf("volume %q: %s: %w", clip([]byte(s)), QuotaNames[i], err)
			}
			b.Quota[i] = q
		}
	}
	return b, nil
}

// normalizeFlags reads a binding's flags in any order, and in the forms the
// upstream plugin stores: o written after the letter it qualifies ("ro",
// "wo", "rowo"), so an o may follow each of r and w. The result holds each
// letter once, sorted.
func normalizeFlags(flags string) (string, error) {
	seen := map[byte]bool{}
	for i := 0; i < len(flags); i++ {
		c := flags[i]
		switch c {
		case 'r', 'w', 'o', 'm':
		default:
			return "", fmt.Errorf("flag %q is not one of r, w, o, m", c)
		}
		if seen[c] && (c != 'o' || i == 0 || (flags[i-1] != 'r' && flags[i-1] != 'w')) {
			return "", fmt.Errorf("flag %q is given twice", c)
		}
		seen[c] = true
	}
	letters := make([]byte, 0, 4)
	for _, c := range []byte("mrwo") {
		if seen[c] {
			letters = append(letters, c)
		}
	}
	sort.Slice(letters, func(i, j int) bool { return letters[i] < letters[j] })
	return string(letters), nil
}

// CheckDevicePath checks a device, mount or pool path: valid UTF-8,
// absolute, clean (no "..", ".", "//" or trailing "/"), no ':' (the
// separator of every written form), no control characters, and not AUTO.
// what names it in the error.
func CheckDevicePath(what, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s is empty", what)
	case !utf8.ValidString(p):
		return fmt.Errorf("%s %q is not valid UTF-8", what, clip([]byte(p)))
	case strings.ContainsFunc(p, unicode.IsControl):
		return fmt.Errorf("%s %q holds a control character", what, clip([]byte(p)))
	case strings.Contains(p, ":"):
		return fmt.Errorf("%s %q holds ':', which separates the parts of a volume or disk", what, clip([]byte(p)))
	case p == "AUTO" || strings.HasSuffix(p, "/AUTO"):
		return fmt.Errorf("%s %q: AUTO is what a binding asks the scheduler for, not a device", what, clip([]byte(p)))
	case !path.IsAbs(p):
		return fmt.Errorf("%s %q is not an absolute path", what, clip([]byte(p)))
	case path.Clean(p) != p:
		return fmt.Errorf("%s %q is not a clean path (it would be %s)", what, clip([]byte(p)), path.Clean(p))
	}
	return nil
}

// IsAuto reports whether the scheduler chooses the device: the source is
// AUTO, ends in AUTO, or is empty.
func (b *VolumeBinding) IsAuto() bool {
	return b.Source == "" || strings.HasSuffix(b.Source, "AUTO")
}

// Kind classifies the binding.
func (b *VolumeBinding) Kind() Kind {
	switch {
	case !b.IsAuto():
		return Mount
	case strings.Contains(b.Flags, "m"):
		return Monopoly
	case b.Size == 0 && b.Quota.IsZero():
		return Unlimited
	default:
		return Normal
	}
}

// NeedsScheduling reports whether placing the binding involves the
// scheduler: it needs a device, or it asks for IO quota.
func (b *VolumeBinding) NeedsScheduling() bool {
	return b.IsAuto() || !b.Quota.IsZero()
}

// Validate checks a binding of a request (not a delta).
func (b *VolumeBinding) Validate() error {
	if b.Size < 0 {
		return fmt.Errorf("volume %s: negative size", b)
	}
	for i, q := range b.Quota {
		if q < 0 {
			return fmt.Errorf("volume %s: negative %s", b, QuotaNames[i])
		}
	}
	if b.Kind() == Monopoly && b.Size == 0 && b.Quota.IsZero() {
		return fmt.Errorf("volume %s: a monopoly binding needs a size or an IO quota", b)
	}
	return nil
}

// identity is what request and limit bindings, and realloc deltas, are
// matched by.
type identity struct{ source, destination, flags string }

func (b *VolumeBinding) identity() identity {
	return identity{b.Source, b.Destination, b.Flags}
}

// String is the full stored form, sizes in bytes.
func (b *VolumeBinding) String() string {
	return b.Source + ":" + b.Destination + ":" + b.Flags + ":" + strconv.FormatInt(b.Size, 10) + ":" +
		strconv.FormatInt(b.Quota[0], 10) + ":" + strconv.FormatInt(b.Quota[1], 10) + ":" +
		strconv.FormatInt(b.Quota[2], 10) + ":" + strconv.FormatInt(b.Quota[3], 10)
}

// EngineForm is the short form handed to the engine for this binding placed
// on device with size bytes (device "" keeps the source): the m flag
// dropped, o expanded (r to ro, w to wo), and the quota part written only
// when there is one.
func (b *VolumeBinding) EngineForm(device string, size int64) string {
	src := b.Source
	if device != "" {
		src = device
	}
	flags := strings.ReplaceAll(b.Flags, "m", "")
	if strings.Contains(flags, "o") {
		flags = strings.ReplaceAll(flags, "o", "")
		flags = strings.ReplaceAll(flags, "r", "ro")
		flags = strings.ReplaceAll(flags, "w", "wo")
	}
	switch {
	case flags == "" && size == 0 && b.Quota.IsZero():
		return src + ":" + b.Destination
	case b.Quota.IsZero():
		return src + ":" + b.Destination + ":" + flags + ":" + strconv.FormatInt(size, 10)
	default:
		return src + ":" + b.Destination + ":" + flags + ":" + strconv.FormatInt(size, 10) + ":" +
			strconv.FormatInt(b.Quota[0], 10) + ":" + strconv.FormatInt(b.Quota[1], 10) + ":" +
			strconv.FormatInt(b.Quota[2], 10) + ":" + strconv.FormatInt(b.Quota[3], 10)
	}
}

// sortBindings orders bindings by size ascending, ties by full form.
func sortBindings(bs []*VolumeBinding) {
	sort.SliceStable(bs, func(i, j int) bool {
		if bs[i].Size != bs[j].Size {
			return bs[i].Size < bs[j].Size
		}
		return bs[i].String() < bs[j].String()
	})
}

// errInvalid is a shorthand for an invalid_argument error.
func errInvalid(format string, args ...any) error { return types.Invalid(format, args...) }

package pool

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/eru-extend/resources/types"
)

// The two id forms are checked by hand, not by regular expressions: a
// package-level regexp is compiled in every process that links the package,
// before main, whatever the call (a tenth of a millisecond of each plugin
// exec, BENCHMARKS.md). TestIDCheckersMatchTheirPatterns and
// FuzzIDCheckers hold them to the patterns their errors name.

// ValidID checks a pool id: [a-z0-9][a-z0-9._-]{0,62}.
func ValidID(id string) error {
	if !isID(id) {
		return types.Invalid("pool id %q is not valid (want [a-z0-9][a-z0-9._-]{0,62})", types.Clip([]byte(id)))
	}
	return nil
}

// isID reports whether id matches [a-z0-9][a-z0-9._-]{0,62}.
func isID(id string) bool {
	if len(id) == 0 || len(id) > 63 || !isLowerAlnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !isLowerAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// ValidObjectID checks an object id: v- and 16 lowercase hex digits.
func ValidObjectID(id string) error {
	if !isObjectID(id) {
		return types.Invalid("object id %q is not valid (want v- and 16 hex digits)", types.Clip([]byte(id)))
	}
	return nil
}

// isObjectID reports whether id matches v-[0-9a-f]{16}.
func isObjectID(id string) bool {
	hexDigits, ok := strings.CutPrefix(id, "v-")
	if !ok || len(hexDigits) != 16 {
		return false
	}
	for i := 0; i < len(hexDigits); i++ {
		if c := hexDigits[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidPath checks a pool's mount path on a node: absolute, clean, not the
// root, no ':' and no control characters.
func ValidPath(p string) error {
	for _, r := range p {
		if unicode.IsControl(r) {
			return fmt.Errorf("path %q has a control character", types.Clip([]byte(p)))
		}
	}
	switch {
	case p == "":
		return fmt.Errorf("path is empty")
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is not absolute", types.Clip([]byte(p)))
	case strings.Contains(p, ":"):
		return fmt.Errorf("path %q has a ':'", types.Clip([]byte(p)))
	case filepath.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (want %s)", types.Clip([]byte(p)), types.Clip([]byte(filepath.Clean(p))))
	case p == "/":
		return fmt.Errorf("path / is the root directory, not a pool mount")
	}
	return nil
}

// ParseDeclaration reads one "pool_id:mount_path" entry of a node request.
func ParseDeclaration(s string) (string, Declaration, error) {
	id, path, ok := strings.Cut(s, ":")
	if !ok {
		return "", Declaration{}, types.Invalid("pool %q: want pool_id:mount_path", types.Clip([]byte(s)))
	}
	if err := ValidID(id); err != nil {
		return "", Declaration{}, err
	}
	if err := ValidPath(path); err != nil {
		return "", Declaration{}, types.Invalid("pool %s: %v", id, err)
	}
	return id, Declaration{Path: path}, nil
}

// ParsePools reads the "pools" member of a node request: a list of
// "pool_id:mount_path" strings (request form) or the stored object
// {"id": {"path": …}} (a rollback snapshot, or info.Resources["storage"]).
// Absent or null is nil: the request says nothing about pools.
func ParsePools(raw json.RawMessage) (map[string]Declaration, error) {
	if types.IsNull(raw) {
		return nil, nil
	}
	out := map[string]Declaration{}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		for _, s := range list {
			id, d, err := ParseDeclaration(s)
			if err != nil {
				return nil, err
			}
			if _, dup := out[id]; dup {
				return nil, types.Invalid("pool %s is declared twice", id)
			}
			out[id] = d
		}
		if err := (Declarations{Pools: out}).Apart(); err != nil {
			return nil, err
		}
		return out, nil
	}
	if err := decodeStrict(raw, &out); err != nil {
		return nil, types.Invalid("pools: want a list of \"pool_id:mount_path\" or an object of {\"path\": …}: %v", err)
	}
	d := Declarations{Pools: out}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]Declaration{}
	}
	return out, nil
}

// ParseDefaultPool reads the "default-pool" member of a node request.
func ParseDefaultPool(s string) (string, error) {
	if err := ValidID(s); err != nil {
		return "", types.Invalid("default-pool: %v", err)
	}
	return s, nil
}

// ParseRmPools reads "rm-pools": "p1,p2", ids in order, without
// duplicates.
func ParseRmPools(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, types.Invalid("rm-pools is empty (want p1,p2)")
	}
	seen := map[string]bool{}
	var ids []string
	for _, part := range strings.Split(s, ",") {
		id := strings.TrimSpace(part)
		if err := ValidID(id); err != nil {
			return nil, types.Invalid("rm-pools: %v", err)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Source is the source word of a pool binding.
const Source = "POOL"

// IsPoolSource reports whether a binding source asks for a pool volume:
// POOL, or POOL@… .
func IsPoolSource(src string) bool {
	return src == Source || strings.HasPrefix(src, Source+"@")
}

// Binding is one pool volume a workload asks for:
// POOL[@pool[/object]]:destination[:flags[:size[:0:0:0:0]]].
type Binding struct {
	Pool        string // "" for the node's default pool
	Object      string // "" for a new object
	Destination string
	Flags       string // letters sorted; "rw" when none were given
	Size        int64  // 0 for an attach: the size is the object's
}

// ParseBinding reads a pool binding in any written form. signed allows a
// negative size (a realloc delta); otherwise a new object needs a size > 0
// and an attach takes no size. The m flag and IO quotas are refused.
func ParseBinding(s string, signed bool) (*Binding, error) {
	bad := func(format string, args ...any) error {
		return types.Invalid("pool volume %q: %s", types.Clip([]byte(s)), fmt.Sprintf(format, args...))
	}
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 2, 3, 4, 8:
	default:
		return nil, bad("has %d parts: want POOL[@pool[/object]]:destination[:flags[:size]]", len(parts))
	}
	src := parts[0]
	if !IsPoolSource(src) {
		return nil, bad("source is not POOL or POOL@pool")
	}
	b := &Binding{Destination: parts[1], Flags: "rw"}
	if rest, ok := strings.CutPrefix(src, Source+"@"); ok {
		pool, object, hasObject := strings.Cut(rest, "/")
		if err := ValidID(pool); err != nil {
			return nil, bad("%v", err)
		}
		b.Pool = pool
		if hasObject {
			if err := ValidObjectID(object); err != nil {
				return nil, bad("%v", err)
			}
			b.Object = object
		}
	}
	if b.Destination == "" {
		return nil, bad("has no destination")
	}
	if !strings.HasPrefix(b.Destination, "/") {
		return nil, bad("destination %q is not absolute", types.Clip([]byte(b.Destination)))
	}
	for _, r := range b.Destination {
		if unicode.IsControl(r) {
			return nil, bad("destination has a control character")
		}
	}
	if len(parts) > 2 && parts[2] != "" {
		flags, err := sortFlags(parts[2])
		if err != nil {
			return nil, bad("%v", err)
		}
		b.Flags = flags
	}
	if len(parts) > 3 && parts[3] != "" {
		size, err := types.ParseSize(parts[3], signed)
		if err != nil {
			return nil, bad("%v", err)
		}
		b.Size = size
	}
	if len(parts) == 8 {
		for i, q := range parts[4:] {
			v, err := types.ParseSize(q, signed)
			if err != nil || v != 0 {
				return nil, bad("IO quota %s: pool volumes take no IO quota", quotaNames[i])
			}
		}
	}
	switch {
	case signed:
	case b.Object == "" && b.Size <= 0:
		return nil, bad("a new pool object needs a size > 0")
	case b.Object != "" && b.Size != 0:
		return nil, bad("an existing object takes its size from the object; leave the size out")
	}
	return b, nil
}

var quotaNames = [4]string{"read_IOPS", "write_IOPS", "read_bps", "write_bps"}

func sortFlags(flags string) (string, error) {
	letters := []byte(flags)
	seen := map[byte]bool{}
	for _, c := range letters {
		switch c {
		case 'r', 'w', 'o':
		case 'm':
			return "", fmt.Errorf("flag m is invalid on a pool volume (a pool is not a local device)")
		default:
			return "", fmt.Errorf("flag %q is not one of r, w, o", c)
		}
		if seen[c] {
			return "", fmt.Errorf("flag %q is given twice", c)
		}
		seen[c] = true
	}
	sort.Slice(letters, func(i, j int) bool { return letters[i] < letters[j] })
	return string(letters), nil
}

// SourceString is the binding's source: POOL, POOL@pool or
// POOL@pool/object.
func (b *Binding) SourceString() string {
	switch {
	case b.Pool == "":
		return Source
	case b.Object == "":
		return Source + "@" + b.Pool
	default:
		return Source + "@" + b.Pool + "/" + b.Object
	}
}

// String is the full stored form, size in bytes, zero quotas.
func (b *Binding) String() string {
	return b.SourceString() + ":" + b.Destination + ":" + b.Flags + ":" + strconv.FormatInt(b.Size, 10) + ":0:0:0:0"
}

// EngineForm is the short form handed to the engine: the source replaced
// by <path>/<object>, o expanded (r to ro, w to wo), size in bytes.
func (b *Binding) EngineForm(path, object string, bytes int64) string {
	flags := b.Flags
	if strings.Contains(flags, "o") {
		flags = strings.ReplaceAll(flags, "o", "")
		flags = strings.ReplaceAll(flags, "r", "ro")
		flags = strings.ReplaceAll(flags, "w", "wo")
	}
	return path + "/" + object + ":" + b.Destination + ":" + flags + ":" + strconv.FormatInt(bytes, 10)
}

// MintObjectID makes a new object id, v- and 16 hex digits, from random
// bytes read from r (crypto/rand.Reader in production).
func MintObjectID(r io.Reader) (string, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("minting a pool object id: %w", err)
	}
	return "v-" + hex.EncodeToString(b[:]), nil
}

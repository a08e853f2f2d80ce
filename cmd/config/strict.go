package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/types"
)

// The checks here run over the parsed YAML tree before yaml.v3 decodes it
// into the typed structs, so that every problem is reported with the file,
// the dotted key and the line: yaml.v3's own errors name neither the key nor
// the nearest known one. They follow yaml.v3's reading of the document
// exactly: aliases stand for their anchor, a merge key (<<) brings in the
// keys of the mapping (or list of mappings) it names, and keys written in a
// mapping win over merged ones, earlier merges over later ones.

var (
	nodeType        = reflect.TypeFor[yaml.Node]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
)

// coreSections are the top-level keys of eru core's own config
// (types.Config of github.com/projecteru2/core): a copy of core.yaml has
// them, and they are not ours to judge.
var coreSections = []string{
	"log_level", "bind", "lock_timeout", "global_timeout", "connection_timeout", "ha_keepalive_interval",
	"statsd", "profile", "cert_path", "max_concurrency", "store", "sentry_dsn", "probe_target",
	"wal_file", "wal_open_timeout", "auth", "grpc", "git", "etcd", "redis", "docker", "virt", "systemd",
	"scheduler", "resource_plugin",
}

// checker reports the first problem of a document, naming file and key.
type checker struct {
	file string
	// merged memoises pairs by mapping: a mapping an alias names is
	// listed once however often it is merged, so that merges of merges
	// (each naming the one before several times) cost their written size,
	// not the exponential size yaml.v3 refuses as excessive aliasing.
	merged map[*yaml.Node][]pair
}

func (c *checker) fail(n *yaml.Node, path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if n != nil && n.Line > 0 {
		msg += fmt.Sprintf(" (line %d)", n.Line)
	}
	if path == "" {
		return types.Invalid("config %s: %s", c.file, msg)
	}
	return types.Invalid("config %s: %s: %s", c.file, path, msg)
}

// resolve follows an alias to its anchor.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge"
}

// pair is one key of a mapping as yaml.v3 sees it after merges.
type pair struct{ key, value *yaml.Node }

// pairs lists the keys of mapping m with merges applied: written keys
// first, then merged keys not written, in the order yaml.v3 lets them win.
func (c *checker) pairs(m *yaml.Node, path string, depth int) ([]pair, error) {
	if depth > 32 {
		return nil, c.fail(m, path, "merge keys nested too deep")
	}
	if out, ok := c.merged[m]; ok {
		return out, nil
	}
	var (
		out    []pair
		merged []pair
		seen   = map[string]bool{}
	)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if !isMerge(k) {
			out = append(out, pair{k, v})
			seen[k.Value] = true
			continue
		}
		sources := []*yaml.Node{v}
		if r := resolve(v); r != nil && r.Kind == yaml.SequenceNode {
			sources = r.Content
		}
		for _, src := range sources {
			src = resolve(src)
			if src == nil || src.Kind != yaml.MappingNode {
				return nil, c.fail(k, path, "a merge key (<<) must name a mapping or a list of mappings")
			}
			more, err := c.pairs(src, path, depth+1)
			if err != nil {
				return nil, err
			}
			merged = append(merged, more...)
		}
	}
	for _, p := range merged {
		if !seen[p.key.Value] {
			seen[p.key.Value] = true
			out = append(out, p)
		}
	}
	if c.merged == nil {
		c.merged = map[*yaml.Node][]pair{}
	}
	c.merged[m] = out
	return out, nil
}

// duplicates refuses a key written twice in any mapping of the document
// (merged keys may be overridden; written ones may not be repeated).
func (c *checker) duplicates(n *yaml.Node, path string, visited map[*yaml.Node]bool) error {
	if n == nil || visited[n] {
		return nil
	}
	visited[n] = true
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, item := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			if err := c.duplicates(item, p, visited); err != nil {
				return err
			}
		}
	case yaml.AliasNode:
		return c.duplicates(n.Alias, path, visited)
	case yaml.MappingNode:
		first := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			name := join(path, k.Value)
			if k.Kind == yaml.ScalarNode {
				if prev, ok := first[k.Value]; ok {
					return c.fail(k, name, "key given twice, first at line %d", prev.Line)
				}
				first[k.Value] = k
			}
			if err := c.duplicates(n.Content[i+1], name, visited); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// value checks that n can be decoded into a value of type t, at path.
// Mappings decoded into structs may only hold the struct's keys.
func (c *checker) value(n *yaml.Node, t reflect.Type, path string) error {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nodeType:
		if n.Kind != yaml.MappingNode {
			return c.fail(n, path, "want a mapping of keys, got a %s", kindName(n.Kind))
		}
		return nil
	case t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerType):
		return c.mapping(n, t, path, true)
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode && !reflect.PointerTo(t).Implements(unmarshalerType):
		// Each item on its own, so that a wrong one is named by its
		// place (key[1]) and line, and a list of structs refuses unknown
		// keys in its items as a struct does.
		for i, item := range n.Content {
			if err := c.value(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if isInteger(t) && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
		// yaml.v3 truncates a float into an integer field (1.5 reads as
		// 1); only a whole number (1e4) is one.
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err != nil || f != math.Trunc(f) {
			return c.fail(n, path, "%s", scalarMessage(n, "an integer"))
		}
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return c.fail(n, path, "%s", leafMessage(n, t, err))
	}
	return nil
}

// isInteger reports whether t is a plain integer kind (not a type that
// decodes itself, such as a duration or a size).
func isInteger(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(unmarshalerType) || t == durationType {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// mapping checks a mapping decoded into struct t; strict refuses keys t
// does not have.
func (c *checker) mapping(n *yaml.Node, t reflect.Type, path string, strict bool) error {
	if n.Kind != yaml.MappingNode {
		return c.fail(n, path, "want a mapping of keys, got a %s", kindName(n.Kind))
	}
	fields := fieldsOf(t)
	pairs, err := c.pairs(n, path, 0)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		if p.key.Kind != yaml.ScalarNode {
			return c.fail(p.key, path, "a key must be a single value, not a %s", kindName(p.key.Kind))
		}
		name := join(path, p.key.Value)
		f, ok := fields[p.key.Value]
		if !ok {
			if !strict {
				continue
			}
			return c.fail(p.key, name, "unknown key; did you mean %s?", join(path, nearest(p.key.Value, keysOf(fields))))
		}
		if err := c.value(p.value, f.Type, name); err != nil {
			return err
		}
	}
	return nil
}

// fieldsOf maps the yaml keys of struct t to its fields.
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		out[tag] = f
	}
	return out
}

func keysOf(fields map[string]reflect.StructField) []string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// leafMessage says why a value did not decode into a field of type t.
func leafMessage(n *yaml.Node, t reflect.Type, err error) string {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return oneLine(err.Error())
	}
	if t == durationType { // yaml.v3 reads it from "2s", not from a number
		return scalarMessage(n, "a duration like 2s or 500ms")
	}
	switch t.Kind() {
	case reflect.Bool:
		return scalarMessage(n, "true or false")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return scalarMessage(n, "an integer")
	case reflect.Float32, reflect.Float64:
		return scalarMessage(n, "a number")
	case reflect.String:
		return scalarMessage(n, "a single value")
	case reflect.Slice:
		return scalarMessage(n, "a list")
	case reflect.Map:
		return scalarMessage(n, "a mapping")
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return oneLine(strings.Join(te.Errors, "; "))
	}
	return oneLine(err.Error())
}

// nearest is the candidate closest to key by edit distance (ties: the
// first in order).
func nearest(key string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := distance(key, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the edit distance between a and b, a letter swapped with its
// neighbour counting as one edit, as one added, dropped or changed does
// (optimal string alignment): `ectd` is one letter away from etcd, the
// commonest slip of the fingers, not two.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	before := make([]int, len(rb)+1) // the row of i-2
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], before[j-2]+1)
			}
		}
		before, prev, cur = prev, cur, before
	}
	return prev[len(rb)]
}

// misspeltSection refuses a top-level key that is neither one of ours nor
// one of core's but is one or two letters away from one of ours
// (`embeded:`, `node:`): ignoring it, as other sections are ignored, would
// silently switch to the defaults it meant to override.
func (c *checker) misspeltSection(k *yaml.Node, ours []string) error {
	for _, s := range coreSections {
		if k.Value == s {
			return nil
		}
	}
	// Keys that hold anchors for aliases (".etcd", "_base", "x-etcd")
	// are not sections.
	if k.Value == "" || !unicode.IsLetter(rune(k.Value[0])) || strings.HasPrefix(k.Value, "x-") {
		return nil
	}
	best := nearest(k.Value, ours)
	if d := distance(k.Value, best); d == 1 || (d == 2 && len(best) > 4) {
		return c.fail(k, k.Value, "unknown section; did you mean %s?", best)
	}
	return nil
}

// check refuses every problem of doc (the root of a parsed file) before it
// is decoded into d: duplicates anywhere, and in the sections the plugins
// own unknown keys and values of the wrong kind.
func (c *checker) check(doc *yaml.Node) error {
	if err := c.duplicates(doc, "", map[*yaml.Node]bool{}); err != nil {
		return err
	}
	t := reflect.TypeFor[document]()
	fields := fieldsOf(t)
	pairs, err := c.pairs(doc, "", 0)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		if p.key.Kind != yaml.ScalarNode {
			return c.fail(p.key, "", "a key must be a single value, not a %s", kindName(p.key.Kind))
		}
		f, ok := fields[p.key.Value]
		if !ok {
			if err := c.misspeltSection(p.key, keysOf(fields)); err != nil {
				return err
			}
			continue
		}
		if err := c.value(p.value, f.Type, p.key.Value); err != nil {
			return err
		}
	}
	return nil
}

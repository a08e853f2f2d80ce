// Package config finds and reads the plugins' YAML configuration: the subset
// of eru core's own config the plugins use, plus the keys of this project,
// with built-in defaults for everything left out.
//
// The file is decoded into typed structs with gopkg.in/yaml.v3 (anchors,
// aliases and merge keys as YAML defines them). Inside the sections the
// plugins own (etcd, embedded, scheduler, log, nodes, serve, flowcontrol)
// an unknown key is an error naming the nearest known one, except the keys
// eru core defines there; every other section is ignored, so a copy of
// core's own core.yaml works. A key written twice is an error anywhere.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/internal/configsearch"
	"github.com/eru-extend/resources/types"
)

// Config is the whole configuration.
type Config struct {
	// File is the file the configuration came from; empty for defaults.
	File string
	// Source says how File was found.
	Source Source
	// Searched lists, for a configuration on built-in defaults, where a
	// file was looked for, in order.
	Searched []string
	// Warnings are problems that do not stop a command, to be logged (for
	// example a password in a file every user can read).
	Warnings []string
	// Stamp is what Load read from File (zero for defaults and Parse).
	Stamp Stamp

	Etcd      Etcd
	Embedded  Embedded
	Scheduler Scheduler
	Log       Log
	Nodes     Nodes

	// Serve and FlowControl are the raw `serve:` and `flowcontrol:`
	// sections (zero when absent), for the serve daemon to decode with
	// DecodeSection.
	Serve       yaml.Node
	FlowControl yaml.Node
	// Doc is the file's top-level mapping as parsed (zero for defaults),
	// for Line.
	Doc yaml.Node
}

// Etcd says how to reach etcd. No machines means the embedded store.
type Etcd struct {
	Machines    []string
	Prefix      string
	CA          string
	Cert        string
	Key         string
	Username    string
	Password    string
	DialTimeout time.Duration
	CallTimeout time.Duration
}

// Embedded configures the bbolt store used when no etcd machine is named.
type Embedded struct {
	Path        string // absolute after Load
	LockTimeout time.Duration
}

// Scheduler holds placement limits.
type Scheduler struct {
	MaxDeployCount int
}

// Log names the file logs go to; empty means no logs.
type Log struct {
	File string
}

// Nodes configures the node registry (nodes.md).
type Nodes struct {
	RequireSession     bool
	SessionTTL         time.Duration
	ClockSkewTolerance time.Duration
	MemoryTightBytes   int64
}

// UsesEtcd reports whether the configuration names an etcd machine.
func (c *Config) UsesEtcd() bool { return len(c.Etcd.Machines) > 0 }

// Defaulted reports whether no file was found and the built-in defaults
// are in use.
func (c *Config) Defaulted() bool { return c.File == "" }

// DefaultFile is the embedded store's file name when none is configured.
const DefaultFile = "eru-resources.db"

// Default returns the built-in configuration, with relative paths resolved
// against dir.
func Default(dir string) *Config {
	return &Config{
		Source: FromDefaults,
		Etcd: Etcd{
			Prefix:      "/eru-resources",
			DialTimeout: 2 * time.Second,
			CallTimeout: 3 * time.Second,
		},
		Embedded:  Embedded{Path: filepath.Join(dir, DefaultFile), LockTimeout: 2 * time.Second},
		Scheduler: Scheduler{MaxDeployCount: 10000},
		Nodes: Nodes{
			SessionTTL:         30 * time.Second,
			ClockSkewTolerance: 500 * time.Millisecond,
			MemoryTightBytes:   512 << 20,
		},
	}
}

// Load resolves and reads the configuration of the plugin called name
// (storage or compute); explicit is the --config flag's value, if any.
func Load(explicit, name string) (*Config, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, types.Wrap(types.Internal, err, "working directory")
	}
	found, err := Find(explicit, name, wd)
	if err != nil {
		return nil, err
	}
	if found.File == "" {
		cfg := Default(wd)
		cfg.Searched = found.Searched
		return cfg, nil
	}
	stamp, err := ReadFile(found.File)
	if err != nil {
		// A path the operator did not type on this command line says
		// where it came from (a unit file's or a profile's environment).
		what := "config"
		if found.Source == FromEnv {
			what = "config named by $" + EnvPath
		}
		return nil, types.Wrap(fileClass(err), err, what)
	}
	// The file is named as the kernel opened it (through a link before a
	// "..", not cleaned as text): relative paths in it are taken from its
	// folder, and the forwarding front names the file so to the daemon.
	abs := configsearch.Abs(found.File, wd)
	cfg, err := Parse(stamp.Data, abs)
	if err != nil {
		return nil, err
	}
	cfg.Source, cfg.Stamp = found.Source, stamp
	cfg.Warnings = append(cfg.Warnings, exposedSecrets(cfg, stamp.Mode)...)
	return cfg, nil
}

// fileClass is the class of a failure to read a file: permission denied is
// for the operator to fix; anything else names a file that is not there or
// not a file.
func fileClass(err error) types.Class {
	if errors.Is(err, fs.ErrPermission) {
		return types.PermissionDenied
	}
	return types.InvalidArgument
}

// exposedSecrets warns of a password in a file every user of the host can
// read.
func exposedSecrets(cfg *Config, mode fs.FileMode) []string {
	if cfg.Etcd.Password == "" || mode.Perm()&0o004 == 0 {
		return nil
	}
	return []string{fmt.Sprintf("config %s holds etcd.auth.password and every user of this host can read it (mode %04o): chmod o-r %s", cfg.File, mode.Perm(), cfg.File)}
}

// Parse reads a configuration document that came from file (an absolute
// path; relative paths in it are resolved against its folder). Anything
// malformed is an invalid_argument error naming the file, the key and its
// line.
func Parse(data []byte, file string) (*Config, error) {
	cfg := Default(filepath.Dir(file))
	cfg.File = file
	cfg.Source = FromFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) { // an empty file
			return cfg, nil
		}
		return nil, types.Invalid("config %s: %s", file, yamlMessage(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, types.Invalid("config %s: %s", file, yamlMessage(err))
		}
		return nil, types.Invalid("config %s: holds a second YAML document (line %d): keep one", file, extra.Line)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if isNull(doc) {
		return cfg, nil
	}
	if doc.Kind != yaml.MappingNode {
		return nil, types.Invalid("config %s: the document is not a mapping of keys", file)
	}
	c := checker{file: file}
	if err := c.check(doc); err != nil {
		return nil, err
	}
	var d document
	if err := doc.Decode(&d); err != nil {
		return nil, types.Invalid("config %s: %s", file, yamlMessage(err))
	}
	apply(cfg, &d)
	cfg.Doc = *doc
	return cfg, finish(cfg)
}

// apply copies what the document sets over the defaults.
func apply(cfg *Config, d *document) {
	if e := d.Etcd; e != nil {
		if e.Machines != nil {
			cfg.Etcd.Machines = []string(*e.Machines)
		}
		set(&cfg.Etcd.Prefix, e.Prefix)
		set(&cfg.Etcd.CA, e.CA)
		set(&cfg.Etcd.Cert, e.Cert)
		set(&cfg.Etcd.Key, e.Key)
		if e.Auth != nil {
			set(&cfg.Etcd.Username, e.Auth.Username)
			set(&cfg.Etcd.Password, e.Auth.Password)
		}
		setDuration(&cfg.Etcd.DialTimeout, e.DialTimeout)
		setDuration(&cfg.Etcd.CallTimeout, e.CallTimeout)
	}
	if e := d.Embedded; e != nil {
		set(&cfg.Embedded.Path, e.Path)
		setDuration(&cfg.Embedded.LockTimeout, e.LockTimeout)
	}
	if s := d.Scheduler; s != nil {
		set(&cfg.Scheduler.MaxDeployCount, s.MaxDeployCount)
	}
	if l := d.Log; l != nil {
		set(&cfg.Log.File, l.File)
	}
	if n := d.Nodes; n != nil {
		set(&cfg.Nodes.RequireSession, n.RequireSession)
		setDuration(&cfg.Nodes.SessionTTL, (*duration)(n.SessionTTL))
		setDuration(&cfg.Nodes.ClockSkewTolerance, n.ClockSkewTolerance)
		if n.MemoryTightBytes != nil {
			cfg.Nodes.MemoryTightBytes = int64(*n.MemoryTightBytes)
		}
	}
	cfg.Serve = d.Serve
	cfg.FlowControl = d.FlowControl
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func setDuration(dst *time.Duration, src *duration) {
	if src != nil {
		*dst = time.Duration(*src)
	}
}

// finish resolves relative paths and checks what the types alone cannot.
// Each problem names the line of the key it is about (Line), as the
// problems found while decoding do.
func finish(cfg *Config) error {
	if len(cfg.Etcd.Machines) == 0 && cfg.node("etcd.machines") != nil {
		// A template that rendered no endpoint must not put each host on
		// a store of its own.
		return cfg.invalid("etcd.machines", "names no endpoint: list etcd's endpoints, or leave the key out (comment it) for the embedded store%s", cfg.at("etcd.machines"))
	}
	if cfg.Embedded.Path == "" {
		return cfg.invalid("embedded.path", "empty: name the store's file, or leave the key out for %s%s", DefaultFile, cfg.at("embedded.path"))
	}
	dir := filepath.Dir(cfg.File)
	for _, p := range []*string{&cfg.Embedded.Path, &cfg.Log.File, &cfg.Etcd.CA, &cfg.Etcd.Cert, &cfg.Etcd.Key} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	cfg.Etcd.Prefix = strings.TrimSuffix(cfg.Etcd.Prefix, "/")
	if cfg.Etcd.Prefix != "" && !strings.HasPrefix(cfg.Etcd.Prefix, "/") {
		return cfg.invalid("etcd.prefix", "%q must start with /%s", cfg.Etcd.Prefix, cfg.at("etcd.prefix"))
	}
	if cfg.Scheduler.MaxDeployCount < 1 || cfg.Scheduler.MaxDeployCount > 1_000_000 {
		return cfg.invalid("scheduler.max_deploy_count", "%d is not between 1 and 1000000%s", cfg.Scheduler.MaxDeployCount, cfg.at("scheduler.max_deploy_count"))
	}
	switch {
	case cfg.Etcd.Username != "" && cfg.Etcd.Password == "":
		return cfg.invalid("etcd.auth.password", "missing: etcd.auth.username %q is set%s, and etcd's client signs in only with both", cfg.Etcd.Username, cfg.at("etcd.auth.username"))
	case cfg.Etcd.Username == "" && cfg.Etcd.Password != "":
		return cfg.invalid("etcd.auth.username", "missing: etcd.auth.password is set%s, and etcd's client signs in only with both", cfg.at("etcd.auth.password"))
	}
	return nil
}

// invalid is an invalid_argument error about key of the file.
func (c *Config) invalid(key, format string, args ...any) error {
	return types.Invalid("config %s: %s: %s", c.File, key, fmt.Sprintf(format, args...))
}

// at is " (line N)" for the line where the value of key is written, ""
// when it is not written in the file.
func (c *Config) at(key string) string {
	return lineNote(c.Line(key))
}

func lineNote(line int) string {
	if line <= 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d)", line)
}

// DecodeSection decodes the raw section name ("serve" or "flowcontrol")
// into out, a pointer to a struct with yaml tags, as strictly as the
// sections of this package: an unknown key is an error naming the nearest
// known one, a value of the wrong kind an error naming its key; both name
// the file and the line. An absent or empty section leaves out unchanged.
func (c *Config) DecodeSection(name string, out any) error {
	n, ok := c.rawSection(name)
	if !ok || (name != "serve" && name != "flowcontrol") {
		return types.Errorf(types.Internal, "config: no raw section %q", name)
	}
	if isNull(n) {
		return nil
	}
	ch := checker{file: c.File}
	if err := ch.value(n, reflect.TypeOf(out), name); err != nil {
		return err
	}
	if err := n.Decode(out); err != nil {
		return types.Invalid("config %s: %s: %s", c.File, name, yamlMessage(err))
	}
	return nil
}

// rawSection is the section name as the file holds it, aliases and merges
// followed: "serve" and "flowcontrol" as kept for DecodeSection, any other
// from the parsed document (nil when the file does not write it).
func (c *Config) rawSection(name string) (*yaml.Node, bool) {
	switch name {
	case "serve":
		return resolve(&c.Serve), true
	case "flowcontrol":
		return resolve(&c.FlowControl), true
	}
	if c.Doc.Kind != yaml.MappingNode {
		return nil, true
	}
	ch := checker{file: c.File}
	return ch.lookup(&c.Doc, name), true
}

// lookup is the value of key in mapping n as yaml.v3 reads it (merges
// followed, written keys winning), aliases resolved; nil when absent.
func (c *checker) lookup(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	ps, err := c.pairs(n, "", 0)
	if err != nil {
		return nil
	}
	for _, p := range ps {
		if p.key.Value == key {
			return resolve(p.value)
		}
	}
	return nil
}

// Line is the line of the file where the value of a key ("etcd.prefix",
// "serve.tls.cert", "serve.allowed_uids[1]") is written, merges and
// aliases followed; 0 when the key is not written there (a default).
// Errors found after the file is decoded name it, as decoding errors do.
func (c *Config) Line(path string) int {
	if n := c.node(path); n != nil {
		return n.Line
	}
	return 0
}

// node is the value of the key at path as the file writes it, nil when it
// is not written.
func (c *Config) node(path string) *yaml.Node {
	name, rest, _ := strings.Cut(path, ".")
	key, index, indexed := strings.Cut(strings.TrimSuffix(name, "]"), "[")
	n, ok := c.rawSection(key)
	if !ok {
		return nil
	}
	ch := checker{file: c.File}
	for {
		if n != nil && indexed {
			i, err := strconv.Atoi(index)
			if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = resolve(n.Content[i])
		}
		if rest == "" || n == nil {
			return n
		}
		var step string
		step, rest, _ = strings.Cut(rest, ".")
		key, index, indexed = strings.Cut(strings.TrimSuffix(step, "]"), "[")
		n = ch.lookup(n, key)
	}
}

// lineOf is the line where key's value is written, or, when that value is
// a list, the line of its item value.
func (c *Config) lineOf(key, value string) int {
	n := c.node(key)
	if n == nil {
		return 0
	}
	if n.Kind == yaml.SequenceNode && value != "" {
		for _, item := range n.Content {
			if item = resolve(item); item != nil && item.Kind == yaml.ScalarNode && item.Value == value {
				return item.Line
			}
		}
	}
	return n.Line
}

func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return oneLine(strings.Join(te.Errors, "; "))
	}
	return oneLine(err.Error())
}

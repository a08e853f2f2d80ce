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
		return nil, types.Wrap(fileClass(err), err, "config")
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
func finish(cfg *Config) error {
	file := cfg.File
	if cfg.Embedded.Path == "" {
		return types.Invalid("config %s: embedded.path: empty: name the store's file, or leave the key out for %s", file, DefaultFile)
	}
	dir := filepath.Dir(file)
	for _, p := range []*string{&cfg.Embedded.Path, &cfg.Log.File, &cfg.Etcd.CA, &cfg.Etcd.Cert, &cfg.Etcd.Key} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	cfg.Etcd.Prefix = strings.TrimSuffix(cfg.Etcd.Prefix, "/")
	if cfg.Etcd.Prefix != "" && !strings.HasPrefix(cfg.Etcd.Prefix, "/") {
		return types.Invalid("config %s: etcd.prefix: %q must start with /", file, cfg.Etcd.Prefix)
	}
	if cfg.Scheduler.MaxDeployCount < 1 || cfg.Scheduler.MaxDeployCount > 1_000_000 {
		return types.Invalid("config %s: scheduler.max_deploy_count: %d is not between 1 and 1000000", file, cfg.Scheduler.MaxDeployCount)
	}
	switch {
	case cfg.Etcd.Username != "" && cfg.Etcd.Password == "":
		return types.Invalid("config %s: etcd.auth.password: missing: etcd.auth.username %q is set, and etcd's client signs in only with both", file, cfg.Etcd.Username)
	case cfg.Etcd.Username == "" && cfg.Etcd.Password != "":
		return types.Invalid("config %s: etcd.auth.username: missing: etcd.auth.password is set, and etcd's client signs in only with both", file)
	}
	return nil
}

// DecodeSection decodes the raw section name ("serve" or "flowcontrol")
// into out, a pointer to a struct with yaml tags, as strictly as the
// sections of this package: an unknown key is an error naming the nearest
// known one, a value of the wrong kind an error naming its key; both name
// the file and the line. An absent or empty section leaves out unchanged.
func (c *Config) DecodeSection(name string, out any) error {
	n, ok := c.rawSection(name)
	if !ok {
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

// rawSection is the section name ("serve" or "flowcontrol") as the file
// holds it, aliases followed.
func (c *Config) rawSection(name string) (*yaml.Node, bool) {
	switch name {
	case "serve":
		return resolve(&c.Serve), true
	case "flowcontrol":
		return resolve(&c.FlowControl), true
	}
	return nil, false
}

// Line is the line of the file where the value of a key of a raw section
// ("serve.tls.cert", "serve.allowed_uids[1]") is written, merges followed;
// 0 when the key is not written there (a default). Errors found after a
// section is decoded name it, as decoding errors do.
func (c *Config) Line(path string) int {
	name, rest, _ := strings.Cut(path, ".")
	n, ok := c.rawSection(name)
	if !ok {
		return 0
	}
	ch := checker{file: c.File}
	for rest != "" {
		var step string
		step, rest, _ = strings.Cut(rest, ".")
		key, index, indexed := strings.Cut(strings.TrimSuffix(step, "]"), "[")
		if n == nil || n.Kind != yaml.MappingNode {
			return 0
		}
		ps, err := ch.pairs(n, name, 0)
		if err != nil {
			return 0
		}
		var next *yaml.Node
		for _, p := range ps {
			if p.key.Value == key {
				next = resolve(p.value)
			}
		}
		if next != nil && indexed {
			i, err := strconv.Atoi(index)
			if err != nil || next.Kind != yaml.SequenceNode || i < 0 || i >= len(next.Content) {
				return 0
			}
			next = resolve(next.Content[i])
		}
		n = next
	}
	if n == nil {
		return 0
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

// Package config finds and reads the plugins' YAML configuration: the subset
// of eru core's own config the plugins use, plus the keys of this project,
// with built-in defaults for everything left out.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/types"
)

// EnvPath names the environment variable that points at a config file.
const EnvPath = "ERU_RESOURCE_CONFIG_PATH"

// Config is the whole configuration.
type Config struct {
	// File is the file the configuration came from; empty for defaults.
	File      string
	Etcd      Etcd
	Embedded  Embedded
	Scheduler Scheduler
	Log       Log
	Nodes     Nodes
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

// Default returns the built-in configuration, with relative paths resolved
// against dir.
func Default(dir string) *Config {
	return &Config{
		Etcd: Etcd{
			Prefix:      "/eru-resources",
			DialTimeout: 2 * time.Second,
			CallTimeout: 3 * time.Second,
		},
		Embedded:  Embedded{Path: filepath.Join(dir, "eru-resources.db"), LockTimeout: 2 * time.Second},
		Scheduler: Scheduler{MaxDeployCount: 10000},
		Nodes: Nodes{
			SessionTTL:         30 * time.Second,
			ClockSkewTolerance: 500 * time.Millisecond,
			MemoryTightBytes:   512 << 20,
		},
	}
}

// Resolve finds the config file: the explicit path when given, else the one
// named by ERU_RESOURCE_CONFIG_PATH, else <name>.yaml in the working
// directory if it exists. It returns "" when there is none.
func Resolve(explicit, name, workdir string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if env := os.Getenv(EnvPath); env != "" {
		return env, nil
	}
	candidate := filepath.Join(workdir, name+".yaml")
	if _, err := os.Stat(candidate); err == nil {
		return candidate, nil
	}
	return "", nil
}

// Load resolves and reads the configuration of the plugin called name.
func Load(explicit, name string) (*Config, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, types.Wrap(types.Internal, err, "working directory")
	}
	file, err := Resolve(explicit, name, wd)
	if err != nil {
		return nil, err
	}
	if file == "" {
		return Default(wd), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, types.Wrap(types.InvalidArgument, err, "config")
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, types.Wrap(types.InvalidArgument, err, "config "+file)
	}
	return Parse(data, abs)
}

// Parse reads a configuration document that came from file (an absolute
// path; relative paths in it are resolved against its folder). Keys this
// project does not use are ignored; a key it uses with a value of the wrong
// kind is an error naming the file and the key.
func Parse(data []byte, file string) (*Config, error) {
	cfg := Default(filepath.Dir(file))
	cfg.File = file
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, types.Invalid("config %s: %s", file, oneLine(err))
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind == 0 { // empty file
		return cfg, nil
	}
	if doc.Kind != yaml.MappingNode {
		return nil, types.Invalid("config %s: the document is not a mapping of keys", file)
	}
	r := reader{root: doc, file: file}
	r.strings("etcd.machines", &cfg.Etcd.Machines)
	r.string("etcd.prefix", &cfg.Etcd.Prefix)
	r.string("etcd.ca", &cfg.Etcd.CA)
	r.string("etcd.cert", &cfg.Etcd.Cert)
	r.string("etcd.key", &cfg.Etcd.Key)
	r.string("etcd.auth.username", &cfg.Etcd.Username)
	r.string("etcd.auth.password", &cfg.Etcd.Password)
	r.duration("etcd.dial_timeout", &cfg.Etcd.DialTimeout)
	r.duration("etcd.call_timeout", &cfg.Etcd.CallTimeout)
	r.string("embedded.path", &cfg.Embedded.Path)
	r.duration("embedded.lock_timeout", &cfg.Embedded.LockTimeout)
	r.integer("scheduler.max_deploy_count", &cfg.Scheduler.MaxDeployCount)
	r.string("log.file", &cfg.Log.File)
	r.boolean("nodes.require_session", &cfg.Nodes.RequireSession)
	r.duration("nodes.session_ttl", &cfg.Nodes.SessionTTL)
	r.duration("nodes.clock_skew_tolerance", &cfg.Nodes.ClockSkewTolerance)
	r.size("nodes.memory_tight_bytes", &cfg.Nodes.MemoryTightBytes)
	if r.err != nil {
		return nil, r.err
	}
	dir := filepath.Dir(file)
	for _, p := range []*string{&cfg.Embedded.Path, &cfg.Log.File, &cfg.Etcd.CA, &cfg.Etcd.Cert, &cfg.Etcd.Key} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	cfg.Etcd.Prefix = strings.TrimSuffix(cfg.Etcd.Prefix, "/")
	if cfg.Etcd.Prefix != "" && !strings.HasPrefix(cfg.Etcd.Prefix, "/") {
		return nil, types.Invalid("config %s: etcd.prefix: %q must start with /", file, cfg.Etcd.Prefix)
	}
	if cfg.Scheduler.MaxDeployCount < 1 || cfg.Scheduler.MaxDeployCount > 1_000_000 {
		return nil, types.Invalid("config %s: scheduler.max_deploy_count: %d is not between 1 and 1000000", file, cfg.Scheduler.MaxDeployCount)
	}
	return cfg, nil
}

// reader looks up dotted keys in a YAML mapping and keeps the first error.
type reader struct {
	root *yaml.Node
	file string
	err  error
}

func (r *reader) lookup(path string) *yaml.Node {
	node := r.root
	for _, part := range strings.Split(path, ".") {
		if node.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == part {
				next = node.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		node = next
	}
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	return node
}

func (r *reader) fail(path string, format string, args ...any) {
	if r.err == nil {
		r.err = types.Invalid("config %s: %s: %s", r.file, path, fmt.Sprintf(format, args...))
	}
}

func (r *reader) scalar(path string) (string, bool) {
	n := r.lookup(path)
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		r.fail(path, "want a single value, got a %s", kindName(n.Kind))
		return "", false
	}
	return n.Value, true
}

func (r *reader) string(path string, out *string) {
	if v, ok := r.scalar(path); ok {
		*out = v
	}
}

func (r *reader) strings(path string, out *[]string) {
	n := r.lookup(path)
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value != "" {
			*out = []string{n.Value}
		}
	case yaml.SequenceNode:
		var list []string
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				r.fail(path, "want a list of strings")
				return
			}
			if item.Value != "" {
				list = append(list, item.Value)
			}
		}
		*out = list
	default:
		r.fail(path, "want a list of strings, got a %s", kindName(n.Kind))
	}
}

func (r *reader) duration(path string, out *time.Duration) {
	v, ok := r.scalar(path)
	if !ok {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(path, "%q is not a positive duration like 2s or 500ms", v)
		return
	}
	*out = d
}

func (r *reader) integer(path string, out *int) {
	v, ok := r.scalar(path)
	if !ok {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.fail(path, "%q is not an integer", v)
		return
	}
	*out = n
}

func (r *reader) size(path string, out *int64) {
	v, ok := r.scalar(path)
	if !ok {
		return
	}
	n, err := units.RAMInBytes(v)
	if err != nil || n < 0 {
		r.fail(path, "%q is not a size like 536870912 or 512M", v)
		return
	}
	*out = n
}

func (r *reader) boolean(path string, out *bool) {
	v, ok := r.scalar(path)
	if !ok {
		return
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(path, "%q is not true or false", v)
		return
	}
	*out = b
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return "value"
	}
}

func oneLine(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return strings.Join(te.Errors, "; ")
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

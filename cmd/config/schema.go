package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/docker/go-units"
	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/nodes"
)

// document is the config file as written: every section the plugins own,
// with the keys of each. Pointers tell a key left out (or null) from a key
// given, so that defaults fill only what is left out. Keys that eru core
// defines in the same sections (so that a copy of core's core.yaml works)
// are declared and ignored: they are marked `core` in a comment.
type document struct {
	Etcd        *etcdSection      `yaml:"etcd"`
	Embedded    *embeddedSection  `yaml:"embedded"`
	Scheduler   *schedulerSection `yaml:"scheduler"`
	Log         *logSection       `yaml:"log"`
	Nodes       *nodesSection     `yaml:"nodes"`
	Serve       yaml.Node         `yaml:"serve"`       // decoded by the serve daemon
	FlowControl yaml.Node         `yaml:"flowcontrol"` // decoded by the serve daemon's flow control
}

type etcdSection struct {
	Machines    *stringList  `yaml:"machines"`
	Prefix      *string      `yaml:"prefix"`
	LockPrefix  *string      `yaml:"lock_prefix"` // core
	CA          *string      `yaml:"ca"`
	Cert        *string      `yaml:"cert"`
	Key         *string      `yaml:"key"`
	Auth        *authSection `yaml:"auth"`
	DialTimeout *duration    `yaml:"dial_timeout"`
	CallTimeout *duration    `yaml:"call_timeout"`
}

type authSection struct {
	Username *string `yaml:"username"`
	Password *string `yaml:"password"`
}

type embeddedSection struct {
	Path        *string   `yaml:"path"`
	LockTimeout *duration `yaml:"lock_timeout"`
}

type schedulerSection struct {
	MaxShare       *int `yaml:"maxshare"`  // core
	ShareBase      *int `yaml:"sharebase"` // core
	MaxDeployCount *int `yaml:"max_deploy_count"`
}

type logSection struct {
	File *string `yaml:"file"`
}

type nodesSection struct {
	RequireSession     *bool       `yaml:"require_session"`
	SessionTTL         *sessionTTL `yaml:"session_ttl"`
	ClockSkewTolerance *duration   `yaml:"clock_skew_tolerance"`
	MemoryTightBytes   *size       `yaml:"memory_tight_bytes"`
}

// duration is a positive time.Duration written as Go writes them: 2s, 500ms.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration like 2s or 500ms, got a %s", kindName(n.Kind))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q is not a positive duration like 2s or 500ms", n.Value)
	}
	*d = duration(v)
	return nil
}

// sessionTTL is a duration a heartbeat's session may live: the registry's
// own bound (nodes.SessionTTL), so that a config the heartbeat would refuse
// is refused where it is read, naming its file and line.
type sessionTTL duration

func (d *sessionTTL) UnmarshalYAML(n *yaml.Node) error {
	var v duration
	if err := v.UnmarshalYAML(n); err != nil {
		return err
	}
	// v is positive already: what the bound refuses is too long.
	if _, err := nodes.SessionTTL(time.Duration(v)); err != nil {
		return fmt.Errorf("%q is longer than a heartbeat's session may live: want at most %s", n.Value, nodes.MaxSessionTTL)
	}
	*d = sessionTTL(v)
	return nil
}

// size is a byte count, plain or with a binary unit: 536870912, 512M, 1GiB.
type size int64

func (s *size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a size like 536870912 or 512M, got a %s", kindName(n.Kind))
	}
	v, err := units.RAMInBytes(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a size like 536870912 or 512M", n.Value)
	}
	*s = size(v)
	return nil
}

// stringList is a list of strings, or one string standing for a list of
// one, as core's config allows for etcd.machines. Empty strings are dropped.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = nil
		if n.Value != "" {
			*l = stringList{n.Value}
		}
		return nil
	case yaml.SequenceNode:
		var list stringList
		for _, item := range n.Content {
			if item.Kind == yaml.AliasNode {
				item = item.Alias
			}
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("want a list of strings, got a %s in it", kindName(item.Kind))
			}
			if item.Value != "" {
				list = append(list, item.Value)
			}
		}
		*l = list
		return nil
	}
	return fmt.Errorf("want a list of strings, got a %s", kindName(n.Kind))
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	default:
		return "value"
	}
}

// scalarMessage says what is wrong with a value yaml.v3 could not put in a
// plain field of kind want.
func scalarMessage(n *yaml.Node, want string) string {
	if n.Kind != yaml.ScalarNode {
		return fmt.Sprintf("want %s, got a %s", want, kindName(n.Kind))
	}
	return fmt.Sprintf("%q is not %s", n.Value, want)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

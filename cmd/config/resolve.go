package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/eru-extend/resources/internal/configsearch"
	"github.com/eru-extend/resources/types"
)

// EnvPath names the environment variable that points at a config file.
const EnvPath = configsearch.EnvPath

// SharedName is the config file both plugins read when neither has a file
// of its own in the working directory.
const SharedName = configsearch.SharedName

// MaxFileSize is the largest config file Load reads.
const MaxFileSize = configsearch.MaxFileSize

// Source says how the config file was found.
type Source string

// Where a configuration can come from, in the order they are tried.
const (
	FromFlag     Source = "--config"
	FromEnv      Source = "$" + EnvPath
	FromWorkdir  Source = "the plugin's own file"
	FromSibling  Source = "the sibling plugin's file"
	FromShared   Source = "the shared file"
	FromDefaults Source = "built-in defaults"
	FromFile     Source = "a file" // Parse of a document not found by Load
)

// Found is the outcome of the search for a config file.
type Found struct {
	File     string // empty: none, use the built-in defaults
	Source   Source
	Searched []string // every place looked at, in order
}

// Resolve is Find's file: "" when there is none.
func Resolve(explicit, name, workdir string) (string, error) {
	found, err := Find(explicit, name, workdir)
	return found.File, err
}

// Find looks for the config file of the plugin called name: the explicit
// path when given (--config), else the one named by $ERU_RESOURCE_CONFIG_PATH,
// else, in the working directory, <name>.yaml, the sibling plugin's file,
// eru-resources.yaml. None of them means the built-in defaults.
func Find(explicit, name, workdir string) (Found, error) {
	searched := []string{string(FromFlag), string(FromEnv)}
	if explicit != "" {
		return Found{File: explicit, Source: FromFlag, Searched: searched[:1]}, nil
	}
	if env := os.Getenv(EnvPath); env != "" {
		return Found{File: env, Source: FromEnv, Searched: searched}, nil
	}
	sources := map[configsearch.Place]Source{configsearch.Own: FromWorkdir, configsearch.Sibling: FromSibling, configsearch.Shared: FromShared}
	for _, c := range configsearch.Candidates(name, workdir) {
		searched = append(searched, c.File)
		if !configsearch.Exists(c.File) {
			continue
		}
		if info, err := os.Stat(c.File); err == nil && info.IsDir() {
			return Found{}, types.Invalid("config %s: is a folder, not a file", c.File)
		}
		// A file that exists but cannot be looked at is still the one
		// meant: reading it says why it cannot be used.
		return Found{File: c.File, Source: sources[c.Place], Searched: searched}, nil
	}
	return Found{Source: FromDefaults, Searched: searched}, nil
}

// DefaultsNotice is the line an operator command prints on stderr when it
// runs on the built-in defaults ("" when a file was found), so that an
// operator in the wrong folder learns why it sees no nodes.
func (c *Config) DefaultsNotice() string {
	if !c.Defaulted() {
		return ""
	}
	where := "etcd " + strings.Join(c.Etcd.Machines, ",")
	if !c.UsesEtcd() {
		where = "the embedded store " + c.Embedded.Path
	}
	looked := ""
	if len(c.Searched) > 0 {
		looked = " (looked for " + strings.Join(c.Searched, ", ") + ")"
	}
	return fmt.Sprintf("no config file found%s: using built-in defaults and %s", looked, where)
}

// LogAttr describes where the configuration came from, for the log.
func (c *Config) LogAttr() slog.Attr {
	file := c.File
	if file == "" {
		file = "none"
	}
	return slog.Group("config", slog.String("file", file), slog.String("source", string(c.Source)))
}

// FlagFromArgs finds --config PATH (or --config=PATH, -config PATH) anywhere
// on a command line, before a "--", and returns its value and the command
// line without it, so that the flag works after a command's own flags and
// arguments too (`storage nodes list --config f`). Given twice, or without
// a value, it is an error.
func FlagFromArgs(args []string) (path string, rest []string, err error) {
	rest = make([]string, 0, len(args))
	found := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", nil, types.Invalid("--config: want a file name after it")
			}
			i++
			value = args[i]
		}
		if value == "" {
			return "", nil, types.Invalid("--config: empty file name")
		}
		if found {
			return "", nil, types.Invalid("--config given twice (%s and %s)", path, value)
		}
		path, found = value, true
	}
	return path, rest, nil
}

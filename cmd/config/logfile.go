package config

import (
	"log/slog"
	"os"

	"github.com/eru-extend/resources/types"
)

// OpenLog opens log.file for appending, creating it when missing; it
// returns nil and no error when no log file is configured. A file that
// cannot be opened is an error naming it and the config it came from:
// operator commands fail on it (an operator expects the audit trail they
// configured); plugin verbs, whose answer core needs more than a log, may
// go on without one.
func (c *Config) OpenLog() (*os.File, error) {
	if c.Log.File == "" {
		return nil, nil
	}
	f, err := os.OpenFile(c.Log.File, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		from := "config " + c.File
		if c.File == "" {
			from = "built-in defaults"
		}
		return nil, types.Wrap(fileClass(err), err, from+": log.file")
	}
	return f, nil
}

// Logger is the JSON logger of one call of plugin: every line carries the
// plugin, the process id and where the configuration came from, and the
// configuration's warnings are logged first. With no log.file it discards
// everything. required says whether a log.file that cannot be opened fails
// the call (operator commands) or is left out (plugin verbs). close closes
// the file.
func (c *Config) Logger(plugin string, required bool) (log *slog.Logger, close func(), err error) {
	f, err := c.OpenLog()
	if err != nil && required {
		return nil, nil, err
	}
	if f == nil {
		return slog.New(slog.DiscardHandler), func() {}, nil
	}
	log = slog.New(slog.NewJSONHandler(f, nil)).With("plugin", plugin, "pid", os.Getpid(), c.LogAttr())
	for _, w := range c.Warnings {
		log.Warn("config", "warning", w)
	}
	return log, func() { _ = f.Close() }, nil
}

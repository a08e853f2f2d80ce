package config

import (
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

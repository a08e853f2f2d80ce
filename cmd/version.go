package cmd

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/types"
)

// versionFlag is a run's own --version (urfave/cli's is package-level and
// written while parsing, like its help flag).
func versionFlag() cli.Flag {
	return &cli.BoolFlag{Name: "version", Aliases: []string{"v"}, Usage: "print the version the binary was built from"}
}

// version says what the binary was built from, as the Go toolchain
// recorded it: the module version, the VCS revision and time (and
// "modified" for a dirty tree), and the Go version.
func version(name string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " (no build information)"
	}
	parts := []string{name, info.Main.Version}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		parts = append(parts, "revision "+rev)
		if t := settings["vcs.time"]; t != "" {
			parts = append(parts, "of "+t)
		}
		if settings["vcs.modified"] == "true" {
			parts = append(parts, "(modified)")
		}
	}
	parts = append(parts, info.GoVersion)
	return strings.Join(parts, " ")
}

// rootAction runs when no command is given: --version prints the
// version, anything else the help.
func (r *runner) rootAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError{types.Invalid("unknown command %q (see %s help)", c.Args().First(), r.name)}
	}
	if c.Bool("version") {
		_, err := fmt.Fprintln(r.stdout, version(r.name))
		return err
	}
	return cli.ShowAppHelp(c)
}

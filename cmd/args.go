package cmd

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// reorder moves the flags of the command being run in front of its
// positional arguments. urfave/cli stops parsing flags at the first
// positional argument, so `nodes drain n1 --if-version 3` would otherwise
// take --if-version for a second node name; moved, every flag is parsed
// (an unknown one fails), and none is silently ignored.
func reorder(app *cli.App, args []string) []string {
	out := make([]string, 0, len(args))
	i := takeFlags(app.Flags, args, 0, &out)
	var leaf *cli.Command
	for cmds := app.Commands; i < len(args); {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		out = append(out, args[i])
		i++
		leaf = c
		if len(c.Subcommands) == 0 {
			break
		}
		cmds = c.Subcommands
	}
	if leaf == nil || len(leaf.Subcommands) > 0 {
		return append(out, args[i:]...)
	}
	var positional []string
	for i < len(args) {
		if args[i] == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if isFlag(args[i]) {
			i = takeFlags(leaf.Flags, args, i, &out)
			continue
		}
		positional = append(positional, args[i])
		i++
	}
	return append(out, positional...)
}

// takeFlags copies the flags starting at args[i] (each with its value when
// it takes one) to out and returns the index after them.
func takeFlags(flags []cli.Flag, args []string, i int, out *[]string) int {
	for i < len(args) && isFlag(args[i]) {
		*out = append(*out, args[i])
		if takesValue(flags, args[i]) && i+1 < len(args) {
			*out = append(*out, args[i+1])
			i++
		}
		i++
	}
	return i
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' && a != "--" }

func takesValue(flags []cli.Flag, token string) bool {
	name := strings.TrimLeft(token, "-")
	if strings.Contains(name, "=") {
		return false
	}
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			_, isBool := f.(*cli.BoolFlag)
			return !isBool
		}
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

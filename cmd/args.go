package cmd

import (
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/types"
)

// reorder moves the flags of the command being run in front of its
// positional arguments. urfave/cli stops parsing flags at the first
// positional argument, so `nodes drain n1 --if-version 3` would otherwise
// take --if-version for a second node name; moved, every flag is parsed
// (an unknown one fails), and none is silently ignored. It refuses what
// urfave/cli would read wrong without a word: a flag given twice (the last
// would win), and a flag that takes a value given none (it would take the
// next argument, a node name, as its value) or given another of the
// command's flags as its value. An error about the command's flags is the
// command's usage error (usageOf); one about the binary's own flags, before
// any command, is not.
func reorder(app *cli.App, args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	seen := map[string]bool{}
	i, err := takeFlags(app.Flags, args, 0, &out, seen)
	if err != nil {
		return nil, err
	}
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
		return append(out, args[i:]...), nil
	}
	var positional []string
	for i < len(args) {
		if args[i] == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if isFlag(args[i]) {
			if i, err = takeFlags(leaf.Flags, args, i, &out, seen); err != nil {
				return nil, usageOf(leaf, err)
			}
			continue
		}
		positional = append(positional, args[i])
		i++
	}
	// urfave/cli reads the arguments of a command asked for its help as
	// the name of a command to show help for: `nodes drain n1 --help`
	// would be an unknown command "n1". A help flag given false
	// (--help=false) asks for none: the command runs, on its arguments.
	if seen["help"] && helpAsked(append(slices.Clone(app.Flags), leaf.Flags...), out) {
		return out, nil
	}
	return append(out, positional...), nil
}

// helpAsked reports whether the flags of args ask for help: a help flag
// given bare, or with a value that is true.
func helpAsked(flags []cli.Flag, args []string) bool {
	for _, a := range args {
		f, inline := flagOf(flags, a)
		if f == nil || f.Names()[0] != "help" {
			continue
		}
		if !inline {
			return true
		}
		_, v, _ := strings.Cut(a, "=")
		if b, err := strconv.ParseBool(v); err == nil && b {
			return true
		}
	}
	return false
}

// usageOf is err as the command's own usage errors are: naming the command
// and exiting as it does (a plugin verb 128, an operator command 2).
func usageOf(c *cli.Command, err error) error {
	if c.OnUsageError == nil {
		return err
	}
	return c.OnUsageError(nil, err, false)
}

// takeFlags copies the flags starting at args[i] (each with its value when
// it takes one) to out and returns the index after them. seen holds the
// flags taken so far, by their first name.
func takeFlags(flags []cli.Flag, args []string, i int, out *[]string, seen map[string]bool) (int, error) {
	for i < len(args) && isFlag(args[i]) {
		token := args[i]
		f, inline := flagOf(flags, token)
		if f != nil {
			name := f.Names()[0]
			if seen[name] {
				return 0, types.Invalid("--%s is given twice: give it once", name)
			}
			seen[name] = true
		}
		*out = append(*out, token)
		if f != nil && !inline && !isBool(f) {
			if i+1 == len(args) {
				return 0, types.Invalid("--%s needs a value", f.Names()[0])
			}
			if next, _ := flagOf(flags, args[i+1]); next != nil {
				return 0, types.Invalid("--%s needs a value, not the flag %s", f.Names()[0], args[i+1])
			}
			*out = append(*out, args[i+1])
			i++
		}
		i++
	}
	return i, nil
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' && a != "--" }

// flagOf is the flag of flags that token (-name, --name or --name=value)
// names, nil for none, and whether the token carries its value.
func flagOf(flags []cli.Flag, token string) (cli.Flag, bool) {
	if !isFlag(token) {
		return nil, false
	}
	name, _, inline := strings.Cut(strings.TrimLeft(token, "-"), "=")
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f, inline
		}
	}
	return nil, false
}

func isBool(f cli.Flag) bool {
	_, ok := f.(*cli.BoolFlag)
	return ok
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

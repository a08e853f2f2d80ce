package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// Flags every operator command shares. Each command gets its own flag
// values: urfave/cli records parsing state in them, so sharing one between
// concurrent runs would race.
func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "json", Usage: "json or table"}
}

func mutatingFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		outputFlag(),
		&cli.StringFlag{Name: "command-id", Usage: "make the command replayable: the same id with the same arguments answers the first answer and writes nothing"},
		&cli.Int64Flag{Name: "if-version", Usage: "refuse (aborted) unless the record is at this version"},
	}, extra...)
}

// replayed says whether a flag changes what a command does, and so is part
// of its replay identity (--output and --command-id do not).
func replayed(flag string) bool { return flag != "output" && flag != "command-id" }

// operation is what one operator command's body gets: the parsed command
// line, the store, and the command's replay identity.
type operation struct {
	ctx   context.Context
	c     *cli.Context
	store store.Store
	cfg   *config.Config
	cmd   nodes.Command
	args  []string
}

// spec is the fixed part of an operator command: its full name, how many
// node names it takes, and how it opens the store.
type spec struct {
	name  string
	nargs int
	mode  config.Mode
}

// Run makes an operator command of a body that returns a typed answer:
// it checks the argument count and the output format, opens the store
// (never creating one), derives the replay identity from the command's own
// flags, classes the error, and prints the answer as JSON or as table's
// rows (nil: JSON only).
func Run[T any](r *runner, sp spec, body func(op *operation) (nodes.Answer[T], error), table func(T) [][]string) cli.ActionFunc {
	return func(c *cli.Context) error {
		fail := func(err error) error { return commandError{command: sp.name, err: err} }
		if c.NArg() != sp.nargs {
			if sp.nargs == 0 {
				return fail(types.Invalid("unexpected argument %q", c.Args().First()))
			}
			return fail(types.Invalid("want %d argument(s) (%s), got %d", sp.nargs, c.Command.ArgsUsage, c.NArg()))
		}
		args := c.Args().Slice()
		for _, a := range args {
			if err := nodes.ValidName(a); err != nil {
				return fail(err)
			}
		}
		format := c.String("output")
		if format != "json" && format != "table" {
			return fail(types.Invalid("--output %q: want json or table", format))
		}
		cfg, err := r.config()
		if err != nil {
			return fail(err)
		}
		if notice := cfg.DefaultsNotice(); notice != "" {
			fmt.Fprintf(r.stderr, "%s: %s: %s\n", r.name, sp.name, notice)
		}
		log, closeLog, err := cfg.Logger(r.name, true)
		if err != nil {
			return fail(err)
		}
		defer closeLog()
		log.Info("command", "command", sp.name, "args", args)
		cmd := nodes.Command{ID: c.String("command-id"), Args: canonical(sp.name, args, c)}
		if c.IsSet("if-version") {
			v := c.Int64("if-version")
			cmd.IfVersion = &v
		}
		ctx, cancel := withTimeout(cfg)
		defer cancel()
		s, err := r.open(ctx, cfg, sp.mode)
		if err != nil {
			return fail(err)
		}
		defer s.Close()
		answer, err := body(&operation{ctx: ctx, c: c, store: s, cfg: cfg, cmd: cmd, args: args})
		if err != nil {
			return fail(err)
		}
		if format == "table" && table != nil {
			return writeTable(r.stdout, table(answer.Value))
		}
		raw := answer.JSON
		if raw == nil {
			if raw, err = json.Marshal(answer.Value); err != nil {
				return fail(err)
			}
		}
		return writeJSON(r.stdout, raw)
	}
}

// read is the answer of a command that writes nothing (and so is never
// replayed).
func read[T any](v T, err error) (nodes.Answer[T], error) { return nodes.Answer[T]{Value: v}, err }

// canonical is the replay identity of a command: its name, its arguments
// and the value of every flag it was given that changes what it does, in
// the order the command declares its flags. A flag added to a command is
// part of it without further ado.
func canonical(name string, args []string, c *cli.Context) string {
	parts := append([]string{name}, args...)
	for _, f := range c.Command.Flags {
		n := f.Names()[0]
		if !replayed(n) || !c.IsSet(n) {
			continue
		}
		parts = append(parts, fmt.Sprintf("--%s=%v", n, c.Value(n)))
	}
	return strings.Join(parts, " ")
}

func (r *runner) registry(s store.Store, cfg *config.Config) *nodes.Registry {
	return &nodes.Registry{Store: s, Plugins: plugins(), Policy: policy(cfg)}
}

func (r *runner) nodesCommand() *cli.Command {
	node := func(name, usage string, change func(*nodes.Registry, context.Context, string, nodes.Command) (nodes.Answer[*nodes.View], error)) *cli.Command {
		return &cli.Command{
			Name:      name,
			Usage:     usage,
			ArgsUsage: "NODE",
			Flags:     mutatingFlags(),
			Action: Run(r, spec{"nodes " + name, 1, config.WriteExisting}, func(op *operation) (nodes.Answer[*nodes.View], error) {
				return change(r.registry(op.store, op.cfg), op.ctx, op.args[0], op.cmd)
			}, viewRows),
		}
	}
	return &cli.Command{
		Name:  "nodes",
		Usage: "the node registry: list, drain, isolate, retire, revoke, admit, heartbeat",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "every registered node, ordered by name",
				Flags: []cli.Flag{outputFlag(), &cli.StringFlag{Name: "status", Usage: "only nodes of this status (READY, DRAINING, DRAINED, ...)"}},
				Action: Run(r, spec{"nodes list", 0, config.ReadExisting}, func(op *operation) (nodes.Answer[nodeList], error) {
					status := nodes.Status(strings.ToUpper(op.c.String("status")))
					if status != "" && !slices.Contains(nodes.Statuses(), status) {
						return read(nodeList{}, types.Invalid("--status %q: want one of %v", op.c.String("status"), nodes.Statuses()))
					}
					views, err := r.registry(op.store, op.cfg).List(op.ctx, status)
					return read(nodeList{Nodes: views}, err)
				}, listRows),
			},
			{
				Name:      "get",
				Usage:     "one node's registration, status, session, observation and resources",
				ArgsUsage: "NODE",
				Flags:     []cli.Flag{outputFlag()},
				Action: Run(r, spec{"nodes get", 1, config.ReadExisting}, func(op *operation) (nodes.Answer[*nodes.View], error) {
					return read(r.registry(op.store, op.cfg).Get(op.ctx, op.args[0]))
				}, viewRows),
			},
			node("drain", "stop new work landing on the node; it becomes DRAINED once it holds no usage", (*nodes.Registry).Drain),
			node("cancel-drain", "let the node take new work again", (*nodes.Registry).CancelDrain),
			{
				Name:      "isolate",
				Usage:     "declare the node's host gone: release all its usage (refused while its session is live)",
				ArgsUsage: "NODE",
				Flags:     mutatingFlags(),
				Action: Run(r, spec{"nodes isolate", 1, config.WriteExisting}, func(op *operation) (nodes.Answer[*nodes.IsolateResult], error) {
					return r.registry(op.store, op.cfg).Isolate(op.ctx, op.args[0], op.cmd)
				}, isolateRows),
			},
			node("retire", "end the node for good (drained and empty, or isolated); its name can never come back", (*nodes.Registry).Retire),
			node("revoke", "withdraw the node's admission: no placement, heartbeats refused", (*nodes.Registry).Revoke),
			node("admit", "restore a revoked node's admission", (*nodes.Registry).Admit),
			node("forget", "delete the registration of a node no plugin has a record of (never a retired one)", (*nodes.Registry).Forget),
			r.heartbeatCommand(),
		},
	}
}

// nodeList is `nodes list`'s answer.
type nodeList struct {
	Nodes []*nodes.View `json:"nodes"`
}

// writeTable writes rows as aligned columns.
func writeTable(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

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

// Flags every operator command shares.
var (
	outputFlag    = &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "json", Usage: "json or table"}
	commandIDFlag = &cli.StringFlag{Name: "command-id", Usage: "make the command replayable: the same id with the same arguments answers the first answer and writes nothing"}
	ifVersionFlag = &cli.Int64Flag{Name: "if-version", Usage: "refuse (aborted) unless the record is at this version"}
)

func mutatingFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{outputFlag, commandIDFlag, ifVersionFlag}, extra...)
}

// operation is the body of one operator command: it gets the store and the
// positional arguments and returns what to print.
type operation func(ctx context.Context, c *cli.Context, s store.Store, cfg *config.Config, cmd nodes.Command, args []string) (any, error)

// render prints an answer as a human table.
type render func(w io.Writer, answer json.RawMessage) error

// operator wraps an operation as a command: argument count, output format,
// store opening (never creating one), replay identity and error class.
func (r *runner) operator(name string, nargs int, mode config.Mode, op operation, table render, fingerprint ...string) cli.ActionFunc {
	return func(c *cli.Context) error {
		fail := func(err error) error { return commandError{command: name, err: err} }
		if c.NArg() != nargs {
			if nargs == 0 {
				return fail(types.Invalid("unexpected argument %q", c.Args().First()))
			}
			return fail(types.Invalid("want %d argument(s) (%s), got %d", nargs, c.Command.ArgsUsage, c.NArg()))
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
		cmd := nodes.Command{ID: c.String("command-id"), Args: canonical(name, args, c, append([]string{"if-version"}, fingerprint...))}
		if c.IsSet("if-version") {
			v := c.Int64("if-version")
			cmd.IfVersion = &v
		}
		ctx, cancel := withTimeout(cfg)
		defer cancel()
		s, err := r.open(ctx, cfg, mode)
		if err != nil {
			return fail(err)
		}
		defer s.Close()
		answer, err := op(ctx, c, s, cfg, cmd, args)
		if err != nil {
			return fail(err)
		}
		raw, ok := answer.(json.RawMessage)
		if !ok {
			if raw, err = json.Marshal(answer); err != nil {
				return fail(err)
			}
		}
		if format == "table" && table != nil {
			return table(r.stdout, raw)
		}
		return writeJSON(r.stdout, raw)
	}
}

// canonical is the replay identity of a command: its name, arguments and
// the values of the flags that change what it does.
func canonical(name string, args []string, c *cli.Context, flags []string) string {
	parts := append([]string{name}, args...)
	for _, f := range flags {
		if c.IsSet(f) {
			parts = append(parts, fmt.Sprintf("--%s=%v", f, c.Value(f)))
		}
	}
	return strings.Join(parts, " ")
}

func (r *runner) registry(s store.Store, cfg *config.Config) *nodes.Registry {
	return &nodes.Registry{Store: s, Plugins: plugins(), Policy: policy(cfg)}
}

func (r *runner) nodesCommand() *cli.Command {
	node := func(name, usage string, op func(*nodes.Registry, context.Context, string, nodes.Command) (json.RawMessage, error)) *cli.Command {
		return &cli.Command{
			Name:      name,
			Usage:     usage,
			ArgsUsage: "NODE",
			Flags:     mutatingFlags(),
			Action: r.operator("nodes "+name, 1, config.WriteExisting, func(ctx context.Context, _ *cli.Context, s store.Store, cfg *config.Config, cmd nodes.Command, args []string) (any, error) {
				return op(r.registry(s, cfg), ctx, args[0], cmd)
			}, viewTable),
		}
	}
	return &cli.Command{
		Name:  "nodes",
		Usage: "the node registry: list, drain, isolate, retire, revoke, admit, heartbeat",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "every registered node, ordered by name",
				Flags: []cli.Flag{outputFlag, &cli.StringFlag{Name: "status", Usage: "only nodes of this status (READY, DRAINING, DRAINED, ...)"}},
				Action: r.operator("nodes list", 0, config.ReadExisting, func(ctx context.Context, c *cli.Context, s store.Store, cfg *config.Config, _ nodes.Command, _ []string) (any, error) {
					status := nodes.Status(strings.ToUpper(c.String("status")))
					if status != "" && !slices.Contains(nodes.Statuses, status) {
						return nil, types.Invalid("--status %q: want one of %v", c.String("status"), nodes.Statuses)
					}
					views, err := r.registry(s, cfg).List(ctx, status)
					if err != nil {
						return nil, err
					}
					return map[string]any{"nodes": views}, nil
				}, listTable),
			},
			{
				Name:      "get",
				Usage:     "one node's registration, status, session, observation and resources",
				ArgsUsage: "NODE",
				Flags:     []cli.Flag{outputFlag},
				Action: r.operator("nodes get", 1, config.ReadExisting, func(ctx context.Context, _ *cli.Context, s store.Store, cfg *config.Config, _ nodes.Command, args []string) (any, error) {
					return r.registry(s, cfg).Get(ctx, args[0])
				}, viewTable),
			},
			node("drain", "stop new work landing on the node; it becomes DRAINED once it holds no usage", (*nodes.Registry).Drain),
			node("cancel-drain", "let the node take new work again", (*nodes.Registry).CancelDrain),
			node("isolate", "declare the node's host gone: release all its usage (refused while its session is live)", (*nodes.Registry).Isolate),
			node("retire", "end the node for good (drained and empty, or isolated); its name can never come back", (*nodes.Registry).Retire),
			node("revoke", "withdraw the node's admission: no placement, heartbeats refused", (*nodes.Registry).Revoke),
			node("admit", "restore a revoked node's admission", (*nodes.Registry).Admit),
			r.heartbeatCommand(),
		},
	}
}

// table writes rows as aligned columns.
func table(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

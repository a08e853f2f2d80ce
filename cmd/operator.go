package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

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
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: formatJSON, Usage: "json (indented on a terminal), yaml or table"}
}

// mutatingFlags are the flags of an operator action: output, replay and
// version guard.
func mutatingFlags(extra ...cli.Flag) []cli.Flag {
	return append(actionFlags(&cli.Int64Flag{Name: "if-version", Usage: "refuse (aborted) unless the record is at this version", DefaultText: "none, unguarded"}), extra...)
}

// guardedFlags are mutatingFlags of a command whose --if-version is
// mandatory (its help says so, and it has no default).
func guardedFlags(extra ...cli.Flag) []cli.Flag {
	return append(actionFlags(&cli.Int64Flag{Name: "if-version", Usage: "required: refuse (aborted) unless the record is at this version", DefaultText: "none"}), extra...)
}

func actionFlags(ifVersion cli.Flag) []cli.Flag {
	return []cli.Flag{
		outputFlag(),
		&cli.StringFlag{Name: "command-id", Usage: "make the command replayable: the same id with the same arguments answers the first answer and writes nothing"},
		ifVersion,
	}
}

func dryRunFlag() cli.Flag {
	return &cli.BoolFlag{Name: "dry-run", Usage: "answer what the command would do, or its refusal, and write nothing"}
}

// maxCommandID bounds a --command-id, which becomes part of a store key
// (<prefix>/commands/<id>): the same on both stores, and well within the
// embedded store's key limit (32 KiB), past which it would fail the write
// as if the store were unavailable.
const maxCommandID = 1024

// replayed says whether a flag changes what a command does, and so is part
// of its replay identity (--output and --command-id do not).
func replayed(flag string) bool { return flag != "output" && flag != "command-id" }

// operation is what one operator command's body gets: the parsed command
// line, the store, and the command's replay identity.
type operation struct {
	ctx   context.Context
	c     *cli.Context
	r     *runner
	store store.Store // nil for a long-running command (see spec.long)
	cfg   *config.Config
	cmd   nodes.Command
	args  []string
}

// withStore opens the store for one step of a long-running command, bounded
// by the call timeout, and closes it after: the embedded store's file lock
// is held only while a step runs.
func (op *operation) withStore(fn func(ctx context.Context, s store.Store) error) error {
	ctx, cancel := withTimeout(op.cfg)
	defer cancel()
	s, err := op.r.open(ctx, op.cfg, config.WriteExisting)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(ctx, s)
}

// positional checks one positional argument of an operator command; its
// error names what the argument is (a node name, a pool id, a size, ...).
type positional func(arg string) error

// spec is the fixed part of an operator command: its full name, its
// positional arguments, and how it opens the store.
type spec struct {
	name string
	// args checks each positional argument, in order. Without it the
	// command takes nargs node names (the nodes and overcommit commands).
	args  []positional
	nargs int
	mode  config.Mode
	// hostDefault: with no argument, the node is this host's name.
	hostDefault bool
	// long: the command runs for a while (a wait, an agent) and opens the
	// store for each step itself (operation.withStore).
	long bool
}

// positionals are the checks of the command's positional arguments.
func (sp spec) positionals() []positional {
	if sp.args != nil {
		return sp.args
	}
	checks := make([]positional, sp.nargs)
	for i := range checks {
		checks[i] = nodes.ValidName
	}
	return checks
}

// Run makes an operator command of a body that returns a typed answer:
// it checks the argument count and the output format, opens the store
// (never creating one), derives the replay identity from the command's own
// flags, classes the error, logs an action with who ran it, and prints the
// answer as JSON, YAML or table's blocks (nil: JSON only).
func Run[T any](r *runner, sp spec, body func(op *operation) (nodes.Answer[T], error), table tables[T]) cli.ActionFunc {
	return func(c *cli.Context) error {
		fail := func(err error) error { return commandError{command: sp.name, err: err} }
		args := c.Args().Slice()
		if len(args) == 0 && sp.hostDefault {
			host, err := os.Hostname()
			if err != nil {
				return fail(types.Wrap(types.InvalidArgument, err, "no NODE given and the host name cannot be read"))
			}
			args = []string{host}
		}
		checks := sp.positionals()
		if len(args) != len(checks) {
			if len(checks) == 0 {
				return fail(types.Invalid("unexpected argument %q", c.Args().First()))
			}
			return fail(types.Invalid("want %d argument(s) (%s), got %d", len(checks), c.Command.ArgsUsage, c.NArg()))
		}
		for i, a := range args {
			if err := checks[i](a); err != nil {
				return fail(err)
			}
		}
		format := c.String("output")
		if err := checkFormat(format); err != nil {
			return fail(err)
		}
		cfg, err := r.config()
		if err != nil {
			return fail(err)
		}
		// A heartbeat sent --via the daemon opens no store (the node needs
		// no config): telling it which store the defaults mean would
		// mislead.
		if notice := cfg.DefaultsNotice(); notice != "" && !c.IsSet("via") {
			fmt.Fprintf(r.stderr, "%s: %s: %s\n", r.name, sp.name, notice)
		}
		log, closeLog, err := cfg.Logger(r.name, true)
		if err != nil {
			return fail(err)
		}
		defer closeLog()
		log.Info("command", "command", sp.name, "args", args)
		cmd := nodes.Command{ID: c.String("command-id"), Args: canonical(sp.name, args, c)}
		if len(cmd.ID) > maxCommandID {
			return fail(types.Invalid("--command-id is %d bytes: want at most %d", len(cmd.ID), maxCommandID))
		}
		if c.IsSet("if-version") {
			v := c.Int64("if-version")
			if v < 0 {
				return fail(types.Invalid("--if-version %d: a record's version is 0 or more", v))
			}
			cmd.IfVersion = &v
		}
		if c.Bool("dry-run") {
			if cmd.ID != "" {
				return fail(types.Invalid("--dry-run writes nothing and keeps nothing: it takes no --command-id"))
			}
			cmd.DryRun = true
		}
		op := &operation{c: c, r: r, cfg: cfg, cmd: cmd, args: args}
		var answer nodes.Answer[T]
		if sp.long {
			op.ctx = context.Background()
			answer, err = body(op)
		} else {
			ctx, cancel := withTimeout(cfg)
			defer cancel()
			s, oerr := r.open(ctx, cfg, sp.mode)
			if oerr != nil {
				return fail(oerr)
			}
			defer s.Close()
			op.ctx, op.store = ctx, s
			answer, err = body(op)
		}
		if audited(c) {
			r.audit(cfg, sp.name, args, cmd, answer.ReplayOf, err)
		}
		if err != nil {
			return fail(err)
		}
		if answer.ReplayOf != nil {
			fmt.Fprintf(r.stderr, "%s: %s: replay of command %s: the answer given at %s, nothing written\n",
				r.name, sp.name, cmd.ID, answer.ReplayOf.UTC().Format(time.RFC3339))
		}
		raw := answer.JSON
		if raw == nil {
			if raw, err = json.Marshal(answer.Value); err != nil {
				return fail(err)
			}
		}
		var werr error
		switch {
		case format == formatTable && table != nil:
			werr = writeBlocks(r.stdout, table(answer.Value, time.Now()))
		case format == formatYAML:
			werr = writeYAML(r.stdout, raw)
		default:
			werr = writeJSONAnswer(r.stdout, raw)
		}
		if werr != nil {
			// A command that wrote must not read as one that failed.
			wrote := sp.mode != config.ReadExisting && !cmd.DryRun && answer.ReplayOf == nil
			return fail(unprinted(wrote, werr))
		}
		return nil
	}
}

// audited says whether a command is an operator action, logged with who
// ran it: every command that takes a --command-id.
func audited(c *cli.Context) bool {
	for _, f := range c.Command.Flags {
		if f.Names()[0] == "command-id" {
			return true
		}
	}
	return false
}

// audit logs an operator action to log.file: the command, who ran it (uid,
// user, host), its command id and its outcome; a refused action at WARN.
func (r *runner) audit(cfg *config.Config, command string, args []string, cmd nodes.Command, replayOf *time.Time, err error) {
	log, closeLog, _ := cfg.Logger(r.name, false)
	defer closeLog()
	host, _ := os.Hostname()
	// call is what the command did, flags included (the ratios an
	// overcommit command set, an --if-version): its args alone do not say.
	attrs := []any{"command", command, "args", args, "call", cmd.Args, "uid", os.Getuid(), "host", host}
	if u, uerr := user.Current(); uerr == nil {
		attrs = append(attrs, "user", u.Username)
	}
	if cmd.ID != "" {
		attrs = append(attrs, "command_id", cmd.ID)
	}
	if cmd.DryRun {
		attrs = append(attrs, "dry_run", true)
	}
	if replayOf != nil {
		attrs = append(attrs, "replay_of", replayOf.UTC())
	}
	if err != nil {
		log.Warn("operator action refused", append(attrs, "class", types.ClassOf(err), "error", err.Error())...)
		return
	}
	log.Info("operator action", attrs...)
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
	return &nodes.Registry{Store: s, Resources: registered(), Policy: policy(cfg)}
}

func (r *runner) nodesCommand() *cli.Command {
	node := func(name, usage string, change func(*nodes.Registry, context.Context, string, nodes.Command) (nodes.Answer[*nodes.View], error), extra ...cli.Flag) *cli.Command {
		return &cli.Command{
			Name:      name,
			Usage:     usage,
			ArgsUsage: "NODE",
			Flags:     mutatingFlags(extra...),
			Action: Run(r, spec{name: "nodes " + name, nargs: 1, mode: config.WriteExisting}, func(op *operation) (nodes.Answer[*nodes.View], error) {
				return change(r.registry(op.store, op.cfg), op.ctx, op.args[0], op.cmd)
			}, viewTables),
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
				Action: Run(r, spec{name: "nodes list", mode: config.ReadExisting}, func(op *operation) (nodes.Answer[nodeList], error) {
					status := nodes.Status(strings.ToUpper(op.c.String("status")))
					if status != "" && !slices.Contains(nodes.Statuses(), status) {
						return read(nodeList{}, types.Invalid("--status %q: want one of %v", op.c.String("status"), nodes.Statuses()))
					}
					views, err := r.registry(op.store, op.cfg).List(op.ctx, status)
					return read(nodeList{Nodes: views, status: status}, err)
				}, listTables),
			},
			{
				Name:      "get",
				Usage:     "one node's registration, status, session, observation and resources",
				ArgsUsage: "NODE",
				Flags:     []cli.Flag{outputFlag()},
				Action: Run(r, spec{name: "nodes get", nargs: 1, mode: config.ReadExisting}, func(op *operation) (nodes.Answer[*nodes.View], error) {
					return read(r.registry(op.store, op.cfg).Get(op.ctx, op.args[0]))
				}, viewTables),
			},
			r.drainCommand(),
			node("cancel-drain", "let the node take new work again", (*nodes.Registry).CancelDrain),
			{
				Name:      "isolate",
				Usage:     "declare the node's host gone: release all its usage (refused while its session is live)",
				ArgsUsage: "NODE",
				Flags:     mutatingFlags(dryRunFlag()),
				Action: Run(r, spec{name: "nodes isolate", nargs: 1, mode: config.WriteExisting}, func(op *operation) (nodes.Answer[*nodes.IsolateResult], error) {
					return r.registry(op.store, op.cfg).Isolate(op.ctx, op.args[0], op.cmd)
				}, isolateTables),
			},
			node("retire", "end the node for good (drained and empty, or isolated); its name can never come back", (*nodes.Registry).Retire, dryRunFlag()),
			node("revoke", "withdraw the node's admission: no placement, heartbeats refused", (*nodes.Registry).Revoke),
			node("admit", "restore a revoked node's admission", (*nodes.Registry).Admit),
			node("end-session", "end the node's live session now: it is UNAVAILABLE until its next heartbeat", (*nodes.Registry).EndSession),
			node("forget", "delete the registration of a node no plugin records (a name registered by mistake); a retired one stays", (*nodes.Registry).Forget),
			r.heartbeatCommand(),
		},
	}
}

// nodeList is `nodes list`'s answer.
type nodeList struct {
	Nodes  []*nodes.View `json:"nodes"`
	status nodes.Status  // the --status filter, for saying what is empty
}

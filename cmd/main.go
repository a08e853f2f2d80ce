// Package cmd is the command tree both plugin binaries share: core's plugin
// verbs (JSON on stdin, JSON on stdout), the operator command groups
// `nodes` and `overcommit`, configuration and the output discipline core
// relies on — on success the answer and nothing else, on failure one line.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// PluginExitCode is what a failed plugin verb exits with, as core expects.
const PluginExitCode = 128

// GCPercent is the garbage collector's target the plugin binaries run with.
// A many-node read holds every record at once; collecting sooner than Go's
// default (heap twice the live data) keeps the process's peak a small
// multiple of the records, at a few percent of time (see BENCHMARKS.md).
// It is a process option: main sets it, not the code a long-running process
// shares.
const GCPercent = 50

// Main runs the binary named name (storage or compute) with args (without
// the program name) and returns its exit status.
func Main(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return MainWith(Options{}, name, args, stdin, stdout, stderr)
}

// Options let a long-running process (the serve daemon) run the command
// tree on its own loaded configuration and store; the zero value is Main.
type Options struct {
	// Config, when set, is used instead of loading the config file.
	Config *config.Config
	// OpenStore, when set, replaces cfg.Open; the store it returns is
	// closed after the command, so a shared one must ignore Close.
	OpenStore func(ctx context.Context, cfg *config.Config, mode config.Mode) (store.Store, error)
	// Snapshots, when set, is where the plugin verbs that read many nodes
	// read, their records decoded already (engine.Snapshot).
	Snapshots engine.SnapshotReader
}

// MainWith is Main with a process's own configuration and store.
func MainWith(opts Options, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	r := &runner{name: name, stdin: stdin, stdout: stdout, stderr: stderr, opts: opts}
	// --config may stand anywhere on the command line, also after a
	// command's own flags and arguments.
	path, args, err := config.FlagFromArgs(args)
	if err != nil {
		return r.fail(usageError{err})
	}
	r.cfgPath = path
	app := r.app()
	args, err = reorder(app, args)
	if err != nil {
		return r.fail(err)
	}
	err = app.Run(append([]string{name}, args...))
	if err == nil && r.notFound != "" {
		err = usageError{types.Invalid("unknown command %q (see %s help)", r.notFound, name)}
	}
	if err == nil {
		return 0
	}
	return r.fail(err)
}

// runner holds one invocation's streams and its lazily loaded config.
type runner struct {
	name           string
	stdin          io.Reader
	stdout, stderr io.Writer
	cfgPath        string
	cfg            *config.Config
	notFound       string
	opts           Options
}

func (r *runner) app() *cli.App {
	app := &cli.App{
		Name:      r.name,
		Usage:     fmt.Sprintf("eru resource plugin %q: core runs `%s <verb>` with a JSON request on stdin; `%s [--config FILE] serve` runs the serve daemon", r.name, r.name, r.name),
		Reader:    r.stdin,
		Writer:    r.stdout,
		ErrWriter: r.stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "config file, anywhere on the command line (else $" + config.EnvPath + ", else ./" + r.name + ".yaml, the other plugin's file or ./" + config.SharedName + ", else built-in defaults)"},
			helpFlag(),
			versionFlag(),
		},
		Action:   r.rootAction,
		Commands: r.commands(),
		HideHelp: true,
		// and `help GROUP` adds urfave's shared help command to the group
		HideHelpCommand: true,
		HideVersion:     true,
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{types.Invalid("%s", err.Error())}
		},
		CommandNotFound: func(_ *cli.Context, name string) { r.notFound = name },
	}
	for _, c := range app.Commands {
		quietUsage(c, "")
		ownHelp(c)
	}
	return app
}

// commands are the binary's command tree: the verbs, the operator groups
// (pools in the storage binary only) and help.
func (r *runner) commands() []*cli.Command {
	cmds := append(r.verbCommands(), r.nodesCommand(), r.overcommitCommand())
	if r.name == "storage" {
		cmds = append(cmds, r.poolsCommand())
	}
	return append(cmds, helpCommand())
}

// urfave/cli adds its package-level help flag and help command to every
// command it runs, and writes parsing state into them: two Mains running at
// once in one process would share them. Each run builds its own instead.

// helpFlag is a run's own --help; urfave/cli shows help for any flag named
// so.
func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}
}

// helpCommand is a run's own `help [command]`.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Aliases:   []string{"h"},
		Usage:     "show the commands, or one command's help",
		ArgsUsage: "[command]",
		HideHelp:  true,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.ShowCommandHelp(c, c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
}

// groupHelpTemplate is urfave's help of a command with subcommands, listing
// them without categories: `help GROUP` prints a command that has not run,
// whose categories urfave has not set up, and its template stopped at
// them, before COMMANDS and OPTIONS (none of these commands has a
// category).
var groupHelpTemplate = strings.Replace(cli.SubcommandHelpTemplate,
	`{{template "visibleCommandCategoryTemplate" .}}`, `{{template "visibleCommandTemplate" .}}`, 1)

// ownHelp gives c and its subcommands their own help flag instead of the
// shared one, and a group the help that `help GROUP` prints in full.
func ownHelp(c *cli.Command) {
	if c.HideHelp {
		return
	}
	c.HideHelp, c.HideHelpCommand = true, true
	c.Flags = append(c.Flags, helpFlag())
	if len(c.Subcommands) > 0 && c.CustomHelpTemplate == "" {
		c.CustomHelpTemplate = groupHelpTemplate
	}
	for _, sub := range c.Subcommands {
		ownHelp(sub)
	}
}

// quietUsage makes a malformed command line one error line instead of
// urfave's usage text on stdout, for c and its subcommands.
func quietUsage(c *cli.Command, parent string) {
	name := strings.TrimSpace(parent + " " + c.Name)
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		if _, isVerb := engine.Lookup(c.Name); parent == "" && isVerb {
			return verbError{verb: c.Name, err: types.Invalid("%s", err.Error())}
		}
		return commandError{command: name, err: types.Invalid("%s", err.Error())}
	}
	for _, sub := range c.Subcommands {
		quietUsage(sub, name)
	}
}

// config loads the configuration once.
func (r *runner) config() (*config.Config, error) {
	if r.cfg == nil && r.opts.Config != nil {
		r.cfg = r.opts.Config
	}
	if r.cfg != nil {
		return r.cfg, nil
	}
	cfg, err := config.Load(r.cfgPath, r.name)
	if err != nil {
		return nil, err
	}
	r.cfg = cfg
	return cfg, nil
}

// open opens the store, or asks the process's own opener.
func (r *runner) open(ctx context.Context, cfg *config.Config, mode config.Mode) (store.Store, error) {
	if r.opts.OpenStore != nil {
		return r.opts.OpenStore(ctx, cfg, mode)
	}
	return cfg.Open(ctx, mode)
}

// opener opens the store once for a command and remembers it to close.
type opener struct {
	cfg   *config.Config
	mode  func(write bool) config.Mode
	store store.Store
	with  func(context.Context, *config.Config, config.Mode) (store.Store, error)
}

func (o *opener) open(ctx context.Context, write bool) (store.Store, error) {
	if o.store != nil {
		return o.store, nil
	}
	s, err := o.with(ctx, o.cfg, o.mode(write))
	if err != nil {
		return nil, err
	}
	o.store = s
	return s, nil
}

func (o *opener) close() {
	if o.store != nil {
		_ = o.store.Close()
	}
}

func policy(cfg *config.Config) nodes.Policy {
	return nodes.Policy{RequireSession: cfg.Nodes.RequireSession, ClockSkewTolerance: cfg.Nodes.ClockSkewTolerance}
}

// engine builds the verb engine of the binary's resource.
func (r *runner) engine(cfg *config.Config, open func(context.Context, bool) (store.Store, error), log *slog.Logger) (engine.Handlers, error) {
	res, ok := lookupResource(r.name)
	if !ok {
		return nil, types.Errorf(types.Internal, "no resource is called %q", r.name)
	}
	return res.engine(setup{open: open, registered: registered(), policy: policy(cfg), maxDeploy: cfg.Scheduler.MaxDeployCount, log: log, snapshots: r.opts.Snapshots}), nil
}

// Engine is the verb engine of the binary name for a long-running process
// (the serve daemon's /metrics): on cfg, reading many nodes from snapshots
// and anything else from open.
func Engine(name string, cfg *config.Config, open func(context.Context, bool) (store.Store, error), snapshots engine.SnapshotReader) (engine.Handlers, error) {
	r := &runner{name: name, opts: Options{Config: cfg, Snapshots: snapshots}}
	return r.engine(cfg, open, nil)
}

// Policy is the node registry's policy cfg sets.
func Policy(cfg *config.Config) nodes.Policy { return policy(cfg) }

// Errors carry how they are printed and what status they exit with.
type (
	// verbError is a failed plugin verb: exit 128.
	verbError struct {
		verb, node string
		err        error
	}
	// commandError is a failed operator command: exit by class.
	commandError struct {
		command string
		err     error
	}
	// usageError is a malformed command line: exit 2.
	usageError struct{ err error }
)

func (e verbError) Error() string    { return e.err.Error() }
func (e commandError) Error() string { return e.err.Error() }
func (e usageError) Error() string   { return e.err.Error() }

// fail prints err as one line on stderr and returns the exit status.
func (r *runner) fail(err error) int {
	var (
		ve verbError
		ce commandError
	)
	switch {
	case errors.As(err, &ve):
		where := r.name + ": " + ve.verb
		switch {
		case ve.node == "":
		case nodes.ValidName(ve.node) == nil:
			where += ": node " + ve.node
		default:
			where += ": node " + strconv.Quote(ve.node)
		}
		r.line(where, ve.err)
		return PluginExitCode
	case errors.As(err, &ce):
		r.line(r.name+": "+ce.command, ce.err)
		return types.ClassOf(ce.err).ExitCode()
	default:
		var ue usageError
		if errors.As(err, &ue) {
			err = ue.err
		} else if types.ClassOf(err) == types.Internal {
			err = types.Wrap(types.InvalidArgument, err, "command line")
		}
		r.line(r.name, err)
		return types.ClassOf(err).ExitCode()
	}
}

func (r *runner) line(where string, err error) {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(r.stderr, "%s: %s: %s\n", where, types.ClassOf(err), msg)
}

// withTimeout bounds one command by the configured call timeout.
func withTimeout(cfg *config.Config) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cfg.Etcd.CallTimeout)
}

func since(start time.Time) string { return time.Since(start).Round(time.Microsecond).String() }

package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/storage/pooladmin"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// poolsCommand is `storage pools …`: the storage pools shared by several
// nodes (docs/pools.md). Only the storage binary has it.
func (r *runner) poolsCommand() *cli.Command {
	admin := func(s store.Store) *pooladmin.Admin { return &pooladmin.Admin{Store: s} }
	return &cli.Command{
		Name:  "pools",
		Usage: "storage pools shared by several nodes: list, get, set-capacity, objects, object, declare-lost, check, repair",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "every pool, by id, with its attachments",
				Flags: []cli.Flag{outputFlag()},
				Action: Run(r, spec{name: "pools list", mode: config.ReadExisting}, func(op *operation) (nodes.Answer[pooladmin.List], error) {
					return read(admin(op.store).List(op.ctx))
				}, poolListTables),
			},
			{
				Name:      "get",
				Usage:     "one pool: capacity, reserved bytes, version, attachments",
				ArgsUsage: "POOL",
				Flags:     []cli.Flag{outputFlag()},
				Action: Run(r, spec{name: "pools get", args: []positional{pool.ValidID}, mode: config.ReadExisting}, func(op *operation) (nodes.Answer[pool.View], error) {
					return read(admin(op.store).Get(op.ctx, op.args[0]))
				}, poolViewTables),
			},
			{
				Name:      "set-capacity",
				Usage:     "set a pool's capacity (--if-version is mandatory; lowering it evicts nothing)",
				ArgsUsage: "POOL SIZE",
				Flags:     guardedFlags(),
				Action: Run(r, spec{name: "pools set-capacity", args: []positional{pool.ValidID, checkCapacity}, mode: config.WriteExisting}, func(op *operation) (nodes.Answer[pool.View], error) {
					size, err := parseCapacity(op.args[1])
					if err != nil {
						return nodes.Answer[pool.View]{}, err
					}
					return admin(op.store).SetCapacity(op.ctx, op.args[0], size, op.cmd)
				}, poolViewTables),
			},
			{
				Name:      "objects",
				Usage:     "a pool's objects (an object moving out is listed under its target)",
				ArgsUsage: "POOL",
				Flags:     []cli.Flag{outputFlag(), &cli.StringFlag{Name: "node", Usage: "only the objects this node's record keeps"}},
				Action: Run(r, spec{name: "pools objects", args: []positional{pool.ValidID}, mode: config.ReadExisting}, func(op *operation) (nodes.Answer[pooladmin.Objects], error) {
					if n := op.c.String("node"); n != "" {
						if err := nodes.ValidName(n); err != nil {
							return read(pooladmin.Objects{}, types.Wrap(types.InvalidArgument, err, "--node"))
						}
					}
					return read(admin(op.store).Objects(op.ctx, op.args[0], op.c.String("node")))
				}, objectListTables),
			},
			{
				Name:      "object",
				Usage:     "one pool object",
				ArgsUsage: "OBJECT",
				Flags:     []cli.Flag{outputFlag()},
				Action: Run(r, spec{name: "pools object", args: []positional{pool.ValidObjectID}, mode: config.ReadExisting}, func(op *operation) (nodes.Answer[pool.ObjectView], error) {
					return read(admin(op.store).Object(op.ctx, op.args[0]))
				}, func(o pool.ObjectView, _ time.Time) []block {
					return objectListTables(pooladmin.Objects{Objects: []pool.ObjectView{o}}, time.Time{})
				}),
			},
			{
				Name:      "declare-lost",
				Usage:     "declare a pool's storage gone for good (every member isolated, or none)",
				ArgsUsage: "POOL",
				Flags:     mutatingFlags(),
				Action: Run(r, spec{name: "pools declare-lost", args: []positional{pool.ValidID}, mode: config.WriteExisting}, func(op *operation) (nodes.Answer[pooladmin.Lost], error) {
					return admin(op.store).DeclareLost(op.ctx, op.args[0], op.cmd)
				}, func(l pooladmin.Lost, now time.Time) []block {
					return append(poolViewTables(l.Pool, now), block{
						{"LOST VOLUMES", strconv.Itoa(l.LostVolumes)},
						{"DISCARDED CLEANUPS", strconv.Itoa(l.DiscardedCleanups)},
					})
				}),
			},
			{
				Name:      "move",
				Usage:     "move an object to another pool, copying it on a node that reaches both (run it on that node); the same --command-id resumes, --abort undoes",
				ArgsUsage: "OBJECT",
				Flags: []cli.Flag{outputFlag(),
					&cli.StringFlag{Name: "command-id", Usage: "names the move: the same id resumes it", DefaultText: "move-OBJECT-POOL"},
					&cli.StringFlag{Name: "to", Usage: "the target pool (required)"},
					&cli.StringFlag{Name: "node", Usage: "the node that copies, this host (required)"},
					&cli.BoolFlag{Name: "abort", Usage: "undo a move that did not settle: remove the target copy and release the target's reservation"},
					&cli.BoolFlag{Name: "progress", Usage: "print the copy's progress on stderr: files and bytes copied of the total", DefaultText: "when stderr is a terminal"},
				},
				// long: the copy takes as long as the data needs, and the
				// store is opened for each store step only.
				Action: Run(r, spec{name: "pools move", args: []positional{pool.ValidObjectID}, mode: config.WriteExisting, long: true}, func(op *operation) (nodes.Answer[pool.ObjectView], error) {
					if op.c.String("to") == "" || op.c.String("node") == "" {
						return read(pool.ObjectView{}, types.Invalid("--to and --node are required"))
					}
					if err := pool.ValidID(op.c.String("to")); err != nil {
						return read(pool.ObjectView{}, types.Wrap(types.InvalidArgument, err, "--to"))
					}
					if err := nodes.ValidName(op.c.String("node")); err != nil {
						return read(pool.ObjectView{}, types.Wrap(types.InvalidArgument, err, "--node"))
					}
					req := pooladmin.MoveRequest{Object: op.args[0], To: op.c.String("to"), Node: op.c.String("node"),
						CommandID: op.c.String("command-id"), Abort: op.c.Bool("abort")}
					show := isTerminal(r.stderr)
					if op.c.IsSet("progress") {
						show = op.c.Bool("progress")
					}
					if show {
						line := &progressLine{w: r.stderr, prefix: r.name + ": pools move " + req.Object + ": ", tty: isTerminal(r.stderr),
							every: progressEvery, now: time.Now}
						req.Progress = line.update
						defer line.finish()
					}
					ctx, stop := interruptible(op.ctx)
					defer stop()
					return read(pooladmin.MoveSteps(ctx, storeSteps(op), req))
				}, func(o pool.ObjectView, _ time.Time) []block {
					return objectListTables(pooladmin.Objects{Objects: []pool.ObjectView{o}}, time.Time{})
				}),
			},
			{
				Name:      "cleanup",
				Usage:     "remove the copies a pool still keeps (a moved object's source, an aborted move's target), on a node that declares it (run it on that node); an entry whose copy is the object's live copy there is dropped, nothing removed",
				ArgsUsage: "POOL",
				Flags:     []cli.Flag{outputFlag(), &cli.StringFlag{Name: "node", Usage: "the node that removes, this host (required)"}},
				// long: a removal takes as long as the copy needs, and the
				// store is opened for each store step only.
				Action: Run(r, spec{name: "pools cleanup", args: []positional{pool.ValidID}, mode: config.WriteExisting, long: true}, func(op *operation) (nodes.Answer[pooladmin.Cleaned], error) {
					if err := nodes.ValidName(op.c.String("node")); err != nil {
						return read(pooladmin.Cleaned{}, types.Wrap(types.InvalidArgument, err, "--node"))
					}
					ctx, stop := interruptible(op.ctx)
					defer stop()
					return read(pooladmin.CleanupSteps(ctx, storeSteps(op), op.args[0], op.c.String("node")))
				}, func(c pooladmin.Cleaned, _ time.Time) []block {
					b := block{{"OBJECT", "REASON", "SIZE", "SINCE", "RESULT"}}
					for _, x := range c.Removed {
						b = append(b, []string{x.Object, x.Reason, humanBytes(x.Bytes), x.Since.UTC().Format(time.RFC3339), "removed"})
					}
					for _, x := range c.Dropped {
						b = append(b, []string{x.Object, x.Reason, humanBytes(x.Bytes), x.Since.UTC().Format(time.RFC3339), x.Why})
					}
					return []block{b}
				}),
			},
			{
				Name:  "check",
				Usage: "recompute every pool's counters from the node records and report drift",
				Flags: []cli.Flag{outputFlag()},
				Action: Run(r, spec{name: "pools check", mode: config.ReadExisting}, func(op *operation) (nodes.Answer[pooladmin.Check], error) {
					return read(admin(op.store).Check(op.ctx))
				}, func(c pooladmin.Check, _ time.Time) []block { return driftTables(c.Pools) }),
			},
			{
				Name:      "repair",
				Usage:     "write a pool's recomputed counters (compared against every node record read)",
				ArgsUsage: "POOL",
				Flags:     []cli.Flag{outputFlag(), &cli.StringFlag{Name: "command-id", Usage: "make the command replayable: the same id with the same arguments answers the first answer and writes nothing"}},
				Action: Run(r, spec{name: "pools repair", args: []positional{pool.ValidID}, mode: config.WriteExisting}, func(op *operation) (nodes.Answer[pool.Drift], error) {
					return admin(op.store).Repair(op.ctx, op.args[0], op.cmd)
				}, func(d pool.Drift, _ time.Time) []block { return driftTables([]pool.Drift{d}) }),
			},
		},
	}
}

// interruptible is parent cancelled, with the signal named as the cause,
// when the process gets SIGINT or SIGTERM: a move's copy, which runs under
// no deadline, stops there, and the same command resumes it (a cleanup
// stops between two removals).
func interruptible(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-sigs:
			cancel(fmt.Errorf("interrupted by %s", sig))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(nil)
	}
}

// storeSteps runs each store step of a long pool command on a store opened
// for it, under etcd.call_timeout; a step that runs out of it says so.
func storeSteps(op *operation) pooladmin.Step {
	return func(fn func(context.Context, *pooladmin.Admin) error) error {
		err := op.withStore(func(ctx context.Context, s store.Store) error {
			return fn(ctx, &pooladmin.Admin{Store: s})
		})
		if errors.Is(err, context.DeadlineExceeded) {
			return types.Wrap(types.Unavailable, err, fmt.Sprintf("a store call ran out of etcd.call_timeout (%s)", op.cfg.Etcd.CallTimeout))
		}
		return err
	}
}

// parseCapacity reads set-capacity's SIZE, a pool's capacity (its range
// is the pool record's rule, checked where it is set).
func parseCapacity(arg string) (int64, error) {
	size, err := types.ParseSize(arg, false)
	if err != nil {
		return 0, types.Wrap(types.InvalidArgument, err, "capacity SIZE")
	}
	return size, nil
}

// checkCapacity checks set-capacity's SIZE before the store is opened.
func checkCapacity(arg string) error {
	_, err := parseCapacity(arg)
	return err
}

// capacityText is a pool's capacity, or what its absence means.
func capacityText(c *int64) string {
	if c == nil {
		return "unset (takes no objects)"
	}
	return humanBytes(*c)
}

func poolListTables(l pooladmin.List, _ time.Time) []block {
	b := block{{"POOL", "CAPACITY", "RESERVED", "OBJECTS", "VERSION", "MEMBERS", "NOTE"}}
	for _, p := range l.Pools {
		note := ""
		switch {
		case p.LostAt != nil:
			note = "LOST"
		case p.Capacity == nil:
			note = "no capacity"
		case p.Reserved > *p.Capacity:
			note = "reserved > capacity"
		}
		capText := "-"
		if p.Capacity != nil {
			capText = humanBytes(*p.Capacity)
		}
		b = append(b, []string{p.ID, capText, humanBytes(p.Reserved), strconv.FormatInt(p.Objects, 10),
			strconv.FormatInt(p.Version, 10), strconv.Itoa(len(p.Attachments)), dash(note)})
	}
	return []block{b}
}

func poolViewTables(p pool.View, _ time.Time) []block {
	lost := "-"
	if p.LostAt != nil {
		lost = *p.LostAt
	}
	fields := block{
		{"POOL", p.ID},
		{"CAPACITY", capacityText(p.Capacity)},
		{"RESERVED", humanBytes(p.Reserved)},
		{"OBJECTS", strconv.FormatInt(p.Objects, 10)},
		{"CLEANUPS", strconv.FormatInt(p.CleanupCount, 10)},
		{"VERSION", strconv.FormatInt(p.Version, 10)},
		{"DECLARED", p.DeclaredAt},
		{"LOST", lost},
	}
	atts := block{{"NODE", "PATH", "DEFAULT", "AVAILABLE", "HELD"}}
	for _, a := range p.Attachments {
		avail := yesNo(a.Available)
		if a.Reason != "" {
			avail += " (" + a.Reason + ")"
		}
		atts = append(atts, []string{a.Node, a.Path, yesNo(a.DefaultPool), avail, strconv.Itoa(a.Held)})
	}
	return []block{fields, atts}
}

func objectListTables(o pooladmin.Objects, _ time.Time) []block {
	b := block{{"OBJECT", "POOL", "SIZE", "NODE", "HELD", "STATE", "MOVING TO"}}
	for _, x := range o.Objects {
		b = append(b, []string{x.ID, x.Pool, humanBytes(x.Bytes), x.Node, yesNo(x.Held), x.State, dash(x.MovingTo)})
	}
	return []block{b}
}

func driftTables(ds []pool.Drift) []block {
	b := block{{"POOL", "RESERVED", "RECOMPUTED", "DRIFT", "OBJECTS", "RECOMPUTED OBJECTS"}}
	for _, d := range ds {
		drift := strconv.FormatInt(d.DriftBytes, 10)
		if d.NoRecord {
			drift += " (no pool record)"
		}
		b = append(b, []string{d.Pool, strconv.FormatInt(d.Reserved, 10), strconv.FormatInt(d.Recomputed, 10), drift,
			strconv.FormatInt(d.Objects, 10), strconv.FormatInt(d.RecomputedObjects, 10)})
	}
	return []block{b}
}

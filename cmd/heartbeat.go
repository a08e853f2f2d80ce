package cmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// heartbeatCommand is `nodes heartbeat`: one heartbeat, or with --interval
// an agent that heartbeats until SIGTERM or SIGINT and then ends its
// session. It takes no --command-id (a fixed id in an agent's script would
// make every later heartbeat a replay that renews nothing) and no
// --if-version (heartbeats do not move the registration's version).
func (r *runner) heartbeatCommand() *cli.Command {
	return &cli.Command{
		Name:      "heartbeat",
		Usage:     "run on the node itself: refresh its session and report what its host measures; with --interval, keep doing so until stopped",
		ArgsUsage: "[NODE]",
		Description: "NODE defaults to this host's name. With --interval the command runs until SIGTERM or SIGINT, " +
			"then ends the session (the node is UNAVAILABLE at once) and prints the record.",
		Flags: append([]cli.Flag{
			outputFlag(),
			&cli.DurationFlag{Name: "ttl", Usage: "how long the session lives without another heartbeat, at most 10m", DefaultText: "nodes.session_ttl, 30s unless configured"},
			&cli.DurationFlag{Name: "interval", Usage: "heartbeat every interval until stopped (shorter than --ttl)", DefaultText: "none: one heartbeat"},
			&cli.BoolFlag{Name: "register", Usage: "register a node no plugin records yet (otherwise not_found)"},
			&cli.StringFlag{Name: "proc-root", Value: "/proc", Usage: "read boot_id, meminfo and pressure under this folder"},
			&cli.StringFlag{Name: "clock-sync", Usage: "report this clock state instead of the kernel's: SYNCHRONIZED or UNSYNCHRONIZED (with no error unless --clock-max-error)", DefaultText: "the kernel's"},
			&cli.DurationFlag{Name: "clock-max-error", Usage: "report this maximum clock error instead of the kernel's", DefaultText: "the kernel's"},
			&cli.StringFlag{Name: "pool-check", Value: "mount", Usage: "how each declared storage pool path is checked: mount (an existing directory that is a mount point) or exists (an existing directory)"},
		}, viaFlags()...),
		Action: Run(r, spec{name: "nodes heartbeat", nargs: 1, mode: config.WriteExisting, hostDefault: true, long: true}, func(op *operation) (nodes.Answer[*nodes.View], error) {
			var none nodes.Answer[*nodes.View]
			a, err := heartbeatArgs(op.c, op.cfg)
			if err != nil {
				return none, err
			}
			node := op.args[0]
			if !op.c.IsSet("via") {
				for _, f := range []string{"token-file", "tls-ca", "tls-cert", "tls-key"} {
					if op.c.IsSet(f) {
						return none, types.Invalid("--%s goes with --via: without it the heartbeat is written to the store directly", f)
					}
				}
			}
			if op.c.IsSet("via") {
				return r.heartbeatVia(op, node, a)
			}
			beat := func() (nodes.Answer[*nodes.View], error) {
				var answer nodes.Answer[*nodes.View]
				err := op.withStore(func(ctx context.Context, s store.Store) error {
					m := nodes.Measure(a.procRoot, a.clock)
					pools, err := storage.CheckPoolPaths(ctx, s, node, a.poolExists)
					if err != nil {
						return err
					}
					m.Pools = pools
					answer, err = r.registry(s, op.cfg).Heartbeat(ctx, node, m, a.ttl, op.cfg.Nodes.MemoryTightBytes, a.register, op.cmd)
					return err
				})
				return answer, err
			}
			stopped, stop := agentSignals(a.interval)
			defer stop()
			answer, err := beat()
			if err != nil || a.interval == 0 {
				return answer, err
			}
			return r.heartbeatAgent(stopped, node, a.interval, answer, beat, func() (nodes.Answer[*nodes.View], error) {
				var end nodes.Answer[*nodes.View]
				err := op.withStore(func(ctx context.Context, s store.Store) error {
					var err error
					end, err = r.registry(s, op.cfg).EndSession(ctx, node, nodes.Command{})
					return err
				})
				return end, err
			})
		}, viewTables),
	}
}

// heartbeatVia is `nodes heartbeat --via URL`: the same measurement and
// agent, sent through the daemon's HTTP API, which records it and measures
// this host's clock offset. A --ttl not given takes the daemon's
// nodes.session_ttl.
func (r *runner) heartbeatVia(op *operation, node string, a heartbeatFlags) (nodes.Answer[*nodes.View], error) {
	timeout := viaTimeout(op.cfg)
	v, err := newViaClient(op.c, timeout)
	if err != nil {
		return nodes.Answer[*nodes.View]{}, err
	}
	ttl := ""
	if op.c.IsSet("ttl") {
		ttl = a.ttl.String()
	}
	beat := func() (nodes.Answer[*nodes.View], error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return v.heartbeat(ctx, node, nodes.Measure(a.procRoot, a.clock), ttl, a.register)
	}
	stopped, stop := agentSignals(a.interval)
	defer stop()
	answer, err := beat()
	if err != nil || a.interval == 0 {
		return answer, err
	}
	end := func() (nodes.Answer[*nodes.View], error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return v.endSession(ctx, node)
	}
	// Without --ttl the session lives the daemon's nodes.session_ttl, not
	// the one of this host's config that heartbeatArgs checked --interval
	// against: the first answer says which, and an interval the session
	// would lapse within ends it rather than leave the node flapping.
	if s := answer.Value.Session; ttl == "" && s.ExpiresAt != nil && s.LastSeen != nil {
		if daemonTTL := s.ExpiresAt.Sub(*s.LastSeen); a.interval >= daemonTTL {
			_, _ = end()
			return nodes.Answer[*nodes.View]{}, types.Invalid("--interval %s: want less than the daemon's session ttl %s (its nodes.session_ttl), or the session lapses between heartbeats; give a shorter --interval or a --ttl", a.interval, daemonTTL)
		}
	}
	return r.heartbeatAgent(stopped, node, a.interval, answer, beat, end)
}

// heartbeatFlags are a heartbeat's settings, checked.
type heartbeatFlags struct {
	ttl, interval time.Duration
	register      bool
	procRoot      string
	clock         nodes.ClockReading
	// poolExists: a pool path need only be an existing directory, not a
	// mount point (--pool-check=exists).
	poolExists bool
}

func heartbeatArgs(c *cli.Context, cfg *config.Config) (heartbeatFlags, error) {
	a := heartbeatFlags{procRoot: c.String("proc-root"), register: c.Bool("register")}
	ttl, what := cfg.Nodes.SessionTTL, "nodes.session_ttl"
	if c.IsSet("ttl") {
		ttl, what = c.Duration("ttl"), "--ttl"
	}
	var err error
	if a.ttl, err = nodes.SessionTTL(ttl); err != nil {
		return a, types.Invalid("%s %s: want more than 0 and at most %s", what, ttl, nodes.MaxSessionTTL)
	}
	if c.IsSet("interval") {
		a.interval = c.Duration("interval")
		// Sent --via without --ttl, the session lives the daemon's
		// nodes.session_ttl, not this host's: heartbeatVia checks the
		// interval against its first answer.
		daemonTTL := c.IsSet("via") && !c.IsSet("ttl")
		if a.interval <= 0 || (a.interval >= a.ttl && !daemonTTL) {
			return a, types.Invalid("--interval %s: want more than 0 and less than the session ttl %s, or the session lapses between heartbeats", a.interval, a.ttl)
		}
	}
	if st, err := os.Stat(a.procRoot); err != nil || !st.IsDir() {
		return a, types.Invalid("--proc-root %s: not a readable folder", a.procRoot)
	}
	if c.IsSet("clock-sync") {
		a.clock.Sync = strings.ToUpper(c.String("clock-sync"))
		if a.clock.Sync != nodes.ClockSynchronized && a.clock.Sync != nodes.ClockUnsynchronized {
			return a, types.Invalid("--clock-sync %q: want SYNCHRONIZED or UNSYNCHRONIZED", c.String("clock-sync"))
		}
	}
	switch c.String("pool-check") {
	case "mount":
	case "exists":
		a.poolExists = true
	default:
		return a, types.Invalid("--pool-check %q: want mount or exists", c.String("pool-check"))
	}
	if c.IsSet("clock-max-error") {
		d := c.Duration("clock-max-error")
		if d < 0 {
			return a, types.Invalid("--clock-max-error %s: want a duration of zero or more", d)
		}
		a.clock.MaxError = &d
	}
	return a, nil
}

// agentSignals is done on SIGTERM or SIGINT for an agent (interval > 0),
// caught from before its first heartbeat: a stop that comes while that one
// runs ends the session it opens, instead of killing the process with
// the session live until its ttl.
func agentSignals(interval time.Duration) (context.Context, context.CancelFunc) {
	if interval == 0 {
		return context.Background(), func() {}
	}
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

// heartbeatAgent heartbeats every interval until ctx is done (SIGTERM or
// SIGINT, agentSignals), then ends the session and answers the record
// after. A heartbeat that fails
// for a passing reason (the store unreachable, contention) is reported on
// stderr and the next one tried; one the registry refuses (the node
// retired, revoked) ends the agent with that error. Each change of the
// node's status is reported on stderr.
func (r *runner) heartbeatAgent(ctx context.Context, node string, interval time.Duration, first nodes.Answer[*nodes.View], beat, end func() (nodes.Answer[*nodes.View], error)) (nodes.Answer[*nodes.View], error) {
	where := fmt.Sprintf("%s: nodes heartbeat %s", r.name, node)
	status := first.Value.Status
	fmt.Fprintf(r.stderr, "%s: %s, heartbeat every %s\n", where, status, interval)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(r.stderr, "%s: stopped, ending the session\n", where)
			return end()
		case <-tick.C:
		}
		answer, err := beat()
		if err != nil {
			switch types.ClassOf(err) {
			case types.Unavailable, types.DeadlineExceeded, types.Aborted, types.OutcomeUnknown, types.ResourceExhausted:
				r.line(where, err)
				continue
			}
			return answer, err
		}
		if answer.Value.Status != status {
			status = answer.Value.Status
			fmt.Fprintf(r.stderr, "%s: %s\n", where, status)
		}
	}
}

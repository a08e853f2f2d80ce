package cmd

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/types"
)

func (r *runner) heartbeatCommand() *cli.Command {
	return &cli.Command{
		Name:      "heartbeat",
		Usage:     "run on the node itself: refresh its session and report what its host measures",
		ArgsUsage: "NODE",
		Flags: mutatingFlags(
			&cli.DurationFlag{Name: "ttl", Usage: "how long the session lives without another heartbeat (default nodes.session_ttl)"},
			&cli.StringFlag{Name: "proc-root", Value: "/proc", Usage: "read boot_id, meminfo and pressure under this folder"},
			&cli.StringFlag{Name: "clock-sync", Usage: "report this clock state instead of the kernel's: SYNCHRONIZED or UNSYNCHRONIZED"},
			&cli.DurationFlag{Name: "clock-max-error", Usage: "report this maximum clock error instead of the kernel's"},
			&cli.BoolFlag{Name: "register", Usage: "register a node no plugin has a record of yet (without it, such a name is not_found)"},
		),
		Action: Run(r, spec{"nodes heartbeat", 1, config.WriteExisting}, func(op *operation) (nodes.Answer[*nodes.View], error) {
			var none nodes.Answer[*nodes.View]
			c, cfg := op.c, op.cfg
			ttl := cfg.Nodes.SessionTTL
			if c.IsSet("ttl") {
				ttl = c.Duration("ttl")
			}
			if ttl <= 0 {
				return none, types.Invalid("--ttl %s: want a positive duration", ttl)
			}
			// etcd counts leases in whole seconds: round up on both stores,
			// so that expires_at says when the session really ends.
			ttl = (ttl + time.Second - 1).Truncate(time.Second)
			var clock nodes.ClockReading
			if c.IsSet("clock-sync") {
				clock.Sync = strings.ToUpper(c.String("clock-sync"))
				if clock.Sync != nodes.ClockSynchronized && clock.Sync != nodes.ClockUnsynchronized {
					return none, types.Invalid("--clock-sync %q: want SYNCHRONIZED or UNSYNCHRONIZED", c.String("clock-sync"))
				}
			}
			if c.IsSet("clock-max-error") {
				d := c.Duration("clock-max-error")
				if d < 0 {
					return none, types.Invalid("--clock-max-error %s: want a duration of zero or more", d)
				}
				clock.MaxError = &d
			}
			m := nodes.Measure(c.String("proc-root"), clock)
			return r.registry(op.store, cfg).Heartbeat(op.ctx, op.args[0], m, ttl, cfg.Nodes.MemoryTightBytes, c.Bool("register"), op.cmd)
		}, viewRows),
	}
}

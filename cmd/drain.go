package cmd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// drainPoll is how often `nodes drain --wait` reads the node again.
const drainPoll = 500 * time.Millisecond

func (r *runner) drainCommand() *cli.Command {
	return &cli.Command{
		Name:      "drain",
		Usage:     "stop new work landing on the node; it becomes DRAINED once it holds no usage",
		ArgsUsage: "NODE",
		Flags: mutatingFlags(
			&cli.BoolFlag{Name: "wait", Usage: "return only once the node is DRAINED, printing the usage left on stderr as it changes"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "with --wait, give up (deadline_exceeded) after this long; the drain stays"},
		),
		Action: Run(r, spec{name: "nodes drain", nargs: 1, mode: config.WriteExisting, long: true}, func(op *operation) (nodes.Answer[*nodes.View], error) {
			var answer nodes.Answer[*nodes.View]
			node := op.args[0]
			timeout := op.c.Duration("timeout")
			if op.c.IsSet("timeout") && !op.c.Bool("wait") {
				return answer, types.Invalid("--timeout is how long --wait waits: give --wait")
			}
			if timeout <= 0 {
				return answer, types.Invalid("--timeout %s: want a positive duration", timeout)
			}
			err := op.withStore(func(ctx context.Context, s store.Store) error {
				var err error
				answer, err = r.registry(s, op.cfg).Drain(ctx, node, op.cmd)
				return err
			})
			if err != nil || !op.c.Bool("wait") {
				return answer, err
			}
			return r.waitDrained(op, node, answer, time.Now().Add(timeout), timeout)
		}, viewTables),
	}
}

// waitDrained reads the node until it is drained — drain set and no usage
// held, what DRAINED means, also when a status above DRAINED shows (an
// isolated or revoked node, one whose session ended) — printing on stderr
// the usage it still holds each time that changes. The answer is the node
// as last read (a replay of the drain stays marked as one). The drain is
// written before the wait: a wait that fails says so, for what failed is
// the wait, not the drain.
func (r *runner) waitDrained(op *operation, node string, answer nodes.Answer[*nodes.View], deadline time.Time, timeout time.Duration) (nodes.Answer[*nodes.View], error) {
	v, last := answer.Value, ""
	read := func() error {
		return op.withStore(func(ctx context.Context, s store.Store) error {
			var err error
			v, err = r.registry(s, op.cfg).Get(ctx, node)
			return err
		})
	}
	// A replay's node is the one kept with its first answer, which says
	// nothing of the usage held now: read it.
	if answer.ReplayOf != nil {
		if err := read(); err != nil {
			return answer, fmt.Errorf("the drain is written and stays; reading node %s before --wait waits failed: %w", node, err)
		}
	}
	for {
		switch {
		case !v.Drain:
			return answer, types.Errorf(types.FailedPrecondition, "node %s: the drain was written, then cancelled while --wait waited (the node is %s)", node, v.Status)
		case !v.HoldsUsage:
			if answer.Value != v {
				answer.Value, answer.JSON = v, nil
			}
			if v.Status == nodes.StatusDrained {
				fmt.Fprintf(r.stderr, "%s: nodes drain %s: DRAINED\n", r.name, node)
			} else {
				fmt.Fprintf(r.stderr, "%s: nodes drain %s: drained, no usage left (status %s)\n", r.name, node, v.Status)
			}
			return answer, nil
		}
		if left := usageLeft(v); left != last {
			fmt.Fprintf(r.stderr, "%s: nodes drain %s: %s, usage left: %s\n", r.name, node, v.Status, left)
			last = left
		}
		if !time.Now().Before(deadline) {
			return answer, types.Errorf(types.DeadlineExceeded, "node %s still holds usage after %s (usage left: %s); the drain is written and stays", node, timeout, last)
		}
		time.Sleep(min(drainPoll, time.Until(deadline)+time.Millisecond))
		if err := read(); err != nil {
			return answer, fmt.Errorf("the drain is written and stays; reading node %s while --wait waited failed: %w", node, err)
		}
	}
}

// usageLeft is every figure a node still holds, by plugin:
// "storage: storage 10 GiB, volume /data0 10 GiB; compute: cpu 2000m".
func usageLeft(v *nodes.View) string {
	var parts []string
	for _, name := range types.SortedKeys(v.Resources) {
		var held []string
		for _, l := range leaves(v.Resources[name].Usage) {
			if l.word == "" && l.value != 0 {
				held = append(held, l.name+" "+l.text)
			}
		}
		if len(held) > 0 {
			parts = append(parts, name+": "+strings.Join(held, ", "))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

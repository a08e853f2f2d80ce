package cmd

import (
	"context"
	"encoding/json"
	"io"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

func (r *runner) overcommitCommand() *cli.Command {
	admin := func(s store.Store) *overcommit.Admin { return &overcommit.Admin{Store: s} }
	ratio := func(name string) cli.Flag {
		return &cli.StringFlag{Name: name, Usage: "ratio in thousandths, 1 to 16000 (1000 is 1x)"}
	}
	return &cli.Command{
		Name:  "overcommit",
		Usage: "CPU and memory overcommit ratios of the compute plugin",
		Subcommands: []*cli.Command{
			{
				Name:  "get-defaults",
				Usage: "the cluster-wide ratios",
				Flags: []cli.Flag{outputFlag},
				Action: r.operator("overcommit get-defaults", 0, config.ReadExisting, func(ctx context.Context, _ *cli.Context, s store.Store, _ *config.Config, _ nodes.Command, _ []string) (any, error) {
					return admin(s).GetDefaults(ctx)
				}, defaultsTable),
			},
			{
				Name:  "set-defaults",
				Usage: "replace both cluster-wide ratios",
				Flags: mutatingFlags(ratio("cpu"), ratio("memory")),
				Action: r.operator("overcommit set-defaults", 0, config.WriteExisting, func(ctx context.Context, c *cli.Context, s store.Store, _ *config.Config, cmd nodes.Command, _ []string) (any, error) {
					if !c.IsSet("cpu") || !c.IsSet("memory") {
						return nil, types.Invalid("set-defaults replaces both ratios: give --cpu and --memory")
					}
					cpu, err := overcommit.ParseRatio("cpu", c.String("cpu"))
					if err != nil {
						return nil, err
					}
					mem, err := overcommit.ParseRatio("memory", c.String("memory"))
					if err != nil {
						return nil, err
					}
					return admin(s).SetDefaults(ctx, cpu, mem, cmd)
				}, defaultsTable, "cpu", "memory"),
			},
			{
				Name:      "get-node",
				Usage:     "the ratios in effect on a node and where they come from",
				ArgsUsage: "NODE",
				Flags:     []cli.Flag{outputFlag},
				Action: r.operator("overcommit get-node", 1, config.ReadExisting, func(ctx context.Context, _ *cli.Context, s store.Store, _ *config.Config, _ nodes.Command, args []string) (any, error) {
					return admin(s).GetNode(ctx, args[0])
				}, nodeRatiosTable),
			},
			{
				Name:      "set-node",
				Usage:     "replace a node's overrides; a ratio left out follows the default again",
				ArgsUsage: "NODE",
				Flags:     mutatingFlags(ratio("cpu"), ratio("memory")),
				Action: r.operator("overcommit set-node", 1, config.WriteExisting, func(ctx context.Context, c *cli.Context, s store.Store, _ *config.Config, cmd nodes.Command, args []string) (any, error) {
					var cpu, mem *int64
					for _, f := range []struct {
						name string
						dst  **int64
					}{{"cpu", &cpu}, {"memory", &mem}} {
						if !c.IsSet(f.name) {
							continue
						}
						v, err := overcommit.ParseRatio(f.name, c.String(f.name))
						if err != nil {
							return nil, err
						}
						*f.dst = &v
					}
					return admin(s).SetNode(ctx, args[0], cpu, mem, cmd)
				}, nodeRatiosTable, "cpu", "memory"),
			},
		},
	}
}

func defaultsTable(w io.Writer, raw json.RawMessage) error {
	var d overcommit.Defaults
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	return table(w, [][]string{
		{"CPU RATIO", strconv.FormatInt(d.CPU, 10)},
		{"MEMORY RATIO", strconv.FormatInt(d.Memory, 10)},
		{"VERSION", strconv.FormatInt(d.Version, 10)},
	})
}

func nodeRatiosTable(w io.Writer, raw json.RawMessage) error {
	var n overcommit.NodeOvercommit
	if err := json.Unmarshal(raw, &n); err != nil {
		return err
	}
	return table(w, [][]string{
		{"NODE", n.NodeID},
		{"CPU RATIO", strconv.FormatInt(n.CPU.Ratio, 10) + " (" + string(n.CPU.Source) + ")"},
		{"MEMORY RATIO", strconv.FormatInt(n.Memory.Ratio, 10) + " (" + string(n.Memory.Source) + ")"},
		{"VERSION", strconv.FormatInt(n.Version, 10)},
	})
}

package cmd

import (
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
		return &cli.StringFlag{Name: name, Usage: "ratio in thousandths, 1 to 16000 (1000 is 1x)", DefaultText: "none"}
	}
	return &cli.Command{
		Name:  "overcommit",
		Usage: "CPU and memory overcommit ratios of the compute plugin",
		Subcommands: []*cli.Command{
			{
				Name:  "get-defaults",
				Usage: "the cluster-wide ratios",
				Flags: []cli.Flag{outputFlag()},
				Action: Run(r, spec{name: "overcommit get-defaults", nargs: 0, mode: config.ReadExisting}, func(op *operation) (nodes.Answer[overcommit.Defaults], error) {
					return read(admin(op.store).GetDefaults(op.ctx))
				}, defaultsTables),
			},
			{
				Name:  "set-defaults",
				Usage: "replace both cluster-wide ratios",
				Flags: mutatingFlags(ratio("cpu"), ratio("memory")),
				Action: Run(r, spec{name: "overcommit set-defaults", nargs: 0, mode: config.WriteExisting}, func(op *operation) (nodes.Answer[overcommit.Defaults], error) {
					var none nodes.Answer[overcommit.Defaults]
					if !op.c.IsSet("cpu") || !op.c.IsSet("memory") {
						return none, types.Invalid("set-defaults replaces both ratios: give --cpu and --memory")
					}
					cpu, err := overcommit.ParseRatio("cpu", op.c.String("cpu"))
					if err != nil {
						return none, err
					}
					mem, err := overcommit.ParseRatio("memory", op.c.String("memory"))
					if err != nil {
						return none, err
					}
					return admin(op.store).SetDefaults(op.ctx, cpu, mem, op.cmd)
				}, defaultsTables),
			},
			{
				Name:      "get-node",
				Usage:     "the ratios in effect on a node and where they come from",
				ArgsUsage: "NODE",
				Flags:     []cli.Flag{outputFlag()},
				Action: Run(r, spec{name: "overcommit get-node", nargs: 1, mode: config.ReadExisting}, func(op *operation) (nodes.Answer[overcommit.NodeOvercommit], error) {
					return read(admin(op.store).GetNode(op.ctx, op.args[0]))
				}, nodeRatiosTables),
			},
			{
				Name:      "set-node",
				Usage:     "replace a node's overrides; a ratio left out follows the default again",
				ArgsUsage: "NODE",
				Flags:     mutatingFlags(ratio("cpu"), ratio("memory")),
				Action: Run(r, spec{name: "overcommit set-node", nargs: 1, mode: config.WriteExisting}, func(op *operation) (nodes.Answer[overcommit.NodeOvercommit], error) {
					var cpu, mem *int64
					for _, f := range []struct {
						name string
						dst  **int64
					}{{"cpu", &cpu}, {"memory", &mem}} {
						if !op.c.IsSet(f.name) {
							continue
						}
						v, err := overcommit.ParseRatio(f.name, op.c.String(f.name))
						if err != nil {
							return nodes.Answer[overcommit.NodeOvercommit]{}, err
						}
						*f.dst = &v
					}
					return admin(op.store).SetNode(op.ctx, op.args[0], cpu, mem, op.cmd)
				}, nodeRatiosTables),
			},
		},
	}
}

// Command compute is the eru resource plugin for the "compute" resource. eru core
// runs it once per call as `compute <verb>` with a JSON request on stdin;
// operators run its `nodes` and `overcommit` command groups, and `compute
// serve`, which execs the daemon's own binary (libexec/serve, cmd/serve) that
// answers forwarded calls. Its main is cmd.RunPlugin.
package main

import (
	"os"

	"github.com/eru-extend/resources/cmd"
)

func main() {
	os.Exit(cmd.RunPlugin("compute", os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

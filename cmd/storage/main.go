// Command storage is the eru resource plugin for the "storage" resource. eru core
// runs it once per call as `storage <verb>` with a JSON request on stdin;
// operators run its `nodes` and `overcommit` command groups, and `storage
// serve`, which execs the daemon's own binary (libexec/serve, cmd/serve) that
// answers forwarded calls. Its main is cmd.RunPlugin.
package main

import (
	"os"

	"github.com/eru-extend/resources/cmd"
)

func main() {
	os.Exit(cmd.RunPlugin("storage", os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

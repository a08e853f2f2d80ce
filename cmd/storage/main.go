// Command storage is the eru resource plugin for the "storage" resource. eru core
// runs it once per call as `storage <verb>` with a JSON request on stdin;
// operators run its `nodes` and `overcommit` command groups.
package main

import (
	"os"
	"runtime/debug"

	"github.com/eru-extend/resources/cmd"
)

func main() {
	debug.SetGCPercent(cmd.GCPercent)
	os.Exit(cmd.Main("storage", os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

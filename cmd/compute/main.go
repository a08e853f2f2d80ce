// Command compute is the eru resource plugin for the "compute" resource. eru core
// runs it once per call as `compute <verb>` with a JSON request on stdin;
// operators run its `nodes` and `overcommit` command groups, and `compute
// serve`, which execs the daemon's own binary (libexec/serve, cmd/serve) that
// answers forwarded calls.
package main

import (
	"os"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/internal/forward"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(cmd.ExecServe("compute", os.Args[2:], os.Stderr))
	}
	code, done, stdin := forward.Try(forward.Call{Binary: "compute", Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if done {
		os.Exit(code)
	}
	// A call run here is one short process: no collection until its heap
	// is large, then a lower target than Go's for a smaller peak on
	// many-node reads. The daemon paces its own (cmd.DaemonGC).
	cmd.ColdGC()
	os.Exit(cmd.Main("compute", os.Args[1:], stdin, os.Stdout, os.Stderr))
}

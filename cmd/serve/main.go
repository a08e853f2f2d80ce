// Command serve is the daemon of docs/serve.md, a binary of its own so that
// the plugin binaries core execs once per call link none of it: Prometheus'
// client, statsd, the watch cache and flow control would otherwise run
// their package initialisation at every call. It is installed as
// <plugin-dir>/libexec/serve (core runs only the top-level executables of
// its plugin folder, so it never sees it), and operators start it as
// `storage serve` or `compute serve`: the plugin binary finds it and execs
// it, in the same process, as
//
//	serve --as storage|compute [--config FILE]
//
// --as names the plugin whose command started it (its config file is the
// default one, its name is in every log line); it must come first.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/eru-extend/resources/serve"
	"github.com/eru-extend/resources/store/etcdwatch"
	"github.com/eru-extend/resources/types"
)

func main() {
	etcdwatch.QuietGRPC()
	name, args, err := plugin(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "serve: %s: %s\n", types.ClassOf(err), err)
		os.Exit(types.ClassOf(err).ExitCode())
	}
	os.Exit(serve.Main(name, args, os.Stderr))
}

// plugin splits `--as NAME` (or `--as=NAME`) off the front of args.
func plugin(args []string) (name string, rest []string, err error) {
	switch {
	case len(args) >= 2 && args[0] == "--as":
		name, rest = args[1], args[2:]
	case len(args) >= 1 && strings.HasPrefix(args[0], "--as="):
		name, rest = strings.TrimPrefix(args[0], "--as="), args[1:]
	default:
		return "", nil, types.Invalid("the first argument must be --as storage or --as compute (operators run the daemon as `storage serve`)")
	}
	if name != "storage" && name != "compute" {
		return "", nil, types.Invalid("--as %q: the plugin must be storage or compute", name)
	}
	return name, rest, nil
}

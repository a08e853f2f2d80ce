package cmd

import (
	"io"
	"slices"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/internal/forward"
)

// RunPlugin is the whole of a plugin binary's main (cmd/storage,
// cmd/compute): `serve` execs the daemon; a verb whose answer the binary
// alone fixes is answered at once (RunFixed); any other call goes to a
// running daemon when there is one (internal/forward), else runs here, a
// plugin verb without building the command tree (RunVerb), anything else
// through it (Main). It sets the process's garbage collector for one short
// call (ColdGC) before running a call here, so it is for a main only.
func RunPlugin(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "serve" {
		return ExecServe(name, args[1:], stderr)
	}
	// The binary's help names serve, whose usage is the daemon's.
	if len(args) == 2 && (args[0] == "help" || args[0] == "h") && args[1] == "serve" {
		return ExecServe(name, []string{"--help"}, stderr)
	}
	// --config may stand anywhere on the line (docs/configuration.md),
	// before serve too: `storage --config f serve` is `storage serve
	// --config f`.
	if slices.Contains(args, "serve") {
		if path, rest, err := config.FlagFromArgs(args); err == nil && path != "" && len(rest) > 0 && rest[0] == "serve" {
			return ExecServe(name, append([]string{"--config", path}, rest[1:]...), stderr)
		}
	}
	if code, ok := RunFixed(name, args, stdout, stderr); ok {
		return code
	}
	code, done, stdin := forward.Try(forward.Call{Binary: name, Args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if done {
		return code
	}
	// A call run here is one short process: no collection until its heap
	// is large, then a lower target than Go's for a smaller peak on
	// many-node reads. The daemon paces its own (DaemonGC).
	ColdGC()
	if code, ok := RunVerb(Options{}, name, args, stdin, stdout, stderr); ok {
		return code
	}
	return Main(name, args, stdin, stdout, stderr)
}

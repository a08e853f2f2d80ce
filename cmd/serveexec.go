package cmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/eru-extend/resources/types"
)

// DaemonDir is the folder of the serve daemon's binary beside the plugin
// binaries: core runs only the top-level executables of its plugin
// folder, so it never sees what is in it.
const DaemonDir = "libexec"

// DaemonName is the file name of the serve daemon's binary (cmd/serve).
const DaemonName = "serve"

// DaemonPaths are the places `<name> serve` looks for the daemon's binary,
// in order, for a plugin binary at exe (its symlinks resolved):
// <its folder>/libexec/serve, and <its folder>/serve when that folder is
// itself a libexec folder (the front layout of docs/serve.md keeps the
// full binaries there).
func DaemonPaths(exe string) []string {
	dir := filepath.Dir(exe)
	paths := []string{filepath.Join(dir, DaemonDir, DaemonName)}
	if filepath.Base(dir) == DaemonDir {
		paths = append(paths, filepath.Join(dir, DaemonName))
	}
	return paths
}

// FindDaemon returns the first of DaemonPaths(exe) that is an executable
// file; when there is none, an invalid_argument error naming every path
// looked at and how to build and install the daemon.
func FindDaemon(exe string) (string, error) {
	paths := DaemonPaths(exe)
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", types.Invalid("no serve daemon binary at %s: build it with `make build` (bin/%s/%s) and install it as %s/%s beside this binary",
		strings.Join(paths, " nor "), DaemonDir, DaemonName, DaemonDir, DaemonName)
}

// ExecServe runs `<name> serve args...`: it replaces this process with the
// serve daemon's binary (found by FindDaemon from this executable), run as
// `serve --as <name> args...`, so the daemon keeps this process's id
// (systemd's and a shell's signals reach it). The plugin binaries link
// none of the daemon's code, whose package initialisation every call would
// otherwise pay. ExecServe returns only on failure, with the exit status
// after one line on stderr.
func ExecServe(name string, args []string, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: serve: %s: %s\n", name, types.ClassOf(err), strings.Join(strings.Fields(err.Error()), " "))
		return types.ClassOf(err).ExitCode()
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return fail(types.Wrap(types.InvalidArgument, err, "finding this binary's folder"))
	}
	daemon, err := FindDaemon(exe)
	if err != nil {
		return fail(err)
	}
	argv := append([]string{daemon, "--as", name}, args...)
	return fail(types.Wrap(types.Internal, syscall.Exec(daemon, argv, os.Environ()), "exec "+daemon))
}

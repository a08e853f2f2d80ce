// Command forwarder is a small front for the plugin binaries: installed as
// <plugin-dir>/storage and <plugin-dir>/compute, with the full binaries in
// <plugin-dir>/libexec/, it hands each call to a running `serve` daemon
// and, when none answers, execs the full binary of its own name with the
// same arguments and stdin. core only runs the top-level executables of its
// plugin folder, so libexec/ is invisible to it. It links none of the etcd,
// gRPC or YAML packages, so a forwarded call pays little more than the
// start of a small process.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/eru-extend/resources/internal/forward"
)

// Engine is the folder of the full binaries, beside this one.
const Engine = "libexec"

func main() {
	name := filepath.Base(os.Args[0])
	if answer, ok := forward.NameAnswer(name, os.Args[1:]); ok {
		// core asks each plugin its name as it loads it: no daemon or
		// full binary is needed to say it.
		_, err := os.Stdout.WriteString(answer)
		if err != nil {
			// The full binary's one line for an answer it could not print.
			_, _ = os.Stderr.WriteString(forward.NameUnprinted(name, err))
			os.Exit(forward.PluginExitCode)
		}
		os.Exit(0)
	}
	o := forward.Forward(forward.Call{Binary: name, Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if o.Handled {
		os.Exit(o.Code)
	}
	exe, err := os.Executable()
	if err != nil {
		fail(name, err)
	}
	full := filepath.Join(filepath.Dir(exe), Engine, name)
	if o.ReadStdin {
		// The full binary reads stdin from its start: give it what was
		// taken, in a memory file.
		fd, err := unix.MemfdCreate("stdin", 0)
		if err != nil {
			fail(name, err)
		}
		for data := o.Read; len(data) > 0; {
			n, err := unix.Write(fd, data)
			if err != nil {
				fail(name, err)
			}
			data = data[n:]
		}
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			fail(name, err)
		}
		if fd != 0 {
			if err := unix.Dup3(fd, 0, 0); err != nil {
				fail(name, err)
			}
		}
	}
	fail(name, syscall.Exec(full, append([]string{full}, os.Args[1:]...), forward.NoForwardEnv(os.Environ())))
}

func fail(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: cannot run the plugin engine %s: %v\n", name, filepath.Join(Engine, name), err)
	os.Exit(forward.PluginExitCode)
}

// Command linked is a floor of the bench: the storage plugin's whole
// program, everything cmd.RunPlugin links, started and initialised, that
// prints the plugin's name without running any of it. What `storage name`
// costs above it is the plugin's own work for the call; what it costs
// above a Go hello-world is the start of that much linked code (package
// initialisation, a larger binary's page faults).
package main

import (
	"os"

	"github.com/eru-extend/resources/cmd"
)

func main() {
	// Never true, and the compiler cannot know it: the whole plugin
	// stays linked.
	if len(os.Args) > 1 && os.Args[1] == "--run-the-plugin" {
		os.Exit(cmd.RunPlugin("storage", os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	_, _ = os.Stdout.WriteString("\"storage\"\n")
}

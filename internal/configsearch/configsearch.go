// Package configsearch is the one rule for which config file a binary of
// this module reads when neither --config nor $ERU_RESOURCE_CONFIG_PATH
// names one: in the working directory, the binary's own file, then the
// sibling plugin's, then the shared one. The command tree (cmd/config) and
// the forwarding front (internal/forward) both follow it, so a call is only
// forwarded to a daemon serving the file the binary itself would read. It
// uses the standard library only: the front links it.
package configsearch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// EnvPath names the environment variable that points at a config file.
const EnvPath = "ERU_RESOURCE_CONFIG_PATH"

// SharedName is the config file both plugins read when neither has a file
// of its own in the working directory.
const SharedName = "eru-resources.yaml"

// MaxFileSize is the largest config file the binaries read: a copy of
// core's core.yaml is a few kilobytes, and a file past this is refused
// (the command tree) or not scanned (the forwarding front) rather than
// parsed at every call.
const MaxFileSize = 1 << 20

// Plugins are the binaries of this module, each of which reads the other's
// file when it has none of its own, so that both always use one store.
func Plugins() []string { return []string{"storage", "compute"} }

// Place is which of the working directory's files a candidate is.
type Place int

// The places, in the order they are tried.
const (
	Own Place = iota
	Sibling
	Shared
)

// Candidate is a file the binary would read if it exists.
type Candidate struct {
	File  string
	Place Place
}

// Candidates are the files binary looks for in workdir, in order.
func Candidates(binary, workdir string) []Candidate {
	out := []Candidate{{filepath.Join(workdir, binary+".yaml"), Own}}
	for _, p := range Plugins() {
		if p != binary {
			out = append(out, Candidate{filepath.Join(workdir, p+".yaml"), Sibling})
		}
	}
	return append(out, Candidate{filepath.Join(workdir, SharedName), Shared})
}

// Exists reports whether a candidate is the file meant: it exists, or it
// cannot be looked at (reading it then says why it cannot be used).
func Exists(file string) bool {
	_, err := os.Stat(file)
	return !errors.Is(err, fs.ErrNotExist)
}

// Abs is the absolute path of a config file named file in the working
// directory wd, as the kernel opens it: a path with ".." in it is resolved
// through any symbolic link before the "..", not cleaned as text (cleaning
// "link/.." would name another folder than the file's, and relative paths
// in the file are taken from its folder). One that does not resolve is left
// as it is. The command tree and the forwarding front both name a file so.
func Abs(file, wd string) string {
	if !filepath.IsAbs(file) {
		file = wd + string(filepath.Separator) + file
	}
	if strings.Contains(file, "..") && slices.Contains(strings.Split(file, string(filepath.Separator)), "..") {
		if real, err := filepath.EvalSymlinks(file); err == nil {
			return real
		}
		return file
	}
	return filepath.Clean(file)
}

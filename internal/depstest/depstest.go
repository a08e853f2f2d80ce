// Package depstest holds a binary's or a package's dependencies to a
// budget: every exec of a plugin runs the package initialisation of
// everything it links, so what the cold path may link is part of its
// contract, checked by tests beside the packages.
package depstest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Forbid fails t when the packages (import paths, or paths relative to the
// test's folder) depend on any of forbidden: an entry ending in "/" forbids
// every package under it; any other entry forbids that package and every
// package under it. Each of want must be among the dependencies, so that
// the list checked is the one meant.
func Forbid(t testing.TB, pkgs, want, forbidden []string) {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	for _, w := range want {
		require.Contains(t, deps, w, "the list is that of %v", pkgs)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			require.False(t, Matches(dep, f), "%v link %s", pkgs, dep)
		}
	}
}

// Matches says whether the package dep is forbidden by the entry f (see
// Forbid).
func Matches(dep, f string) bool {
	if strings.HasSuffix(f, "/") {
		return strings.HasPrefix(dep, f)
	}
	return dep == f || strings.HasPrefix(dep, f+"/")
}

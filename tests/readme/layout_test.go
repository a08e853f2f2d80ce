package readme_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestTheLayoutSectionMatchesTheTree holds the README's layout table to the
// tree: a row for every top-level folder, and every path a row names
// exists (a file name is looked up in the row's folder).
func TestTheLayoutSectionMatchesTheTree(t *testing.T) {
	root := testenv.Root()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "\n## Layout\n")
	require.True(t, ok, "the README has a Layout section")
	section, _, _ = strings.Cut(section, "\n## ")

	rows := map[string]string{} // first column -> the rest of the row
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.SplitN(line, "|", 3)
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = cells[2]
	}

	// Build output the repository ignores (/bin/, /tmp/) is not the tree.
	ignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	require.NoError(t, err)
	ignored := map[string]bool{}
	for line := range strings.SplitSeq(string(ignore), "\n") {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok && strings.HasSuffix(dir, "/") {
			ignored[strings.TrimSuffix(dir, "/")] = true
		}
	}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !ignored[e.Name()] {
			_, ok := rows[e.Name()+"/"]
			require.True(t, ok, "the layout table has no row for %s/", e.Name())
		}
	}

	path := regexp.MustCompile("`([A-Za-z0-9_/.-]+)`")
	for dir, rest := range rows {
		require.DirExists(t, filepath.Join(root, dir), "a layout row names %s", dir)
		for _, m := range path.FindAllStringSubmatch(rest, -1) {
			name := m[1]
			switch {
			case strings.HasSuffix(name, ".go"):
				require.FileExists(t, filepath.Join(root, dir, name), "the %s row names %s", dir, name)
			case strings.Contains(name, "/") && rows[strings.SplitN(name, "/", 2)[0]+"/"] != "":
				require.DirExists(t, filepath.Join(root, name), "the %s row names %s", dir, name)
			}
		}
	}
}

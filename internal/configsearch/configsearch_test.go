package configsearch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCandidates(t *testing.T) {
	for _, c := range []struct {
		binary string
		want   []Candidate
	}{
		{"storage", []Candidate{{"/w/storage.yaml", Own}, {"/w/compute.yaml", Sibling}, {"/w/eru-resources.yaml", Shared}}},
		{"compute", []Candidate{{"/w/compute.yaml", Own}, {"/w/storage.yaml", Sibling}, {"/w/eru-resources.yaml", Shared}}},
	} {
		t.Run(c.binary+" looks for its own file, then the sibling's, then the shared one", func(t *testing.T) {
			require.Equal(t, c.want, Candidates(c.binary, "/w"))
		})
	}
}

func TestExists(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "storage.yaml")
	t.Run("a missing file is not the one meant", func(t *testing.T) {
		require.False(t, Exists(file))
	})
	t.Run("a file that exists is", func(t *testing.T) {
		require.NoError(t, os.WriteFile(file, nil, 0o644))
		require.True(t, Exists(file))
	})
	t.Run("a file that cannot be looked at is too: reading it says why", func(t *testing.T) {
		// Under a regular file, stat fails with "not a directory", not
		// "does not exist".
		require.True(t, Exists(filepath.Join(file, "storage.yaml")))
	})
}

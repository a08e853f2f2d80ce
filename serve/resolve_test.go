package serve

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/internal/forward"
)

// TestTheForwarderFindsTheConfigTheCommandTreeFinds: the binaries look for
// the daemon beside the config file the command tree would load; the two
// resolutions must agree, or a call would be forwarded for another config
// (the daemon then declines it: correct, but never forwarded).
func TestTheForwarderFindsTheConfigTheCommandTreeFinds(t *testing.T) {
	dir := t.TempDir()
	abs := func(p string) string {
		if p == "" {
			return ""
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return filepath.Clean(p)
	}
	for _, c := range []struct {
		name, explicit, env string
		files               []string
	}{
		{"nothing at all", "", "", nil},
		{"the binary's own file", "", "", []string{"storage.yaml"}},
		{"an explicit file", "other.yaml", "", []string{"storage.yaml"}},
		{"the environment's file", "", "/etc/eru/e.yaml", []string{"storage.yaml"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range []string{"storage.yaml", "compute.yaml", "eru-resources.yaml"} {
				_ = os.Remove(filepath.Join(dir, f))
			}
			for _, f := range c.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
			}
			t.Setenv(config.EnvPath, c.env)
			want, err := config.Resolve(c.explicit, "storage", dir)
			require.NoError(t, err)
			require.Equal(t, abs(want), forward.Resolve(c.explicit, "storage", dir))
		})
	}
}

package serve

import (
	"log/slog"
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

// TestTheDaemonServesTheSiblingConfigBesideItsOwn: started from another
// folder with --config, the daemon serves the other plugin's file beside
// its own, where core execs the plugins, not a file of the folder it was
// started in.
func TestTheDaemonServesTheSiblingConfigBesideItsOwn(t *testing.T) {
	plugins, elsewhere := t.TempDir(), t.TempDir()
	for _, dir := range []string{plugins, elsewhere} {
		for _, b := range Binaries {
			require.NoError(t, os.WriteFile(filepath.Join(dir, b+".yaml"), []byte("embedded:\n  path: "+filepath.Join(plugins, "db")+"\n"), 0o644))
		}
	}
	cfg, err := config.Load(filepath.Join(plugins, "storage.yaml"), "storage")
	require.NoError(t, err)
	d, err := New(t.Context(), "storage", elsewhere, cfg, Config{}, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	defer d.Close()
	served := []string{}
	for file := range d.files {
		served = append(served, file)
	}
	require.ElementsMatch(t, []string{filepath.Join(plugins, "storage.yaml"), filepath.Join(plugins, "compute.yaml")}, served)
}

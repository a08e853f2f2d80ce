package serve

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd"
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

// TestAConfigPathThroughALinkAndDotDotIsOneStoreForwardedOrLocal: a config
// path through a symbolic link and then ".." is forwarded to the daemon of
// the file the kernel opens (forward.Resolve); a call run locally on that
// path must then use the same store, whose relative path is taken from
// the folder of the file read, or a write forwarded and one run locally
// (no daemon, or one declining) land in two stores, and a read answers
// differently through the daemon than locally.
func TestAConfigPathThroughALinkAndDotDotIsOneStoreForwardedOrLocal(t *testing.T) {
	_, file := flowDaemon(t, "", AdmitAll) // embedded.path: eru-resources.db, beside the file
	served := filepath.Dir(file)
	require.NoError(t, os.Mkdir(filepath.Join(served, "sub"), 0o755))
	elsewhere := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(served, "sub"), filepath.Join(elsewhere, "link")))
	path := filepath.Join(elsewhere, "link") + "/../storage.yaml" // the kernel opens served/storage.yaml
	require.Equal(t, file, forward.Resolve(path, "storage", elsewhere), "forwarded to the daemon of the file opened")

	run := func(forwarded bool, verb, stdin string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		args := []string{"--config", path, verb}
		if forwarded {
			code, handled, _ := forward.Try(forward.Call{Binary: "storage", Args: args, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
			require.True(t, handled, "the daemon answered")
			return code, out.String(), errb.String()
		}
		code, ok := cmd.RunVerb(cmd.Options{}, "storage", args, strings.NewReader(stdin), &out, &errb)
		require.True(t, ok)
		return code, out.String(), errb.String()
	}
	code, _, errOut := run(true, "add-node", `{"nodename":"n1","resource":{"volumes":["/data0:1T"],"storage":"2T"}}`)
	require.Equal(t, 0, code, errOut)
	const info = `{"nodename":"n1","workloads_resource":[]}`
	fc, fout, ferr := run(true, "get-node-resource-info", info)
	require.Equal(t, 0, fc, ferr)
	lc, lout, lerr := run(false, "get-node-resource-info", info)
	require.Equal(t, [3]any{fc, fout, ferr}, [3]any{lc, lout, lerr}, "the local run reads another store than the daemon")
}

package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// place puts the built binary called name at dst (a hard link, else a
// copy): a file of its own, so that the binary's folder is dst's.
func place(t *testing.T, name, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	src := testenv.Bin(t, name)
	if os.Link(src, dst) == nil {
		return
	}
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, data, 0o755))
}

// TestServeExecsTheDaemonBinaryBesideThePlugin: `storage serve` and
// `compute serve` run the daemon's own binary, found from the plugin
// binary's real folder: libexec/serve below it, or serve beside it when
// the plugin binary itself lives in a libexec folder (the front layout).
// `serve --help` is answered by the daemon's code, which the plugins do
// not link (TestThePluginsLinkNoneOfTheDaemon).
func TestServeExecsTheDaemonBinaryBesideThePlugin(t *testing.T) {
	for _, c := range []struct {
		name   string
		plugin string            // the binary's name
		files  map[string]string // path in the folder -> built binary
		run    string            // the path run, in the folder
	}{
		{"a plugin binary finds libexec/serve below its folder", "storage",
			map[string]string{"storage": "storage", "libexec/serve": testenv.DaemonBin}, "storage"},
		{"compute finds it the same way and names itself", "compute",
			map[string]string{"compute": "compute", "libexec/serve": testenv.DaemonBin}, "compute"},
		{"a full binary in libexec/ finds serve beside it", "storage",
			map[string]string{"libexec/storage": "storage", "libexec/serve": testenv.DaemonBin}, "libexec/storage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for path, bin := range c.files {
				place(t, bin, filepath.Join(dir, path))
			}
			res, err := testenv.Run(filepath.Join(dir, c.run), dir, nil, "serve", "--help")
			require.NoError(t, err)
			require.Equal(t, 0, res.Code, "%+v", res)
			require.Empty(t, res.Stdout)
			require.True(t, strings.HasPrefix(res.Stderr, "usage: "+c.plugin+" serve [--config FILE]\n"), "the daemon's usage: %q", res.Stderr)
		})
	}

	t.Run("a symlink to the plugin binary finds the daemon beside the binary it names", func(t *testing.T) {
		dir, elsewhere := t.TempDir(), t.TempDir()
		place(t, "storage", filepath.Join(dir, "storage"))
		place(t, testenv.DaemonBin, filepath.Join(dir, "libexec", "serve"))
		require.NoError(t, os.Symlink(filepath.Join(dir, "storage"), filepath.Join(elsewhere, "storage")))
		res, err := testenv.Run(filepath.Join(elsewhere, "storage"), elsewhere, nil, "serve", "--help")
		require.NoError(t, err)
		require.Equal(t, 0, res.Code, "%+v", res)
		require.True(t, strings.HasPrefix(res.Stderr, "usage: storage serve"), "%q", res.Stderr)
	})
}

// TestServeWithoutTheDaemonBinaryIsOneLine: a plugin binary installed
// without libexec/serve answers `serve` with one line naming every path it
// looked at and how to build and install the daemon, and exits 2
// (invalid_argument, as every usage error); nothing on stdout.
func TestServeWithoutTheDaemonBinaryIsOneLine(t *testing.T) {
	for _, c := range []struct {
		name   string
		plugin string
		run    string   // where the plugin binary is, in the folder
		looked []string // the paths named, in the folder
	}{
		{"a plugin folder without libexec/serve", "storage", "storage", []string{"libexec/serve"}},
		{"compute alike", "compute", "compute", []string{"libexec/serve"}},
		{"a full binary in libexec/ with no serve beside it", "storage", "libexec/storage", []string{"libexec/libexec/serve", "libexec/serve"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			place(t, c.plugin, filepath.Join(dir, c.run))
			res, err := testenv.Run(filepath.Join(dir, c.run), dir, nil, "serve")
			require.NoError(t, err)
			require.Equal(t, 2, res.Code, "%+v", res)
			require.Empty(t, res.Stdout)
			looked := make([]string, len(c.looked))
			for i, p := range c.looked {
				looked[i] = filepath.Join(dir, p)
			}
			want := c.plugin + ": serve: invalid_argument: no serve daemon binary at " + strings.Join(looked, " nor ") +
				": build it with `make build` (bin/libexec/serve) and install it as libexec/serve beside this binary\n"
			require.Equal(t, want, res.Stderr)
		})
	}
}

// TestServeTakesConfigBeforeIt: --config stands anywhere on the command
// line (docs/configuration.md, "Which file is read"), so `storage --config
// f serve` runs the daemon on f, as `storage serve --config f` does,
// instead of calling serve an unknown command.
func TestServeTakesConfigBeforeIt(t *testing.T) {
	for _, args := range [][]string{
		{"--config", "missing.yaml", "serve"},
		{"--config=missing.yaml", "serve"},
		{"serve", "--config", "missing.yaml"},
	} {
		t.Run(strings.Join(args, " ")+" reads the file it names", func(t *testing.T) {
			dir := t.TempDir()
			place(t, "storage", filepath.Join(dir, "storage"))
			place(t, testenv.DaemonBin, filepath.Join(dir, "libexec", "serve"))
			res, err := testenv.Run(filepath.Join(dir, "storage"), dir, nil, args...)
			require.NoError(t, err)
			require.Equal(t, 2, res.Code, "%+v", res)
			require.Empty(t, res.Stdout)
			require.Equal(t, "storage: serve: invalid_argument: config: open missing.yaml: no such file or directory\n", res.Stderr)
		})
	}
}

// TestTheDaemonBinaryWantsToKnowItsPlugin: libexec/serve run by hand
// without --as storage|compute first is a usage error in one line.
func TestTheDaemonBinaryWantsToKnowItsPlugin(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no arguments", nil, "serve: invalid_argument: the first argument must be --as storage or --as compute (operators run the daemon as `storage serve`)\n"},
		{"--config before --as", []string{"--config", "x.yaml", "--as", "storage"}, "serve: invalid_argument: the first argument must be --as storage or --as compute (operators run the daemon as `storage serve`)\n"},
		{"a plugin that does not exist", []string{"--as=memory"}, "serve: invalid_argument: --as \"memory\": the plugin must be storage or compute\n"},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			dir := t.TempDir()
			res, err := testenv.Run(testenv.Bin(t, testenv.DaemonBin), dir, nil, c.args...)
			require.NoError(t, err)
			require.Equal(t, 2, res.Code, "%+v", res)
			require.Empty(t, res.Stdout)
			require.Equal(t, c.want, res.Stderr)
		})
	}
}

// TestStorageServeIsTheDaemonInTheSameProcess starts `storage serve` as
// operators and systemd do: the process it started is the daemon's binary
// (the same PID, so SIGTERM reaches the daemon), and it answers forwarded
// calls.
func TestStorageServeIsTheDaemonInTheSameProcess(t *testing.T) {
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	addr := testenv.FreeAddr(t)
	cfg := env.ConfigYAML() + "serve:\n  http: " + addr + "\n"
	for _, name := range []string{"storage.yaml", "compute.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(env.Dir, name), []byte(cfg), 0o644))
	}
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	exe, err := os.Readlink("/proc/" + strconv.Itoa(d.Cmd.Process.Pid) + "/exe")
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(testenv.Bin(t, testenv.DaemonBin))
	require.NoError(t, err)
	require.Equal(t, want, exe, "the process started as `storage serve` runs libexec/serve")

	env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"storage": "1T"}}, nil)
	env.Call(t, "compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 2, "memory": "4G"}}, nil)
	require.Equal(t, 2, d.Forwarded(t), "both plugins' calls answered by the daemon")
	d.Stop(t)
	require.Contains(t, d.Log(), `"msg":"shutting down"`, "SIGTERM to the PID `storage serve` started stopped the daemon cleanly")
}

// TestHelpServeIsTheDaemonsUsage: the binary's help names `serve`, and
// `help serve` answers what `serve --help` answers: the daemon's usage.
func TestHelpServeIsTheDaemonsUsage(t *testing.T) {
	dir := t.TempDir()
	place(t, "storage", filepath.Join(dir, "storage"))
	place(t, "compute", filepath.Join(dir, "compute"))
	place(t, testenv.DaemonBin, filepath.Join(dir, "libexec", "serve"))
	for _, c := range []struct {
		name   string
		plugin string
		args   []string
	}{
		{"help serve shows the daemon's usage", "storage", []string{"help", "serve"}},
		{"h serve shows it too", "storage", []string{"h", "serve"}},
		{"compute help serve shows it named for compute", "compute", []string{"help", "serve"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := testenv.Run(filepath.Join(dir, c.plugin), dir, nil, "serve", "--help")
			require.NoError(t, err)
			res, err := testenv.Run(filepath.Join(dir, c.plugin), dir, nil, c.args...)
			require.NoError(t, err)
			require.Equal(t, 0, res.Code, "%+v", res)
			require.Equal(t, want.Stdout, res.Stdout)
			require.Equal(t, want.Stderr, res.Stderr)
			require.True(t, strings.HasPrefix(res.Stderr, "usage: "+c.plugin+" serve [--config FILE]\n"), "%q", res.Stderr)
		})
	}
}

package serve

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/internal/forward"
)

// TestAForwardedCallLogsTheConfigSourceTheBinaryWouldLog: the log record
// of a call the daemon ran says how the calling binary found its config
// file, as that binary run locally says it, not how the daemon found it
// (the daemon's own file is the sibling's file for the other binary, and
// the daemon loads the other plugin's file by name).
func TestAForwardedCallLogsTheConfigSourceTheBinaryWouldLog(t *testing.T) {
	const doc = "embedded:\n  path: eru-resources.db\nlog:\n  file: calls.log\n"
	for _, c := range []struct {
		name   string
		files  []string // in the plugin folder
		args   func(dir string) []string
		env    func(dir string) string
		binary string
		want   config.Source
	}{
		{"a compute call on compute's own file is logged as the plugin's own file", []string{"storage.yaml", "compute.yaml"}, nil, nil, "compute", config.FromWorkdir},
		{"a compute call on the storage file alone is logged as the sibling plugin's file", []string{"storage.yaml"}, nil, nil, "compute", config.FromSibling},
		{"a storage call on the daemon's own file is logged as the plugin's own file", []string{"storage.yaml"}, nil, nil, "storage", config.FromWorkdir},
		{"a compute call on the shared file is logged as the shared file", []string{"eru-resources.yaml"}, nil, nil, "compute", config.FromShared},
		{"a compute call naming its file with --config is logged as --config", []string{"storage.yaml", "compute.yaml"},
			func(dir string) []string { return []string{"--config", filepath.Join(dir, "compute.yaml")} }, nil, "compute", config.FromFlag},
		{"a compute call naming its own file in the environment is logged as the environment's", []string{"storage.yaml", "compute.yaml"},
			nil, func(dir string) string { return filepath.Join(dir, "compute.yaml") }, "compute", config.FromEnv},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range c.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(doc), 0o644))
			}
			t.Chdir(dir)
			t.Setenv(config.EnvPath, "")
			cfg, err := config.Load("", "storage") // as `storage serve` run in the plugin folder
			require.NoError(t, err)
			sc, err := LoadConfig(cfg.File, dir)
			require.NoError(t, err)
			d, err := New(t.Context(), "storage", dir, cfg, sc, slog.New(slog.DiscardHandler), AdmitAll)
			require.NoError(t, err)
			require.NoError(t, d.Listen())
			go d.ServeSocket()
			t.Cleanup(func() {
				require.NoError(t, d.Shutdown(5*time.Second))
				d.Close()
			})
			if c.env != nil {
				t.Setenv(config.EnvPath, c.env(dir))
			}
			var args []string
			if c.args != nil {
				args = c.args(dir)
			}
			args = append(args, "get-node-resource-info")
			const stdin = `{"nodename":"nobody","workloads_resource":[]}`
			var out, errb bytes.Buffer
			_, handled, _ := forward.Try(forward.Call{Binary: c.binary, Args: args, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
			require.True(t, handled, "the daemon ran the call: %s", errb.String())
			_, ok := cmd.RunVerb(cmd.Options{}, c.binary, args, strings.NewReader(stdin), &out, &errb)
			require.True(t, ok)

			data, err := os.ReadFile(filepath.Join(dir, "calls.log"))
			require.NoError(t, err)
			var sources []config.Source
			for line := range strings.Lines(string(data)) {
				var rec struct {
					Plugin string
					Config struct{ Source config.Source }
				}
				require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
				if rec.Plugin == c.binary {
					sources = append(sources, rec.Config.Source)
				}
			}
			require.Equal(t, []config.Source{c.want, c.want}, sources, "the forwarded call's record, then the local one's")
		})
	}
}

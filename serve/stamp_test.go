package serve

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/internal/forward"
)

// TestTheDaemonDeclinesCallsOnceItsConfigFileChanges: a daemon serves a
// file's calls only while the file holds what the daemon read, however
// the change came: before the daemon was built from its read, or as a
// same-size write in the clock tick of the read, which keeps the file's
// size and modification time.
func TestTheDaemonDeclinesCallsOnceItsConfigFileChanges(t *testing.T) {
	const first, second = "scheduler:\n  max_deploy_count: 100\n", "scheduler:\n  max_deploy_count: 200\n"
	body := func(dir, scheduler string) []byte {
		return []byte(scheduler + "embedded:\n  path: " + filepath.Join(dir, "db") + "\n")
	}
	for _, c := range []struct {
		name string
		// change runs between the config's load and the daemon's start
		// (before) or after the start (after); mtime is the file's
		// modification time as loaded.
		before, after func(t *testing.T, file string, mtime time.Time)
		served        bool
	}{
		{name: "a file left alone is served", served: true},
		{name: "a file rewritten after the start is declined", after: func(t *testing.T, file string, _ time.Time) {
			require.NoError(t, os.WriteFile(file, []byte(second+"# longer\n"), 0o644))
		}, served: false},
		{name: "a file rewritten between the load and the start is declined", before: func(t *testing.T, file string, _ time.Time) {
			require.NoError(t, os.WriteFile(file, []byte(second+"# longer\n"), 0o644))
		}, served: false},
		{name: "a same-size rewrite in the tick of the read is declined", after: func(t *testing.T, file string, mtime time.Time) {
			require.NoError(t, os.WriteFile(file, body(filepath.Dir(file), second), 0o644))
			require.NoError(t, os.Chtimes(file, mtime, mtime))
		}, served: false},
		{name: "a same-size file with the same modification time renamed over it is declined", after: func(t *testing.T, file string, mtime time.Time) {
			require.NoError(t, os.WriteFile(file+".new", body(filepath.Dir(file), second), 0o644))
			require.NoError(t, os.Chtimes(file+".new", mtime, mtime))
			require.NoError(t, os.Rename(file+".new", file))
		}, served: false},
		{name: "a file touched without a change is declined, as its time says it may have changed", after: func(t *testing.T, file string, _ time.Time) {
			later := time.Now().Add(time.Minute)
			require.NoError(t, os.Chtimes(file, later, later))
		}, served: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "storage.yaml")
			require.NoError(t, os.WriteFile(file, body(dir, first), 0o644))
			cfg, err := config.Load(file, "storage")
			require.NoError(t, err)
			require.True(t, cfg.Stamp.Racy(), "the file was just written")
			if c.before != nil {
				c.before(t, file, cfg.Stamp.ModTime)
			}
			d, err := New(t.Context(), "storage", dir, cfg, Config{}, slog.New(slog.DiscardHandler), nil)
			require.NoError(t, err)
			defer d.Close()
			if c.after != nil {
				c.after(t, file, cfg.Stamp.ModTime)
			}
			req := forward.Request{Binary: "storage", Args: []string{"get-node-resource-info"}, Config: file, Dir: dir, Verb: "get-node-resource-info"}
			_, why := d.accept(req, nil)
			if c.served {
				require.Empty(t, why)
			} else {
				require.Equal(t, "config changed since the daemon started: "+file, why)
			}
		})
	}
}

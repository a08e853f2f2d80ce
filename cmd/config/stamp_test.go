package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStampUnchanged(t *testing.T) {
	later := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }
	for _, c := range []struct {
		name string
		// readAt and checkAt are the clocks of the stamp's read and of the
		// check's; edit changes the file in between.
		readAt, checkAt   func() time.Time
		edit              func(t *testing.T, file string, s Stamp)
		racy              bool // the caller still compares contents
		wantSame, settled bool
	}{
		{name: "a file changed long before its read is unchanged and settled",
			readAt: later(time.Hour), checkAt: later(time.Hour), racy: false, wantSame: true, settled: true},
		{name: "a file changed just before its read is unchanged but not yet settled",
			readAt: time.Now, checkAt: time.Now, racy: true, wantSame: true, settled: false},
		{name: "a racy stamp settles once a read begins a window after the change",
			readAt: time.Now, checkAt: later(RacyWindow + time.Second), racy: true, wantSame: true, settled: true},
		{name: "a same-size write keeping the times is caught while the stamp is racy",
			readAt: time.Now, checkAt: time.Now, racy: true, wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) {
				require.NoError(t, os.WriteFile(file, []byte("b: 2\n"), 0o644))
				require.NoError(t, os.Chtimes(file, s.ModTime, s.ModTime))
			}},
		{name: "a same-size file with the same modification time renamed over it is caught when settled",
			readAt: later(time.Hour), checkAt: later(time.Hour), racy: false, wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) {
				other := file + ".new"
				require.NoError(t, os.WriteFile(other, []byte("b: 2\n"), 0o644))
				require.NoError(t, os.Chtimes(other, s.ModTime, s.ModTime))
				require.NoError(t, os.Rename(other, file))
			}},
		{name: "a modification time set back after a same-size write is caught when settled",
			readAt: later(time.Hour), checkAt: later(time.Hour), racy: false, wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) {
				require.NoError(t, os.WriteFile(file, []byte("b: 2\n"), 0o644))
				require.NoError(t, os.Chtimes(file, s.ModTime, s.ModTime))
			}},
		{name: "a write of another size is caught",
			readAt: later(time.Hour), checkAt: later(time.Hour), wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) {
				require.NoError(t, os.WriteFile(file, []byte("b: 22\n"), 0o644))
			}},
		{name: "a touch is caught",
			readAt: later(time.Hour), checkAt: later(time.Hour), wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) {
				now := time.Now()
				require.NoError(t, os.Chtimes(file, now, now))
			}},
		{name: "a removed file is caught",
			readAt: later(time.Hour), checkAt: later(time.Hour), wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) { require.NoError(t, os.Remove(file)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "storage.yaml")
			require.NoError(t, os.WriteFile(file, []byte("a: 1\n"), 0o644))
			s, err := readFile(file, c.readAt)
			require.NoError(t, err)
			require.Equal(t, "a: 1\n", string(s.Data))
			if c.edit != nil {
				c.edit(t, file, s)
			}
			same, settled := s.unchanged(file, c.racy, c.checkAt)
			require.Equal(t, c.wantSame, same)
			require.Equal(t, c.settled, settled)
		})
	}
}

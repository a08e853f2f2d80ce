package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStampUnchanged(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		name string
		// age is how old the file is when read; edit changes it after.
		age               time.Duration
		edit              func(t *testing.T, file string, s Stamp)
		racy              bool // compare contents
		wantSame, settled bool
	}{
		{name: "a file written long before its read is unchanged and settled", age: time.Hour, racy: false, wantSame: true, settled: true},
		{name: "a file written just before its read is unchanged but not yet settled", racy: true, wantSame: true, settled: false},
		{name: "a racy stamp settles once a read begins a window after the write", racy: true, wantSame: true, settled: true,
			edit: func(t *testing.T, file string, s Stamp) { require.NoError(t, os.Chtimes(file, old, old)) }},
		{name: "a same-size write keeping the time is caught while the stamp is racy", racy: true, wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) {
				require.NoError(t, os.WriteFile(file, []byte("b: 2\n"), 0o644))
				require.NoError(t, os.Chtimes(file, s.ModTime, s.ModTime))
			}},
		{name: "a write of another size is caught", age: time.Hour, wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) {
				require.NoError(t, os.WriteFile(file, []byte("b: 22\n"), 0o644))
			}},
		{name: "a touch is caught", age: time.Hour, wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) {
				now := time.Now()
				require.NoError(t, os.Chtimes(file, now, now))
			}},
		{name: "a removed file is caught", age: time.Hour, wantSame: false,
			edit: func(t *testing.T, file string, s Stamp) { require.NoError(t, os.Remove(file)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "storage.yaml")
			require.NoError(t, os.WriteFile(file, []byte("a: 1\n"), 0o644))
			if c.age > 0 {
				at := time.Now().Add(-c.age)
				require.NoError(t, os.Chtimes(file, at, at))
			}
			s, err := ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, "a: 1\n", string(s.Data))
			require.Equal(t, c.age == 0, s.Racy())
			if c.edit != nil {
				c.edit(t, file, s)
				if c.wantSame { // the edit only aged the file: the stamp follows
					fi, err := os.Stat(file)
					require.NoError(t, err)
					s.ModTime = fi.ModTime()
				}
			}
			same, settled := s.Unchanged(file, c.racy)
			require.Equal(t, c.wantSame, same)
			require.Equal(t, c.settled, settled)
		})
	}
}

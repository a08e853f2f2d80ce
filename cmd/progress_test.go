package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/storage/pool/move"
)

func TestProgressLine(t *testing.T) {
	mib := int64(1 << 20)
	states := []move.Progress{
		{Bytes: 0, Total: 4 * mib, FilesTotal: 2},
		{Bytes: 1 * mib, Total: 4 * mib, FilesTotal: 2},
		{Bytes: 2 * mib, Total: 4 * mib, Files: 1, FilesTotal: 2},
		{Bytes: 4 * mib, Total: 4 * mib, Files: 2, FilesTotal: 2},
	}
	// run feeds the states half a second apart to a line that prints at
	// most once a second.
	run := func(tty bool) string {
		var out strings.Builder
		clock := tableNow
		l := &progressLine{w: &out, prefix: "storage: pools move v-1: ", tty: tty, every: time.Second, now: func() time.Time { return clock }}
		for _, p := range states {
			l.update(p)
			clock = clock.Add(500 * time.Millisecond)
		}
		l.finish()
		return out.String()
	}
	t.Run("into a file, the first state, one a second and the last are lines of their own", func(t *testing.T) {
		require.Equal(t, "storage: pools move v-1: 0/2 files, 0 B/4 MiB (0%)\n"+
			"storage: pools move v-1: 1/2 files, 2 MiB/4 MiB (50%)\n"+
			"storage: pools move v-1: 2/2 files, 4 MiB/4 MiB (100%)\n", run(false))
	})
	t.Run("on a terminal, the line is rewritten in place and ended once", func(t *testing.T) {
		require.Equal(t, "\rstorage: pools move v-1: 0/2 files, 0 B/4 MiB (0%)"+
			"\rstorage: pools move v-1: 1/2 files, 2 MiB/4 MiB (50%)"+
			"\rstorage: pools move v-1: 2/2 files, 4 MiB/4 MiB (100%)\n", run(true))
	})
	t.Run("a resumed copy says how much an earlier run had copied", func(t *testing.T) {
		require.Equal(t, "3/3 files, 1.5 MiB/1.5 MiB (100%), resumed: 512 KiB were already copied",
			progressText(move.Progress{Bytes: 3 * mib / 2, Total: 3 * mib / 2, Files: 3, FilesTotal: 3, Resumed: mib / 2}))
	})
	t.Run("an empty object is complete", func(t *testing.T) {
		require.Equal(t, "0/0 files, 0 B/0 B (100%)", progressText(move.Progress{}))
	})
	t.Run("a shorter line on a terminal blanks what the longer one left", func(t *testing.T) {
		var out strings.Builder
		l := &progressLine{w: &out, tty: true, every: 0, now: time.Now}
		l.update(move.Progress{Bytes: 1, Total: 1, Files: 1, FilesTotal: 1, Resumed: 1})
		l.update(move.Progress{Bytes: 1, Total: 1, Files: 1, FilesTotal: 1})
		l.finish()
		first := "\r1/1 files, 1 B/1 B (100%), resumed: 1 B were already copied"
		second := "1/1 files, 1 B/1 B (100%)"
		require.Equal(t, first+"\r"+second+strings.Repeat(" ", len(first)-1-len(second))+"\n", out.String())
	})
}

package cmd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/eru-extend/resources/storage/pool/move"
)

// progressEvery is how often a move's progress line is printed at most
// (the last state is always printed).
const progressEvery = time.Second

// progressLine prints the copy progress of `storage pools move` on stderr,
// never on stdout, whose answer stays one JSON value. On a terminal the
// line is rewritten in place; elsewhere (--progress into a file or a pipe)
// each update is a line of its own.
type progressLine struct {
	w      io.Writer
	prefix string
	tty    bool
	every  time.Duration
	now    func() time.Time

	last    time.Time
	shown   bool
	pending *move.Progress
	width   int
}

// update records p and prints it unless a line went out less than every
// ago.
func (l *progressLine) update(p move.Progress) {
	if t := l.now(); !l.shown || t.Sub(l.last) >= l.every {
		l.last, l.shown, l.pending = t, true, nil
		l.print(p)
		return
	}
	l.pending = &p
}

// finish prints the last state an update held back and ends the line.
func (l *progressLine) finish() {
	if l.pending != nil {
		l.print(*l.pending)
		l.pending = nil
	}
	if l.tty && l.shown {
		fmt.Fprintln(l.w)
	}
}

func (l *progressLine) print(p move.Progress) {
	line := l.prefix + progressText(p)
	if !l.tty {
		fmt.Fprintln(l.w, line)
		return
	}
	pad := max(l.width-len(line), 0)
	l.width = len(line)
	fmt.Fprint(l.w, "\r"+line+strings.Repeat(" ", pad))
}

// progressText is one progress state: files and bytes done of the total,
// and what an earlier run had already copied.
func progressText(p move.Progress) string {
	pct := 100
	if p.Total > 0 {
		pct = int(p.Bytes * 100 / p.Total)
	}
	s := fmt.Sprintf("%d/%d files, %s/%s (%d%%)", p.Files, p.FilesTotal, humanBytes(p.Bytes), humanBytes(p.Total), pct)
	if p.Resumed > 0 {
		s += fmt.Sprintf(", resumed: %s were already copied", humanBytes(p.Resumed))
	}
	return s
}

package cmd

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the terminal side a program
// writes to, and the side that reads what it wrote.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { _ = ptm.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pts.Close() })
	return pts, ptm
}

func TestJSONIsIndentedOnATerminalAndOneLineElsewhere(t *testing.T) {
	raw := []byte(`{"cpu":4000,"memory":1000,"version":1}`)
	var buf bytes.Buffer
	require.NoError(t, writeJSONAnswer(&buf, raw))
	require.Equal(t, string(raw)+"\n", buf.String())

	term, reader := openPTY(t)
	require.True(t, isTerminal(term))
	require.NoError(t, writeJSONAnswer(term, raw))
	got := make([]byte, 4096)
	n, err := reader.Read(got)
	require.NoError(t, err)
	text := strings.ReplaceAll(string(got[:n]), "\r\n", "\n")
	require.True(t, strings.HasPrefix(text, "{\n  \"cpu\": 4000,\n  \"memory\": 1000,\n"), "%q", text)
}

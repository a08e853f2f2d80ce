package forward

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func TestTheWireCarriesRequestsAndAnswersWhole(t *testing.T) {
	for _, c := range []struct {
		name  string
		req   Request
		stdin []byte
	}{
		{"a read with no config and no stdin", Request{Binary: "storage", Args: []string{"name"}, Dir: "/w", Verb: "name"}, nil},
		{"a write with --config and a request", Request{Binary: "compute", Args: []string{"--config", "/etc/c y.yaml", "add-node"}, Config: "/etc/c y.yaml", Dir: "/", Verb: "add-node", Found: FoundFlag}, []byte(`{"nodename":"n1"}`)},
		{"fields holding separators other than NUL", Request{Binary: "storage", Args: []string{"--config=/a\n\tb", "get-metrics"}, Config: "/a\n\tb", Dir: "/d", Verb: "get-metrics"}, []byte("x\x00y")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, WriteRequest(&b, c.req, c.stdin))
			got, stdin, err := ReadRequest(&b)
			require.NoError(t, err)
			if len(c.req.Args) == 0 {
				c.req.Args = []string{}
			}
			require.Equal(t, c.req, got)
			require.Equal(t, string(c.stdin), string(stdin))
			require.Zero(t, b.Len(), "nothing left over")
		})
	}
	t.Run("a field holding a NUL is refused, not cut", func(t *testing.T) {
		var b bytes.Buffer
		require.Error(t, WriteRequest(&b, Request{Binary: "storage", Args: []string{"a\x00b"}}, nil))
		require.Zero(t, b.Len(), "nothing was written")
	})
	t.Run("a header of another wire version is refused", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, WriteFrame(&b, []byte(`{"binary":"storage","verb":"name"}`)))
		require.NoError(t, WriteFrame(&b, nil))
		_, _, err := ReadRequest(&b)
		require.ErrorContains(t, err, "not a request of "+wireVersion)
	})
	t.Run("an answer comes back with its status, code and streams", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, WriteAnswer(&b, []byte{Accepted}, 128, []byte("out"), []byte("err\n")))
		status, err := b.ReadByte()
		require.NoError(t, err)
		require.Equal(t, Accepted, status)
		code, out, errOut, err := ReadAnswer(&b)
		require.NoError(t, err)
		require.Equal(t, 128, code)
		require.Equal(t, "out", string(out))
		require.Equal(t, "err\n", string(errOut))
	})
	t.Run("frames of every size around the buffer's steps come back whole, and nothing past them is read", func(t *testing.T) {
		for _, n := range []int{0, 1, frameChunk - 1, frameChunk, frameChunk + 1, 3*frameChunk + 7, MaxRequest + 1} {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i)
			}
			var b bytes.Buffer
			require.NoError(t, WriteFrame(&b, data))
			b.WriteString("next")
			src := bytes.NewReader(b.Bytes())
			var r io.Reader = src
			if n < 1<<20 {
				r = iotest.HalfReader(src)
			}
			got, err := ReadFrame(r)
			require.NoError(t, err)
			require.Equal(t, data, got, "%d bytes", n)
			rest, err := io.ReadAll(src)
			require.NoError(t, err)
			require.Equal(t, "next", string(rest), "%d bytes: what follows the frame is left", n)
			if n > 0 {
				_, err = ReadFrame(bytes.NewReader(b.Bytes()[:4+n-1]))
				require.ErrorIs(t, err, io.ErrUnexpectedEOF, "%d bytes cut short", n)
			}
		}
	})
	t.Run("an answer cut short is an error", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, WriteAnswer(&b, nil, 0, []byte("0123456789"), nil))
		_, _, _, err := ReadAnswer(bytes.NewReader(b.Bytes()[:9]))
		require.Error(t, err)
	})
}

package types

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"short input is kept", "abc", "abc"},
		{"40 bytes are kept", strings.Repeat("a", 40), strings.Repeat("a", 40)},
		{"longer input is cut at 40 bytes", strings.Repeat("a", 41), strings.Repeat("a", 40) + "…"},
		{"a rune across the 40th byte is dropped whole", strings.Repeat("a", 39) + "é" + "z", strings.Repeat("a", 39) + "…"},
		{"invalid UTF-8 reads as question marks", "a\xffb", "a?b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Clip([]byte(c.in))
			require.Equal(t, c.want, got)
			require.True(t, utf8.ValidString(got))
		})
	}
}

func TestMulSat(t *testing.T) {
	require.Equal(t, int64(6), MulSat(2, 3))
	require.Equal(t, int64(1<<63-1), MulSat(1<<62, 4))
	require.Equal(t, int64(-1<<63), MulSat(-(1<<62), 4))
	require.Equal(t, int64(-1<<63), MulSat(1<<62, -4))
}

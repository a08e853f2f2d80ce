package types

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in     string
		signed bool
		want   int64
		err    string
	}{
		{in: "1073741824", want: 1 << 30},
		{in: "1G", want: 1 << 30},
		{in: "1TiB", want: 1 << 40},
		{in: "1.5G", want: 3 << 29},
		{in: "9007199254740992", want: 1 << 53},
		{in: "9007199254740993", err: `size "9007199254740993" is too large (at most 8 PiB)`},
		{in: "99999999999999999999", err: `size "99999999999999999999" is too large (at most 8 PiB)`},
		{in: "9P", err: `size "9P" is too large (at most 8 PiB)`},
		{in: "1.5", err: "not a whole number of bytes"},
		{in: "-1G", err: "negative"},
		{in: "-1G", signed: true, want: -(1 << 30)},
		{in: "-7", signed: true, want: -7},
		{in: "+5", want: 5},
		{in: "", err: "empty"},
		{in: "1Q", err: "not a number of bytes"},
		{in: "abc", err: "not a number of bytes"},
		{in: "1e3", err: "not a whole number of bytes"},
	}
	for _, c := range cases {
		t.Run(c.in+" reads as expected", func(t *testing.T) {
			got, err := ParseSize(c.in, c.signed)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestParseSizeAtMost(t *testing.T) {
	const most = 1 << 49 // 512 TiB
	for _, c := range []struct {
		name   string
		in     string
		signed bool
		most   int64
		want   int64
		err    string
	}{
		{name: "the limit itself is read, with a unit", in: "512T", most: most, want: most},
		{name: "the limit itself is read, in bytes", in: "562949953421312", most: most, want: most},
		{name: "a signed size down to minus the limit is read", in: "-512T", signed: true, most: most, want: -most},
		{name: "one byte past the limit is refused naming it", in: "562949953421313", most: most, err: `size "562949953421313" is too large (at most 512 TiB)`},
		{name: "a human size past the limit is refused naming it", in: "8P", most: most, err: `size "8P" is too large (at most 512 TiB)`},
		{name: "a size past 8 PiB names the same limit", in: "9P", most: most, err: `size "9P" is too large (at most 512 TiB)`},
		{name: "a signed size past the limit names it too", in: "-513T", signed: true, most: most, err: `size "-513T" is too large (at most 512 TiB)`},
		{name: "a limit that is no whole number of KiB is named in bytes", in: "2K", most: 1536, err: `size "2K" is too large (at most 1536 B)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSizeAtMost(c.in, c.signed, c.most)
			if c.err != "" {
				require.EqualError(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

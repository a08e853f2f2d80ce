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
		{in: "9007199254740993", err: "too large"},
		{in: "99999999999999999999", err: "too large"},
		{in: "9P", err: "too large"},
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

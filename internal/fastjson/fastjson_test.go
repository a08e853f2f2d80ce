package fastjson_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/fastjson"
)

func TestIntReadsWhatEncodingJSONReadsIntoAnInt64(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"0", true}, {"-0", true}, {"42", true}, {"-42", true},
		{"9223372036854775807", true}, {"-9223372036854775808", true},
		{"9223372036854775808", false}, {"-9223372036854775809", false}, {"99999999999999999999", false},
		{"01", false}, {"1.0", false}, {"1e3", false}, {"-", false}, {"", false}, {"+1", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d := fastjson.New([]byte(tc.in))
			got, ok := d.Int()
			ok = ok && d.Done()
			require.Equal(t, tc.ok, ok)
			var want int64
			err := json.Unmarshal([]byte(tc.in), &want)
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
		})
	}
}

func TestStringsWithEscapesOrInvalidUTF8AreRefused(t *testing.T) {
	for _, in := range []string{`"a\"b"`, `"a\u0041"`, "\"a\tb\"", "\"\xff\"", `"open`} {
		_, ok := fastjson.New([]byte(in)).Str()
		require.False(t, ok, in)
	}
	s, ok := fastjson.New([]byte(`"/däta"`)).Str()
	require.True(t, ok)
	require.Equal(t, "/däta", s)
}

func TestCompositeReadsOnlyAnObjectOrAnArray(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{"an object is read to its end", `{"a":"}]"} ,`, `{"a":"}]"}`, true},
		{"an array with white space inside is read as it is", `[ 1 , {"b" : []} ]}`, `[ 1 , {"b" : []} ]`, true},
		{"a string followed by a space is refused", `"x" }`, "", false},
		{"a string followed by a new line is refused", "\"x\"\n,", "", false},
		{"a number is refused", `1}`, "", false},
		{"white space before the value is refused", ` {}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := fastjson.New([]byte(tc.in)).Composite()
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.want, string(v))
			}
		})
	}
}

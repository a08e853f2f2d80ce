package overcommit

import (
	"encoding/json"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestParseMillis(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     string
		signed bool
		want   int64
		err    string
	}{
		{name: "a whole number of CPUs is a thousand millicores each", in: "16", want: 16000},
		{name: "0.57 is exactly 570 millicores", in: "0.57", want: 570},
		{name: "a tenth of a CPU is 100 millicores", in: "0.1", want: 100},
		{name: "three decimals are the finest grain", in: "1.234", want: 1234},
		{name: "one millicore is the smallest non-zero figure", in: "0.001", want: 1},
		{name: "zeros past the third decimal are harmless", in: "1.5000", want: 1500},
		{name: "a leading dot is a fraction", in: ".5", want: 500},
		{name: "a trailing dot is a whole number", in: "2.", want: 2000},
		{name: "surrounding spaces are ignored", in: " 3 ", want: 3000},
		{name: "zero is zero", in: "0", want: 0},
		{name: "zero with four decimals is still zero", in: "0.0000", want: 0},
		{name: "a plus sign is accepted", in: "+1", want: 1000},
		{name: "the largest host figure is accepted", in: "562949953421.312", want: MaxHost},
		{name: "a signed delta may be negative", in: "-1.5", signed: true, want: -1500},
		{name: "a negative value is refused unless signed", in: "-1", err: `cpu "-1" is negative`},
		{name: "a fourth decimal is refused", in: "1.2345", err: `cpu "1.2345" is finer than one millicore (at most three decimals)`},
		{name: "a non-zero value below one millicore is refused", in: "0.0001", err: `cpu "0.0001" is finer than one millicore`},
		{name: "scientific notation is refused", in: "1e3", err: `cpu "1e3" is not a decimal number of CPUs like 2 or 0.5`},
		{name: "letters are refused", in: "abc", err: `cpu "abc" is not a decimal number of CPUs`},
		{name: "signed does not admit scientific notation either", in: "-1e3", signed: true, err: `cpu "-1e3" is not a decimal number`},
		{name: "an empty string is refused", in: "", err: `cpu "" is not a decimal number`},
		{name: "a lone dot is refused", in: ".", err: `cpu "." is not a decimal number`},
		{name: "two dots are refused", in: "1.2.3", err: `cpu "1.2.3" is not a decimal number`},
		{name: "a double minus is refused even when signed", in: "--1", signed: true, err: `cpu "--1" is not a decimal number`},
		{name: "a figure just past the largest host is refused", in: "562949953421.313", err: `cpu "562949953421.313" is too large (at most 562949953421.312 CPUs)`},
		{name: "a whole part of fourteen digits is refused", in: "99999999999999", err: `cpu "99999999999999" is too large (at most 562949953421.312 CPUs)`},
		{name: "a figure past the largest host names the limit", in: "9007199254740", err: `cpu "9007199254740" is too large (at most 562949953421.312 CPUs)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseMillis(c.in, c.signed)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestParseMillisIsExact(t *testing.T) {
	t.Run("ten tenths of a CPU add up to exactly 1000 millicores", func(t *testing.T) {
		var sum int64
		var float float64
		for range 10 {
			m, err := ParseMillis("0.1", false)
			require.NoError(t, err)
			sum += m
			float += 0.1
		}
		require.Equal(t, int64(1000), sum)
		require.NotEqual(t, 1.0, float, "float arithmetic would have drifted; the parse must not use it")
	})
	t.Run("a JSON number is read from its text, not through float64", func(t *testing.T) {
		for in, want := range map[string]int64{`0.1`: 100, `0.57`: 570, `1.5`: 1500, `"2.25"`: 2250, `16`: 16000} {
			got, err := parseMillisJSON(json.RawMessage(in), false)
			require.NoError(t, err, in)
			require.Equal(t, want, got, in)
		}
	})
	t.Run("a JSON number in exponent form is refused", func(t *testing.T) {
		_, err := parseMillisJSON(json.RawMessage(`1e3`), false)
		require.ErrorContains(t, err, `cpu "1e3" is not a decimal number`)
	})
	t.Run("a JSON value that is neither number nor string is refused", func(t *testing.T) {
		_, err := parseMillisJSON(json.RawMessage(`true`), false)
		require.ErrorContains(t, err, "cpu true is neither a number nor a string")
	})
}

func TestParseRatio(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want int64
		err  string
	}{
		{name: "1 thousandth is the smallest ratio", in: "1", want: 1},
		{name: "1000 is one to one", in: "1000", want: 1000},
		{name: "16000 is the largest ratio", in: "16000", want: 16000},
		{name: "surrounding spaces are ignored", in: " 4500 ", want: 4500},
		{name: "zero is refused", in: "0", err: "cpu ratio 0 is out of range: want 1 to 16000 thousandths"},
		{name: "16001 is refused", in: "16001", err: "cpu ratio 16001 is out of range: want 1 to 16000 thousandths"},
		{name: "a negative ratio is refused", in: "-5", err: "cpu ratio -5 is out of range"},
		{name: "a decimal ratio is refused", in: "1.5", err: `cpu ratio "1.5" is not an integer (thousandths: 1000 is 1x)`},
		{name: "letters are refused", in: "abc", err: `cpu ratio "abc" is not an integer`},
		{name: "an empty ratio is refused", in: "", err: `cpu ratio "" is not an integer`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRatio("cpu", c.in)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestCheckRatio(t *testing.T) {
	for _, c := range []struct {
		name string
		in   int64
		ok   bool
	}{
		{"the lower bound passes", MinRatio, true},
		{"the upper bound passes", MaxRatio, true},
		{"zero fails", 0, false},
		{"one past the upper bound fails", MaxRatio + 1, false},
		{"a negative ratio fails", -1000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRatio("memory", c.in)
			if c.ok {
				require.NoError(t, err)
				return
			}
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			require.ErrorContains(t, err, "memory ratio")
		})
	}
}

// bigSchedulable is host × ratio / 1000 in arbitrary precision.
func bigSchedulable(host, ratio int64) *big.Int {
	p := new(big.Int).Mul(big.NewInt(host), big.NewInt(ratio))
	return p.Quo(p, big.NewInt(1000))
}

func TestSchedulable(t *testing.T) {
	for _, c := range []struct {
		name        string
		host, ratio int64
		want        int64
	}{
		{"16 cores at 4x are 64 vCPUs", 16000, 4000, 64000},
		{"16 cores at 2x are 32 vCPUs", 16000, 2000, 32000},
		{"one to one leaves the host as it is", 68719476736, 1000, 68719476736},
		{"a fraction of a unit is rounded down", 1999, 1500, 2998},
		{"a product below 1000 rounds down to zero", 999, 1, 0},
		{"no host is nothing schedulable", 0, 4000, 0},
		{"a negative host is nothing schedulable", -5, 1000, 0},
		{"the largest host at the largest ratio is exactly 2^53", MaxHost, MaxRatio, types.MaxExact},
		{"a product past int64 whose quotient fits is exact", math.MaxInt64 / 2, 1500, bigSchedulable(math.MaxInt64/2, 1500).Int64()},
		{"the largest int64 at 1x is itself", math.MaxInt64, 1000, math.MaxInt64},
		{"a quotient past int64 saturates instead of panicking", math.MaxInt64, MaxRatio, math.MaxInt64},
		{"a quotient just past int64 saturates", math.MaxInt64, 1001, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, schedulable(c.host, c.ratio))
		})
	}
	t.Run("agrees with arbitrary precision wherever the quotient fits", func(t *testing.T) {
		for _, host := range []int64{1, 7, 999, 1001, 16000, 123456789, MaxHost, 1 << 60, math.MaxInt64 / 3} {
			for _, ratio := range []int64{1, 3, 999, 1000, 1001, 4500, 15999, 16000} {
				want := bigSchedulable(host, ratio)
				if !want.IsInt64() {
					continue
				}
				require.Equal(t, want.Int64(), schedulable(host, ratio), "%d x %d", host, ratio)
			}
		}
	})
}

func TestDecodeDefaults(t *testing.T) {
	t.Run("absent defaults are one to one at version 0", func(t *testing.T) {
		d, err := DecodeDefaults(nil, false)
		require.NoError(t, err)
		require.Equal(t, Defaults{CPU: 1000, Memory: 1000, Version: 0}, d)
	})
	t.Run("stored defaults are read as stored", func(t *testing.T) {
		d, err := DecodeDefaults([]byte(`{"cpu":4000,"memory":1500,"version":3}`), true)
		require.NoError(t, err)
		require.Equal(t, Defaults{CPU: 4000, Memory: 1500, Version: 3}, d)
	})
	t.Run("corrupt defaults are an internal error", func(t *testing.T) {
		_, err := DecodeDefaults([]byte(`{"cpu":`), true)
		require.Equal(t, types.Internal, types.ClassOf(err))
		require.ErrorContains(t, err, "stored overcommit defaults are corrupt")
	})
	t.Run("a verb's environment carries the defaults", func(t *testing.T) {
		env := types.Env{Shared: map[string][]byte{DefaultsKey: []byte(`{"cpu":2500,"memory":800,"version":7}`)}}
		require.Equal(t, Defaults{CPU: 2500, Memory: 800, Version: 7}, defaultsOf(env))
		require.Equal(t, Defaults{CPU: 1000, Memory: 1000}, defaultsOf(types.Env{}))
	})
}

func TestEffectiveRatio(t *testing.T) {
	four := int64(4000)
	n := &Node{Override: Override{CPU: &four}}
	cpu, mem := n.Ratios(Defaults{CPU: 2000, Memory: 1500})
	require.Equal(t, Effective{Ratio: 4000, Source: SourceNode}, cpu, "the node's override wins")
	require.Equal(t, Effective{Ratio: 1500, Source: SourceDefault}, mem, "without an override the default applies")
}

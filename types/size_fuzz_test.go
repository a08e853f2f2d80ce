package types

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// refSize is an exact reading of the human sizes ParseSize takes (go-units'
// RAMInBytes grammar: a decimal, an optional space, an optional binary unit
// letter and optional "i" and "b"), as a rational number of bytes.
var refSizeRE = regexp.MustCompile(`^(\d+(?:\.\d+)?) ?([kKmMgGtTpP])?[iI]?[bB]?$`)

func refSize(text string) (*big.Rat, bool) {
	m := refSizeRE.FindStringSubmatch(text)
	if m == nil {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return nil, false
	}
	shift := uint(0)
	if m[2] != "" {
		shift = uint(10 * (strings.Index("kmgtp", strings.ToLower(m[2])) + 1))
	}
	return r.Mul(r, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), shift))), true
}

// FuzzParseSize: a size is read or refused in one line naming the limit; a
// size read is within the limit, keeps its sign, agrees with an exact
// reading to float64's precision, and its decimal form reads back the same.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{
		"1073741824", "1G", "1TiB", "1.5G", "9007199254740992", "9007199254740993", "99999999999999999999",
		"9P", "1.5", "-1G", "-7", "+5", "", "1Q", "abc", "1e3", "512T", "562949953421312", "-512T", "2K",
		" 1 G", "1 gib", "0.0000001k", "8P", "-", "+", "--1", "+-1", "1.2.3k", "\xff", "1\n", "1kk", "-0",
		"18446744073709551616", "9223372036854775808", "1.99999999999999999999P",
	} {
		f.Add(s, false, int64(MaxExact))
		f.Add(s, true, int64(1<<49))
	}
	f.Fuzz(func(t *testing.T, s string, signed bool, most int64) {
		if most <= 0 {
			most = MaxExact
		}
		n, err := ParseSizeAtMost(s, signed, most)
		if err != nil {
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "size ") {
				t.Fatalf("refusal of %q is not one line naming the size: %q", s, msg)
			}
			if strings.Contains(msg, "too large") && !strings.Contains(msg, "(at most "+SizeLimit(most)+")") {
				t.Fatalf("refusal of %q does not name the limit %s: %q", s, SizeLimit(most), msg)
			}
			return
		}
		if n > most || n < -most {
			t.Fatalf("%q read as %d, past the limit %d", s, n, most)
		}
		text := strings.TrimSpace(s)
		if n < 0 && (!signed || !strings.HasPrefix(text, "-")) {
			t.Fatalf("%q read as negative %d", s, n)
		}
		if n > 0 && strings.HasPrefix(text, "-") {
			t.Fatalf("%q read as positive %d", s, n)
		}
		back, err := ParseSizeAtMost(strconv.FormatInt(n, 10), signed, most)
		if err != nil || back != n {
			t.Fatalf("%q read as %d, which reads back as %d, %v", s, n, back, err)
		}
		text = strings.TrimLeft(text, "+-")
		if ref, ok := refSize(text); ok {
			abs := n
			if abs < 0 {
				abs = -abs
			}
			diff := new(big.Rat).Sub(ref, new(big.Rat).SetInt64(abs))
			tol := new(big.Rat).Quo(ref, new(big.Rat).SetInt64(1<<50))
			if tol.Cmp(big.NewRat(1, 1)) < 0 {
				tol = big.NewRat(1, 1)
			}
			if new(big.Rat).Abs(diff).Cmp(tol) > 0 {
				t.Fatalf("%q read as %d, exactly it is %s", s, n, ref.FloatString(3))
			}
		}
	})
}

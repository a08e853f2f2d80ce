package pool

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The patterns the id checkers' errors name; the checkers are written by
// hand (see parse.go) and must accept exactly what these match.
var (
	idPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	objectPattern = regexp.MustCompile(`^v-[0-9a-f]{16}$`)
)

var idSamples = []string{
	"", "a", "0", "ceph-a", "a.b_c-d", "-a", ".a", "_a", "A", "aB", "a b", "a/b", "a:b", "é", "a\x00",
	strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 62), "a" + strings.Repeat("-", 63),
	"v-0123456789abcdef", "v-0123456789ABCDEF", "v-0123456789abcde", "v-0123456789abcdef0", "V-0123456789abcdef",
	"v-0123456789abcdeg", "v_0123456789abcdef", "v-", "v-0123456789abcdef\n", "\nv-0123456789abcdef",
}

func TestIDCheckersMatchTheirPatterns(t *testing.T) {
	for _, id := range idSamples {
		t.Run("pool id "+strings.ToValidUTF8(id, "?")+" is judged as the pattern judges it", func(t *testing.T) {
			require.Equal(t, idPattern.MatchString(id), ValidID(id) == nil, "%q", id)
		})
		t.Run("object id "+strings.ToValidUTF8(id, "?")+" is judged as the pattern judges it", func(t *testing.T) {
			require.Equal(t, objectPattern.MatchString(id), ValidObjectID(id) == nil, "%q", id)
		})
	}
	t.Run("both kinds of sample are present", func(t *testing.T) {
		var ids, objects int
		for _, id := range idSamples {
			if idPattern.MatchString(id) {
				ids++
			}
			if objectPattern.MatchString(id) {
				objects++
			}
		}
		require.Greater(t, ids, 3)
		require.Equal(t, 1, objects)
	})
}

// FuzzIDCheckers: the hand-written checkers accept exactly what their
// patterns match.
func FuzzIDCheckers(f *testing.F) {
	for _, id := range idSamples {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := ValidID(id) == nil, idPattern.MatchString(id); got != want {
			t.Fatalf("pool id %q: accepted %v, pattern matches %v", id, got, want)
		}
		if got, want := ValidObjectID(id) == nil, objectPattern.MatchString(id); got != want {
			t.Fatalf("object id %q: accepted %v, pattern matches %v", id, got, want)
		}
	})
}

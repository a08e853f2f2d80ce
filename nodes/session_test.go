package nodes_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/types"
)

func TestSessionTTL(t *testing.T) {
	overflowing, err := time.ParseDuration("2562047h47m16s")
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		ttl  time.Duration
		want time.Duration // 0: refused
	}{
		{"a whole number of seconds is kept", 30 * time.Second, 30 * time.Second},
		{"a fraction of a second is rounded up", 1500 * time.Millisecond, 2 * time.Second},
		{"ten minutes is the most", nodes.MaxSessionTTL, nodes.MaxSessionTTL},
		{"a nanosecond more than ten minutes is refused", nodes.MaxSessionTTL + 1, 0},
		{"a ttl whose rounding would overflow is refused", overflowing, 0},
		{"zero is refused", 0, 0},
		{"a negative ttl is refused", -time.Second, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := nodes.SessionTTL(c.ttl)
			if c.want == 0 {
				require.Error(t, err)
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

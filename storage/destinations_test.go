package storage

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/types"
)

func TestOneMountPerDestination(t *testing.T) {
	poolBinding := func(t *testing.T, s string) *pool.Binding {
		t.Helper()
		b, err := pool.ParseBinding(s, true)
		require.NoError(t, err)
		return b
	}
	cases := []struct {
		name    string
		volumes []string
		pools   []string
		want    string // "" when accepted
	}{
		{"bindings at different destinations are accepted", []string{"AUTO:/x:rw:1", "AUTO:/x/y:rw:1", "/data0:/z"}, []string{"POOL:/p:rw:1"}, ""},
		{"the same binding listed again, as a stored upstream record may hold it, is one mount", []string{"AUTO:/x:rw:1", "AUTO:/x:rw:2"}, nil, ""},
		{"two AUTO bindings of other flags at one destination are refused", []string{"AUTO:/x:rw:1", "AUTO:/x:ro:1"}, nil,
			"destination /x is mounted twice, by AUTO:/x:rw:1:0:0:0:0 and AUTO:/x:or:1:0:0:0:0: a container takes one mount per destination"},
		{"an AUTO binding and a host path at one destination are refused", []string{"AUTO:/x:rw:1", "/data0:/x"}, nil, "destination /x is mounted twice"},
		{"two spellings of one destination are one destination", []string{"AUTO:/x:rw:1", "AUTO:/x/:rw:1"}, nil, "destination /x is mounted twice"},
		{"a volume and a pool volume at one destination are refused", []string{"AUTO:/x:rw:1"}, []string{"POOL:/x:rw:1"},
			"destination /x is mounted twice, by AUTO:/x:rw:1:0:0:0:0 and POOL:/x:rw:1:0:0:0:0"},
		{"two pool volumes at one destination are refused, even written alike", nil, []string{"POOL:/x:rw:1", "POOL:/x:rw:1"}, "destination /x is mounted twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var pools []*pool.Binding
			for _, s := range c.pools {
				pools = append(pools, poolBinding(t, s))
			}
			err := oneMountPerDestination(mustBindings(t, c.volumes...), pools)
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			requireClass(t, err, types.InvalidArgument)
			require.ErrorContains(t, err, c.want)
		})
	}
}

func TestReallocKeepsOneMountPerDestination(t *testing.T) {
	ctx := t.Context()
	cases := []struct {
		name, request string
		want          string // "" when accepted
	}{
		{"growing the binding held is accepted", `{"volumes":["AUTO:/a:rw:100"]}`, ""},
		{"swapping the binding held for one of other flags is accepted", `{"volumes":["AUTO:/a:rw:-300","AUTO:/a:ro:300"]}`, ""},
		{"a binding of other flags beside the one held is refused", `{"volumes":["AUTO:/a:ro:0"]}`, "destination /a is mounted twice"},
		{"a host path at the destination of a binding held is refused", `{"volumes":["/data0:/q:rw"]}`, "destination /q is mounted twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := reallocNode(t).Realloc(ctx, mustWorkload(t, normalWorkload), mustRequest(t, c.request, true))
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			requireClass(t, err, types.InvalidArgument)
			require.ErrorContains(t, err, c.want)
		})
	}
}

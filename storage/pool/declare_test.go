package pool

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestApplyDeclarations(t *testing.T) {
	two := Declarations{Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}, "nfs1": {"/mnt/nfs1"}}, DefaultPool: "ceph-a"}
	str := func(s string) *string { return &s }
	cases := []struct {
		name    string
		cur     Declarations
		req     DeclarationRequest
		objs    Objects
		want    Declarations
		added   []string
		removed []string
		class   types.Class
		err     string
	}{
		{name: "the first declaration adds the pool and names it added",
			req:  DeclarationRequest{Absolute: true, Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}}},
			want: Declarations{Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}}}, added: []string{"ceph-a"}},
		{name: "an absolute request replaces the pools and keeps the default when still declared",
			cur: two, req: DeclarationRequest{Absolute: true, Pools: map[string]Declaration{"ceph-a": {"/mnt/c"}, "x": {"/x"}}},
			want:  Declarations{Pools: map[string]Declaration{"ceph-a": {"/mnt/c"}, "x": {"/x"}}, DefaultPool: "ceph-a"},
			added: []string{"x"}, removed: []string{"nfs1"}},
		{name: "an absolute request dropping the default clears it",
			cur: two, req: DeclarationRequest{Absolute: true, Pools: map[string]Declaration{"nfs1": {"/mnt/nfs1"}}},
			want: Declarations{Pools: map[string]Declaration{"nfs1": {"/mnt/nfs1"}}}, removed: []string{"ceph-a"}},
		{name: "a delta request adds to the pools",
			cur: two, req: DeclarationRequest{Pools: map[string]Declaration{"x": {"/x"}}},
			want:  Declarations{Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}, "nfs1": {"/mnt/nfs1"}, "x": {"/x"}}, DefaultPool: "ceph-a"},
			added: []string{"x"}},
		{name: "a delta request declaring a known pool again at the same path changes nothing",
			cur: two, req: DeclarationRequest{Pools: map[string]Declaration{"nfs1": {"/mnt/nfs1"}}}, want: two},
		{name: "a delta request moving a known pool's path is refused",
			cur: two, req: DeclarationRequest{Pools: map[string]Declaration{"nfs1": {"/elsewhere"}}},
			class: types.InvalidArgument, err: "already declared at /mnt/nfs1"},
		{name: "rm-pools removes in absolute mode",
			cur: two, req: DeclarationRequest{Absolute: true, RmPools: []string{"nfs1"}},
			want: Declarations{Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}}, DefaultPool: "ceph-a"}, removed: []string{"nfs1"}},
		{name: "rm-pools in delta mode is refused",
			cur: two, req: DeclarationRequest{RmPools: []string{"nfs1"}}, class: types.InvalidArgument, err: "only in absolute mode"},
		{name: "rm-pools of an undeclared pool is refused",
			cur: two, req: DeclarationRequest{Absolute: true, RmPools: []string{"zz"}}, class: types.InvalidArgument, err: "not declared on this node"},
		{name: "a pool both declared and removed is refused",
			cur: two, req: DeclarationRequest{Absolute: true, Pools: map[string]Declaration{"nfs1": {"/n"}}, RmPools: []string{"nfs1"}},
			class: types.InvalidArgument, err: "both declared and removed"},
		{name: "dropping a pool the node holds objects in is refused naming the pool and the count",
			cur: two, req: DeclarationRequest{Absolute: true, RmPools: []string{"nfs1"}}, objs: Objects{"v-0000000000000001": {Pool: "nfs1"}, "v-0000000000000002": {Pool: "nfs1"}},
			class: types.FailedPrecondition, err: "pool nfs1 still has 2 objects on this node"},
		{name: "replacing the pools without one that holds objects is refused",
			cur: two, req: DeclarationRequest{Absolute: true, Pools: map[string]Declaration{}}, objs: Objects{"v-0000000000000001": {Pool: "ceph-a"}},
			class: types.FailedPrecondition, err: "pool ceph-a still has 1 objects"},
		{name: "an empty absolute list drops every pool without objects",
			cur: two, req: DeclarationRequest{Absolute: true, Pools: map[string]Declaration{}}, objs: Objects{"v-0000000000000001": {Pool: "zz"}},
			want: Declarations{}, removed: []string{"ceph-a", "nfs1"}},
		{name: "a default naming a declared pool is set",
			cur: two, req: DeclarationRequest{DefaultPool: str("nfs1")},
			want: Declarations{Pools: two.Pools, DefaultPool: "nfs1"}},
		{name: "a default naming an undeclared pool is refused",
			cur: two, req: DeclarationRequest{DefaultPool: str("zz")}, class: types.InvalidArgument, err: "not one of the declared pools"},
		{name: "dropping a pool an object is moving into is refused naming the object and the move",
			cur: two, req: DeclarationRequest{Absolute: true, RmPools: []string{"nfs1"}},
			objs:  Objects{"v-0000000000000001": {Pool: "ceph-a", MovingTo: "nfs1", MoveCommandID: "m1"}},
			class: types.FailedPrecondition, err: "object v-0000000000000001 is moving from pool ceph-a into pool nfs1; finish or abort that move (storage pools move v-0000000000000001 --to nfs1 --command-id m1 [--abort])"},
		{name: "replacing the pools without one an object is moving into is refused",
			cur: two, req: DeclarationRequest{Absolute: true, Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}}},
			objs:  Objects{"v-0000000000000001": {Pool: "ceph-a", MovingTo: "nfs1", MoveCommandID: "m1"}},
			class: types.FailedPrecondition, err: "moving from pool ceph-a into pool nfs1"},
		{name: "two pools at one path are refused naming both and the path",
			req:   DeclarationRequest{Absolute: true, Pools: map[string]Declaration{"pa": {"/mnt/shared"}, "pb": {"/mnt/shared"}}},
			class: types.InvalidArgument, err: "pools pa and pb are both declared at /mnt/shared"},
		{name: "a delta request adding a pool at a known pool's path is refused",
			cur: two, req: DeclarationRequest{Pools: map[string]Declaration{"x": {"/mnt/nfs1"}}},
			class: types.InvalidArgument, err: "pools nfs1 and x are both declared at /mnt/nfs1"},
		{name: "a pool inside another pool's path is refused naming both paths",
			cur: two, req: DeclarationRequest{Pools: map[string]Declaration{"x": {"/mnt/ceph-a/x"}}},
			class: types.InvalidArgument, err: "pool x's path /mnt/ceph-a/x is inside pool ceph-a's path /mnt/ceph-a"},
		{name: "a path sharing only a name prefix with another is apart",
			cur: two, req: DeclarationRequest{Pools: map[string]Declaration{"x": {"/mnt/ceph-ab"}}},
			want:  Declarations{Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}, "nfs1": {"/mnt/nfs1"}, "x": {"/mnt/ceph-ab"}}, DefaultPool: "ceph-a"},
			added: []string{"x"}},
		{name: "a path that is not clean is refused",
			req:   DeclarationRequest{Absolute: true, Pools: map[string]Declaration{"a": {"/a/"}}},
			class: types.InvalidArgument, err: "not clean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cur.Clone()
			got, err := ApplyDeclarations(tc.cur, tc.req, tc.objs)
			require.Equal(t, before, tc.cur, "the current declarations are not changed in place")
			if tc.err != "" {
				require.Equal(t, tc.class, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Declarations)
			require.Equal(t, tc.added, got.Added)
			require.Equal(t, tc.removed, got.Removed)
		})
	}
}

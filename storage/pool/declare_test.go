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
		held    map[string]int
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
			cur: two, req: DeclarationRequest{Absolute: true, RmPools: []string{"nfs1"}}, held: map[string]int{"nfs1": 2},
			class: types.FailedPrecondition, err: "pool nfs1 still has 2 objects on this node"},
		{name: "replacing the pools without one that holds objects is refused",
			cur: two, req: DeclarationRequest{Absolute: true, Pools: map[string]Declaration{}}, held: map[string]int{"ceph-a": 1},
			class: types.FailedPrecondition, err: "pool ceph-a still has 1 objects"},
		{name: "an empty absolute list drops every pool without objects",
			cur: two, req: DeclarationRequest{Absolute: true, Pools: map[string]Declaration{}}, held: map[string]int{"zz": 3},
			want: Declarations{}, removed: []string{"ceph-a", "nfs1"}},
		{name: "a default naming a declared pool is set",
			cur: two, req: DeclarationRequest{DefaultPool: str("nfs1")},
			want: Declarations{Pools: two.Pools, DefaultPool: "nfs1"}},
		{name: "a default naming an undeclared pool is refused",
			cur: two, req: DeclarationRequest{DefaultPool: str("zz")}, class: types.InvalidArgument, err: "not one of the declared pools"},
		{name: "a path that is not clean is refused",
			req:   DeclarationRequest{Absolute: true, Pools: map[string]Declaration{"a": {"/a/"}}},
			class: types.InvalidArgument, err: "not clean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cur.Clone()
			got, err := ApplyDeclarations(tc.cur, tc.req, tc.held)
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

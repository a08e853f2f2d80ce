package pool

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestPlans(t *testing.T) {
	const b1 = "POOL@ceph-a:/data:rw:107374182400:0:0:0:0"
	const b2 = "POOL:/logs:rw:1073741824:0:0:0:0"
	cases := []struct {
		name   string
		raw    string
		signed bool
		want   Plans
		err    string
	}{
		{"a workload's plans are read", `{"` + b1 + `":{"pool":"ceph-a","object":"v-0000000000000001","bytes":107374182400}}`, false,
			Plans{b1: {Pool: "ceph-a", Object: "v-0000000000000001", Bytes: 107374182400}}, ""},
		{"absent plans are none", ``, false, Plans{}, ""},
		{"a delta may carry negative bytes", `{"` + b2 + `":{"pool":"ceph-a","object":"v-0000000000000001","bytes":-5}}`, true,
			Plans{b2: {Pool: "ceph-a", Object: "v-0000000000000001", Bytes: -5}}, ""},
		{"negative bytes outside a delta are refused", `{"` + b2 + `":{"pool":"ceph-a","object":"v-0000000000000001","bytes":-5}}`, false, nil, "out of range"},
		{"an unknown field is refused", `{"` + b2 + `":{"pool":"ceph-a","object":"v-0000000000000001","bytes":5,"x":1}}`, false, nil, "unknown field"},
		{"a key that is not a pool binding is refused", `{"AUTO:/d:rw:1":{"pool":"ceph-a","object":"v-0000000000000001","bytes":5}}`, false, nil, "not POOL"},
		{"a bad object id is refused", `{"` + b2 + `":{"pool":"ceph-a","object":"x","bytes":5}}`, false, nil, "object id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodePlans(json.RawMessage(tc.raw), tc.signed)
			if tc.err != "" {
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	t.Run("plans of several workloads sum per object", func(t *testing.T) {
		got, err := SumPlans(
			Plans{b1: {Pool: "ceph-a", Object: "v-0000000000000001", Bytes: 10}, b2: {Pool: "nfs1", Object: "v-0000000000000002", Bytes: 3}},
			Plans{b1: {Pool: "ceph-a", Object: "v-0000000000000003", Bytes: 7}},
			nil,
		)
		require.NoError(t, err)
		require.Equal(t, map[string]Amount{"v-0000000000000001": {"ceph-a", 10}, "v-0000000000000002": {"nfs1", 3}, "v-0000000000000003": {"ceph-a", 7}}, got)
	})
	t.Run("an object planned in two pools is refused", func(t *testing.T) {
		_, err := SumPlans(Plans{b1: {Pool: "ceph-a", Object: "v-0000000000000001", Bytes: 10}}, Plans{b2: {Pool: "nfs1", Object: "v-0000000000000001", Bytes: 3}})
		require.ErrorContains(t, err, "planned in pools ceph-a and nfs1")
	})
}

func TestRoomFor(t *testing.T) {
	rec := &Record{ID: "ceph-a", Capacity: ptr(300 * gib), Reserved: 100 * gib, DeclaredAt: t0}
	cases := []struct {
		name  string
		count int
		bytes int64
		class types.Class
		err   string
	}{
		{"two 100 GiB objects fit in 200 GiB free", 2, 100 * gib, "", ""},
		{"three 100 GiB objects are refused naming the pool and the sizes", 3, 100 * gib, types.ResourceExhausted,
			"pool ceph-a has 200 GiB free, 300 GiB asked (214748364800 bytes free, 322122547200 asked)"},
		{"a count whose product overflows is refused", math.MaxInt32, math.MaxInt64 / 2, types.ResourceExhausted, "do not fit"},
		{"a count of 0 is refused", 0, gib, types.InvalidArgument, "0 objects"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := RoomFor(rec, tc.count, tc.bytes)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.class, types.ClassOf(err))
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestListObjects(t *testing.T) {
	pools := map[string]*Record{"ceph-a": {ID: "ceph-a", DeclaredAt: t0}, "old": {ID: "old", DeclaredAt: t0, LostAt: &t0}}
	nodes := map[string]Objects{
		"n1": {oid(2): {Pool: "ceph-a", Bytes: 5, Held: true}, oid(3): {Pool: "ceph-a", Bytes: 6, Held: true, MovingTo: "nfs1", MoveCommandID: "m"}},
		"n2": {oid(1): {Pool: "old", Bytes: 7}},
	}
	t.Run("a pool lists its objects by id, a moving one under its target", func(t *testing.T) {
		require.Equal(t, []ObjectView{{ID: oid(2), Pool: "ceph-a", Bytes: 5, Node: "n1", Held: true, State: "AVAILABLE", Kind: "VOLUME"}},
			ListObjects("ceph-a", "", nodes, pools))
		require.Equal(t, []ObjectView{{ID: oid(3), Pool: "ceph-a", Bytes: 6, Node: "n1", Held: true, State: "MOVING", MovingTo: "nfs1", MoveCommandID: "m", Kind: "VOLUME"}},
			ListObjects("nfs1", "", nodes, pools))
	})
	t.Run("objects of a lost pool read LOST and a node filter narrows the list", func(t *testing.T) {
		got := ListObjects("", "n2", nodes, pools)
		require.Len(t, got, 1)
		require.Equal(t, "LOST", got[0].State)
	})
	t.Run("an empty list is a list, not null", func(t *testing.T) {
		data, err := json.Marshal(ListObjects("zz", "", nodes, pools))
		require.NoError(t, err)
		require.Equal(t, "[]", string(data))
	})
}

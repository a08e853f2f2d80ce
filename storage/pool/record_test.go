package pool

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func TestRecordCodec(t *testing.T) {
	full := &Record{ID: "ceph-a", Capacity: ptr(int64(10 << 40)), Reserved: 300 << 30, Version: 3, Objects: 3,
		DeclaredAt: t0, Cleanups: []Cleanup{{Object: "v-0123456789abcdef", Reason: CleanupMoved, CommandID: "c1", Bytes: 5, Since: t0}}}
	t.Run("a record round-trips through Encode and DecodeRecord", func(t *testing.T) {
		data, err := full.Encode()
		require.NoError(t, err)
		back, err := DecodeRecord(data)
		require.NoError(t, err)
		want := full.Clone()
		want.CleanupCount = 1
		require.Equal(t, want, back)
	})
	t.Run("a new record has no capacity key and a null lost_at", func(t *testing.T) {
		data, err := NewRecord("nfs1", t0).Encode()
		require.NoError(t, err)
		require.JSONEq(t, `{"pool_id":"nfs1","reserved_bytes":0,"version":0,"object_count":0,"cleanup_count":0,
			"declared_at":"2026-11-30T12:00:00Z","lost_at":null}`, string(data))
	})
	bad := []struct{ name, data, want string }{
		{"an unknown field is refused", `{"pool_id":"a","declared_at":"2026-11-30T12:00:00Z","lost_at":null,"extra":1}`, "unknown field"},
		{"trailing data is refused", `{"pool_id":"a","declared_at":"2026-11-30T12:00:00Z","lost_at":null} {}`, "data after"},
		{"a bad id is refused", `{"pool_id":"A","declared_at":"2026-11-30T12:00:00Z","lost_at":null}`, "pool id"},
		{"a zero capacity is refused", `{"pool_id":"a","capacity_bytes":0,"declared_at":"2026-11-30T12:00:00Z","lost_at":null}`, "capacity_bytes 0"},
		{"a negative reservation is refused", `{"pool_id":"a","reserved_bytes":-1,"declared_at":"2026-11-30T12:00:00Z","lost_at":null}`, "reserved_bytes -1"},
		{"a cleanup count out of line with its entries is refused", `{"pool_id":"a","cleanup_count":2,"declared_at":"2026-11-30T12:00:00Z","lost_at":null}`, "cleanup_count 2"},
		{"a missing declared_at is refused", `{"pool_id":"a","lost_at":null}`, "declared_at"},
		{"a lost pool that reserves is refused", `{"pool_id":"a","reserved_bytes":5,"declared_at":"2026-11-30T12:00:00Z","lost_at":"2026-11-30T12:00:00Z"}`, "lost but reserves"},
		{"null is refused", `null`, "pool id"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRecord([]byte(tc.data))
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestDeclarationsCodec(t *testing.T) {
	cases := []struct {
		name, pools, def string
		want             Declarations
		err              string
	}{
		{"two pools and a default are read", `{"ceph-a":{"path":"/mnt/ceph-a"},"nfs1":{"path":"/mnt/nfs1"}}`, `"ceph-a"`,
			Declarations{Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}, "nfs1": {"/mnt/nfs1"}}, DefaultPool: "ceph-a"}, ""},
		{"absent members are no pools", ``, ``, Declarations{}, ""},
		{"an unknown field in a declaration is refused", `{"ceph-a":{"path":"/mnt/ceph-a","size":1}}`, ``, Declarations{}, "unknown field"},
		{"a relative path is refused", `{"ceph-a":{"path":"mnt"}}`, ``, Declarations{}, "not absolute"},
		{"a default that is not declared is refused", `{"ceph-a":{"path":"/mnt/ceph-a"}}`, `"nfs1"`, Declarations{}, "not one of the declared"},
		{"a list instead of an object is refused", `["ceph-a:/mnt/ceph-a"]`, ``, Declarations{}, "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecodeDeclarations(json.RawMessage(tc.pools), json.RawMessage(tc.def))
			if tc.err != "" {
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, d)
		})
	}
	t.Run("the only pool is the default when none is named", func(t *testing.T) {
		require.Equal(t, "nfs1", Declarations{Pools: map[string]Declaration{"nfs1": {"/n"}}}.Default())
		require.Equal(t, "", Declarations{Pools: map[string]Declaration{"nfs1": {"/n"}, "b": {"/b"}}}.Default())
	})
}

func TestObjectsCodec(t *testing.T) {
	cases := []struct{ name, raw, err string }{
		{"a held object is read", `{"v-0123456789abcdef":{"pool":"ceph-a","bytes":100,"held":true}}`, ""},
		{"a moving object is read", `{"v-0123456789abcdef":{"pool":"ceph-a","bytes":100,"held":false,"moving_to":"nfs1","move_command_id":"m1"}}`, ""},
		{"null is no objects", `null`, ""},
		{"an unknown field is refused", `{"v-0123456789abcdef":{"pool":"ceph-a","bytes":100,"held":true,"lost":true}}`, "unknown field"},
		{"a bad object id is refused", `{"v-XYZ":{"pool":"ceph-a","bytes":100,"held":true}}`, "object id"},
		{"an object of zero bytes is refused", `{"v-0123456789abcdef":{"pool":"ceph-a","bytes":0,"held":true}}`, "bytes 0"},
		{"moving_to without a command id is refused", `{"v-0123456789abcdef":{"pool":"ceph-a","bytes":1,"held":true,"moving_to":"nfs1"}}`, "go together"},
		{"moving to its own pool is refused", `{"v-0123456789abcdef":{"pool":"ceph-a","bytes":1,"held":true,"moving_to":"ceph-a","move_command_id":"m"}}`, "moving to the pool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := DecodeObjects(json.RawMessage(tc.raw))
			if tc.err != "" {
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, o)
			data, err := json.Marshal(o)
			require.NoError(t, err)
			if tc.raw != "null" {
				require.JSONEq(t, tc.raw, string(data))
			}
		})
	}
}

func TestViewAndAttachments(t *testing.T) {
	rec := &Record{ID: "ceph-a", Capacity: ptr(int64(10995116277760)), Reserved: 322122547200, Version: 3, Objects: 3, DeclaredAt: t0}
	decl := Declarations{Pools: map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}}}
	objs := Objects{
		"v-0000000000000001": {Pool: "ceph-a", Bytes: 1, Held: true},
		"v-0000000000000002": {Pool: "ceph-a", Bytes: 1, Held: false},
		"v-0000000000000003": {Pool: "nfs1", Bytes: 1, Held: true},
	}
	t.Run("an attachment counts only the held objects of its pool", func(t *testing.T) {
		a, ok := AttachmentOf("n1", rec, decl, nil, objs)
		require.True(t, ok)
		require.Equal(t, Attachment{Node: "n1", Path: "/mnt/ceph-a", DefaultPool: true, Available: true, Held: 1}, a)
	})
	t.Run("a failing path check makes the attachment unavailable with its reason", func(t *testing.T) {
		a, _ := AttachmentOf("n1", rec, decl, &PathCheck{Reason: "not a mount point"}, nil)
		require.False(t, a.Available)
		require.Equal(t, "not a mount point", a.Reason)
	})
	t.Run("a lost pool is unavailable even with a good path", func(t *testing.T) {
		lost := rec.Clone()
		lost.LostAt, lost.Reserved = &t0, 0
		a, _ := AttachmentOf("n1", lost, decl, &PathCheck{Available: true}, nil)
		require.Equal(t, Attachment{Node: "n1", Path: "/mnt/ceph-a", DefaultPool: true, Reason: ReasonLost}, a)
	})
	t.Run("a node that does not declare the pool has no attachment", func(t *testing.T) {
		_, ok := AttachmentOf("n1", rec, Declarations{}, nil, nil)
		require.False(t, ok)
	})
	t.Run("the view prints the record with its attachments by node", func(t *testing.T) {
		v := NewView(rec, []Attachment{
			{Node: "n2", Path: "/mnt/ceph-a", Available: true, Held: 1},
			{Node: "n1", Path: "/mnt/ceph-a", DefaultPool: true, Available: true, Held: 2},
		})
		data, err := json.Marshal(v)
		require.NoError(t, err)
		require.JSONEq(t, `{"pool_id":"ceph-a","capacity_bytes":10995116277760,"reserved_bytes":322122547200,"version":3,
			"object_count":3,"cleanup_count":0,"declared_at":"2026-11-30T12:00:00Z","lost_at":null,"attachments":[
			{"node_id":"n1","path":"/mnt/ceph-a","default_pool":true,"available":true,"held_object_count":2},
			{"node_id":"n2","path":"/mnt/ceph-a","default_pool":false,"available":true,"held_object_count":1}]}`, string(data))
	})
}

func TestHuman(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {512, "512 B"}, {200 << 30, "200 GiB"}, {3 << 39, "1.5 TiB"}, {-(1 << 20), "-1 MiB"}} {
		t.Run(fmt.Sprintf("%d bytes read as %s", tc.n, tc.want), func(t *testing.T) {
			require.Equal(t, tc.want, Human(tc.n))
		})
	}
}

func TestObjectSums(t *testing.T) {
	objs := Objects{
		oid(1): {Pool: "ceph-a", Bytes: 10, Held: true},
		oid(2): {Pool: "ceph-a", Bytes: 5, Held: false},
		oid(3): {Pool: "nfs1", Bytes: 7, Held: true, MovingTo: "ceph-a", MoveCommandID: "m"},
	}
	t.Run("objects are counted per pool they live in", func(t *testing.T) {
		require.Equal(t, map[string]int{"ceph-a": 2, "nfs1": 1}, objs.CountByPool())
	})
	t.Run("held bytes count only what this node holds, per pool", func(t *testing.T) {
		require.Equal(t, map[string]int64{"ceph-a": 10, "nfs1": 7}, objs.HeldBytes())
	})
	t.Run("a pool's key lies under pools/", func(t *testing.T) {
		require.Equal(t, "pools/ceph-a", Key("ceph-a"))
	})
	t.Run("a lost pool's view prints lost_at and an empty attachment list", func(t *testing.T) {
		lost := t0.Add(time.Hour)
		v := NewView(&Record{ID: "p", DeclaredAt: t0, LostAt: &lost, Version: 1}, nil)
		data, err := json.Marshal(v)
		require.NoError(t, err)
		require.JSONEq(t, `{"pool_id":"p","reserved_bytes":0,"version":1,"object_count":0,"cleanup_count":0,
			"declared_at":"2026-11-30T12:00:00Z","lost_at":"2026-11-30T13:00:00Z","attachments":[]}`, string(data))
	})
}

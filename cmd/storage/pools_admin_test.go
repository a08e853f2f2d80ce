package main_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// poolView is `storage pools get`'s answer.
type poolView struct {
	ID          string  `json:"pool_id"`
	Capacity    *int64  `json:"capacity_bytes"`
	Reserved    int64   `json:"reserved_bytes"`
	Version     int64   `json:"version"`
	Objects     int64   `json:"object_count"`
	Cleanups    int64   `json:"cleanup_count"`
	LostAt      *string `json:"lost_at"`
	Attachments []struct {
		Node        string `json:"node_id"`
		Path        string `json:"path"`
		DefaultPool bool   `json:"default_pool"`
		Available   bool   `json:"available"`
		Reason      string `json:"reason"`
		Held        int    `json:"held_object_count"`
	} `json:"attachments"`
}

func poolGet(t *testing.T, env *testenv.Env, id string) poolView {
	t.Helper()
	var v poolView
	env.OpOK(t, "storage", &v, "pools", "get", id)
	return v
}

func TestPoolCommands(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		addNode(t, env, "n2", obj{"storage": "1T", "pools": []string{"ceph-a:/srv/ceph", "nfs1:/mnt/nfs1"}, "default-pool": "nfs1"})

		t.Run("get prints a declared pool with its attachments read from the node records", func(t *testing.T) {
			v := poolGet(t, env, "ceph-a")
			require.Equal(t, "ceph-a", v.ID)
			require.Nil(t, v.Capacity)
			require.Zero(t, v.Version)
			require.Len(t, v.Attachments, 2)
			require.Equal(t, "n1", v.Attachments[0].Node)
			require.Equal(t, "/mnt/ceph-a", v.Attachments[0].Path)
			require.True(t, v.Attachments[0].DefaultPool, "the only pool of n1 is its default")
			require.True(t, v.Attachments[0].Available)
			require.Equal(t, "/srv/ceph", v.Attachments[1].Path)
			require.False(t, v.Attachments[1].DefaultPool)
		})
		t.Run("list prints every pool by id, and its table flags a pool without capacity", func(t *testing.T) {
			var l struct{ Pools []poolView }
			env.OpOK(t, "storage", &l, "pools", "list")
			require.Len(t, l.Pools, 2)
			require.Equal(t, "ceph-a", l.Pools[0].ID)
			require.Equal(t, "nfs1", l.Pools[1].ID)
			res := env.Op(t, "storage", "pools", "list", "-o", "table")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Regexp(t, `(?m)^ceph-a .*no capacity$`, res.Stdout)
		})
		t.Run("get of a pool never declared is not_found", func(t *testing.T) {
			res := env.Op(t, "storage", "pools", "get", "nope")
			require.Equal(t, 3, res.Code)
			require.Contains(t, res.Stderr, "not_found")
			require.Empty(t, res.Stdout)
		})
		t.Run("set-capacity without --if-version is invalid_argument and writes nothing", func(t *testing.T) {
			before := env.Dump(t)
			res := env.Op(t, "storage", "pools", "set-capacity", "ceph-a", "300G")
			require.Equal(t, 2, res.Code)
			require.Contains(t, res.Stderr, "--if-version is mandatory")
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("set-capacity at the pool's version sets it and moves the version", func(t *testing.T) {
			var v poolView
			env.OpOK(t, "storage", &v, "pools", "set-capacity", "ceph-a", "300G", "--if-version", "0", "--command-id", "cap1")
			require.Equal(t, 300*gib, *v.Capacity)
			require.Equal(t, int64(1), v.Version)
			require.Equal(t, 300*gib, *poolGet(t, env, "ceph-a").Capacity)
		})
		t.Run("a replay of set-capacity answers the first answer and writes nothing", func(t *testing.T) {
			before := env.Dump(t)
			res := env.Op(t, "storage", "pools", "set-capacity", "ceph-a", "300G", "--if-version", "0", "--command-id", "cap1")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Contains(t, res.Stderr, "replay of command cap1")
			require.Equal(t, before, env.Dump(t))
			res = env.Op(t, "storage", "pools", "set-capacity", "ceph-a", "400G", "--if-version", "1", "--command-id", "cap1")
			require.Equal(t, 6, res.Code, "the same id with other arguments is already_exists")
		})
		t.Run("a stale --if-version is aborted", func(t *testing.T) {
			before := env.Dump(t)
			res := env.Op(t, "storage", "pools", "set-capacity", "ceph-a", "400G", "--if-version", "0")
			require.Equal(t, 5, res.Code)
			require.Contains(t, res.Stderr, "aborted")
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("a zero size is invalid_argument", func(t *testing.T) {
			res := env.Op(t, "storage", "pools", "set-capacity", "ceph-a", "0", "--if-version", "1")
			require.Equal(t, 2, res.Code)
		})
		t.Run("objects of an empty pool is an empty list", func(t *testing.T) {
			raw := env.OpOK(t, "storage", nil, "pools", "objects", "ceph-a")
			require.JSONEq(t, `{"objects": []}`, string(raw))
		})
		t.Run("an object no record keeps is not_found", func(t *testing.T) {
			res := env.Op(t, "storage", "pools", "object", "v-0123456789abcdef")
			require.Equal(t, 3, res.Code)
		})
		t.Run("check reports no drift", func(t *testing.T) {
			var c struct {
				Drifted bool `json:"drifted"`
				Pools   []struct {
					Pool  string `json:"pool"`
					Drift int64  `json:"drift_bytes"`
				} `json:"pools"`
			}
			env.OpOK(t, "storage", &c, "pools", "check")
			require.False(t, c.Drifted)
			require.Len(t, c.Pools, 2)
		})
		t.Run("repair writes recomputed counters over a drifted record", func(t *testing.T) {
			env.Put(t, "/pools/nfs1", `{"pool_id":"nfs1","reserved_bytes":5,"version":0,"object_count":1,"cleanup_count":0,"declared_at":"2026-11-30T12:00:00Z","lost_at":null}`)
			var d struct {
				Drift int64 `json:"drift_bytes"`
			}
			env.OpOK(t, "storage", &d, "pools", "repair", "nfs1")
			require.Equal(t, int64(5), d.Drift)
			v := poolGet(t, env, "nfs1")
			require.Zero(t, v.Reserved)
			require.Zero(t, v.Objects)
		})
		t.Run("declare-lost is refused while a member is not isolated, naming it", func(t *testing.T) {
			before := env.Dump(t)
			res := env.Op(t, "storage", "pools", "declare-lost", "ceph-a")
			require.Equal(t, 4, res.Code)
			require.Contains(t, res.Stderr, "n1, n2")
			require.Equal(t, before, env.Dump(t))
		})
	})
	t.Run("the pools commands never create the embedded store", func(t *testing.T) {
		env := testenv.NewEmbedded(t)
		res := env.Op(t, "storage", "pools", "list")
		require.NotEqual(t, 0, res.Code)
		_, err := os.Stat(env.DB)
		require.True(t, os.IsNotExist(err))
	})
	t.Run("the compute binary has no pools group", func(t *testing.T) {
		env := testenv.NewEmbedded(t)
		res := env.Op(t, "compute", "pools", "list")
		require.NotEqual(t, 0, res.Code)
	})
}

package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// poolRecord is a stored pool record, /pools/<id>.
type poolRecord struct {
	ID       string  `json:"pool_id"`
	Capacity *int64  `json:"capacity_bytes"`
	Reserved int64   `json:"reserved_bytes"`
	Version  int64   `json:"version"`
	Objects  int64   `json:"object_count"`
	LostAt   *string `json:"lost_at"`
}

// poolCapacity is the pool part of a node's stored capacity.
type poolCapacity struct {
	Pools       map[string]struct{ Path string } `json:"pools"`
	DefaultPool string                           `json:"default_pool"`
}

func storedPools(t *testing.T, env *testenv.Env, node string) poolCapacity {
	t.Helper()
	var rec struct {
		Capacity poolCapacity `json:"capacity"`
	}
	require.True(t, env.Record(t, "/resource/storage/"+node, &rec), "node %s has no record", node)
	return rec.Capacity
}

func TestPoolDeclarations(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("the first declaration creates the pool record without capacity, in the add-node", func(t *testing.T) {
			addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a", "nfs1:/mnt/nfs1"}, "default-pool": "ceph-a"})
			got := storedPools(t, env, "n1")
			require.Equal(t, "/mnt/ceph-a", got.Pools["ceph-a"].Path)
			require.Equal(t, "/mnt/nfs1", got.Pools["nfs1"].Path)
			require.Equal(t, "ceph-a", got.DefaultPool)
			var rec poolRecord
			require.True(t, env.Record(t, "/pools/ceph-a", &rec))
			require.Equal(t, "ceph-a", rec.ID)
			require.Nil(t, rec.Capacity, "a pool has no capacity until an operator sets it")
			require.Zero(t, rec.Version)
			require.True(t, env.Record(t, "/pools/nfs1", nil))
		})
		t.Run("a second node declaring the pool leaves its record as it is", func(t *testing.T) {
			before := env.Dump(t)["/pools/ceph-a"]
			addNode(t, env, "n2", obj{"storage": "1T", "pools": []string{"ceph-a:/srv/ceph"}})
			require.Equal(t, before, env.Dump(t)["/pools/ceph-a"])
			require.Equal(t, "/srv/ceph", storedPools(t, env, "n2").Pools["ceph-a"].Path)
		})
		t.Run("a delta capacity write adds a pool and creates its record", func(t *testing.T) {
			env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n2", "resource_request": obj{"pools": []string{"nfs2:/mnt/nfs2"}}, "delta": true, "incr": true}, nil)
			require.Contains(t, storedPools(t, env, "n2").Pools, "nfs2")
			require.Contains(t, storedPools(t, env, "n2").Pools, "ceph-a")
			require.True(t, env.Record(t, "/pools/nfs2", nil))
		})
		t.Run("rm-pools in absolute mode drops a declaration and keeps the pool record", func(t *testing.T) {
			env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n2", "resource_request": obj{"rm-pools": "nfs2"}}, nil)
			require.NotContains(t, storedPools(t, env, "n2").Pools, "nfs2")
			require.True(t, env.Record(t, "/pools/nfs2", nil))
		})
		t.Run("a node without pools keeps no pool members in its record", func(t *testing.T) {
			addNode(t, env, "plain", obj{"storage": "1T"})
			raw := env.Dump(t)["/resource/storage/plain"]
			require.NotContains(t, raw, "pool")
		})
		refusals := []struct {
			name, node string
			verb       string
			req        obj
			want       string
		}{
			{"a malformed declaration", "bad1", "add-node", obj{"nodename": "bad1", "resource": obj{"pools": []string{"ceph-a"}}}, "invalid_argument"},
			{"a relative pool path", "bad2", "add-node", obj{"nodename": "bad2", "resource": obj{"pools": []string{"ceph-a:mnt"}}}, "invalid_argument"},
			{"a default pool the node does not declare", "bad3", "add-node", obj{"nodename": "bad3", "resource": obj{"pools": []string{"ceph-a:/mnt/a"}, "default-pool": "nfs1"}}, "invalid_argument"},
			{"rm-pools in delta mode", "n1", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"rm-pools": "nfs1"}, "delta": true, "incr": false}, "invalid_argument"},
			{"rm-pools of a pool the node does not declare", "n1", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"rm-pools": "zzz"}}, "invalid_argument"},
			{"pools in a usage write", "n1", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"pools": []string{"x:/mnt/x"}}, "delta": true, "incr": true}, "invalid_argument"},
		}
		for _, c := range refusals {
			t.Run("refuses "+c.name+" and writes nothing", func(t *testing.T) {
				before := env.Dump(t)
				line := env.Fail(t, "storage", c.verb, c.req)
				require.Contains(t, line, c.want)
				require.Equal(t, before, env.Dump(t))
			})
		}
	})
}

package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

func TestPoolDeployCapacity(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		for _, n := range []string{"n1", "n2", "n3"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		addNode(t, env, "plain", obj{"storage": "1T"})
		names := []string{"n1", "n2", "n3", "plain"}
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:100G"}}

		t.Run("a pool without capacity gives no node room", func(t *testing.T) {
			c := capacity(t, env, names, request)
			require.Zero(t, c.Total)
			require.Empty(t, c.Nodes)
		})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "250G", "--if-version", "0")
		t.Run("the pool's slots are dealt round-robin in name order, so the sum never exceeds them", func(t *testing.T) {
			c := capacity(t, env, names, request)
			require.Equal(t, 2, c.Total)
			require.Equal(t, 1, c.Nodes["n1"].Capacity)
			require.Equal(t, 1, c.Nodes["n2"].Capacity)
			require.NotContains(t, c.Nodes, "n3")
			require.NotContains(t, c.Nodes, "plain", "a node that does not declare the pool has no room for it")
		})
		t.Run("a node's own limit comes first: the slots it cannot use go to the others", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "500G", "--if-version", "1")
			// Each node's flat budget (1 TiB) takes 2 workloads asking 400 GiB
			// of flat storage; the pool has 5 slots of 100 GiB.
			c := capacity(t, env, names, obj{"volumes": []string{"POOL@ceph-a:/data:rw:100G"}, "storage": "400G"})
			require.Equal(t, 5, c.Total, "%+v", c.Nodes)
			require.Equal(t, 2, c.Nodes["n1"].Capacity)
			require.Equal(t, 2, c.Nodes["n2"].Capacity)
			require.Equal(t, 1, c.Nodes["n3"].Capacity)
		})
		t.Run("a request without pool volumes is not apportioned", func(t *testing.T) {
			c := capacity(t, env, names, obj{"storage": "100G"})
			require.Len(t, c.Nodes, 4)
		})
	})
}

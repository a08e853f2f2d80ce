package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolCapacityLeavesOutFailingAttachments: the capacity query deals no
// slot of a pool to a node whose last heartbeat found the pool's path
// failing (calculate-deploy and the usage write would refuse it there); the
// other nodes get those slots, and a heartbeat that finds the path again
// gives the node its share back.
func TestPoolCapacityLeavesOutFailingAttachments(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		mnt := filepath.Join(t.TempDir(), "ceph-a")
		require.NoError(t, os.Mkdir(mnt, 0o755))
		names := []string{"n1", "n2", "n3"}
		for _, n := range names {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:" + mnt}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "40G", "--if-version", "0")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:10G"}}

		t.Run("with every attachment available, the four slots go round-robin", func(t *testing.T) {
			c := capacity(t, env, names, request)
			require.Equal(t, 4, c.Total)
			require.Equal(t, 2, c.Nodes["n1"].Capacity)
			require.Equal(t, 1, c.Nodes["n2"].Capacity)
			require.Equal(t, 1, c.Nodes["n3"].Capacity)
		})
		t.Run("a node whose heartbeat found the path no mount point gets none, the others get its share", func(t *testing.T) {
			heartbeat(t, env, "n1", t.TempDir())
			require.False(t, poolGet(t, env, "ceph-a").Attachments[0].Available)
			c := capacity(t, env, names, request)
			require.Equal(t, 4, c.Total)
			require.NotContains(t, c.Nodes, "n1")
			require.Equal(t, 2, c.Nodes["n2"].Capacity)
			require.Equal(t, 2, c.Nodes["n3"].Capacity)
		})
		t.Run("a heartbeat that finds the path again gives the node its share back", func(t *testing.T) {
			heartbeat(t, env, "n1", t.TempDir(), "--pool-check", "exists")
			c := capacity(t, env, names, request)
			require.Equal(t, 2, c.Nodes["n1"].Capacity)
			require.Equal(t, 4, c.Total)
		})
	})
}

// TestPoolRollbackOfAnAttach: core rolls back a deploy that attached an
// object released by an isolation (it replays the usage write's before on
// the attaching node). The object keeps its data and its reservation: it
// goes back to the donor's record, unheld, and the retried deploy attaches
// it again.
func TestPoolRollbackOfAnAttach(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		for _, n := range []string{"n1", "n2"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		object := planObjects(placed(t, env, "n1", 1, "10G")[0])[0]
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
		binding := obj{"volumes": []string{"POOL@ceph-a/" + object + ":/data:rw"}}

		var ba beforeAfter
		t.Run("the attach moves the object to n2", func(t *testing.T) {
			d := deploy(t, env, "n2", 1, binding)
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n2", "workloads_resource": d.WorkloadsResource, "delta": true, "incr": true}, &ba)
			require.True(t, poolObjects(t, env, "n2")[object].Held)
			require.NotContains(t, string(ba.Before), object)
		})
		t.Run("core's rollback gives the object back to n1, unheld and reserved", func(t *testing.T) {
			rollbackUsage(t, env, "n2", ba.Before)
			living := exactPool(t, env, "ceph-a")
			require.Equal(t, "n1", living[object].Node, "the object survives the rollback")
			require.False(t, living[object].Held)
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
			require.Empty(t, info(t, env, "n2").Diffs)
		})
		t.Run("the retried deploy attaches it again", func(t *testing.T) {
			d := deploy(t, env, "n2", 1, binding)
			commit(t, env, "n2", d.WorkloadsResource, true)
			require.True(t, poolObjects(t, env, "n2")[object].Held)
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
			exactPool(t, env, "ceph-a")
		})
	})
}

// TestPoolRestoreChecksOtherHolders: core's rollback on n1 replays a
// before that still names an object which, since, n1 lost to an isolation
// and n2 attached. The restore reads every node record that keeps an
// object it names and its own record lacks: it leaves the object where
// n2's workload holds it, never in two records, never reserved twice.
// Were the object unheld there, the restore would take it back.
func TestPoolRestoreChecksOtherHolders(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		for _, n := range []string{"n1", "n2", "n3"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		first := placed(t, env, "n1", 1, "10G")[0]
		object := planObjects(first)[0]
		second := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL@ceph-a:/data:rw:20G"}})
		var ba beforeAfter
		env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": second.WorkloadsResource, "delta": true, "incr": true}, &ba)
		require.Contains(t, string(ba.Before), object)
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
		d := deploy(t, env, "n2", 1, obj{"volumes": []string{"POOL@ceph-a/" + object + ":/data:rw"}})
		commit(t, env, "n2", d.WorkloadsResource, true)
		require.Equal(t, 30*gib, poolGet(t, env, "ceph-a").Reserved)

		t.Run("a restore naming an object another node's workload holds leaves it there", func(t *testing.T) {
			rollbackUsage(t, env, "n1", ba.Before)
			living := exactPool(t, env, "ceph-a")
			require.Equal(t, "n2", living[object].Node)
			require.True(t, living[object].Held)
			require.Len(t, living, 1, "the rolled-back 20G object is released")
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
		})
		t.Run("a restore naming an object another node keeps unheld takes it back", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "nodes", "isolate", "n2")
			rollbackUsage(t, env, "n3", json.RawMessage(`{"volumes":{},"disks":[],"storage":0,"pool_objects":{"`+object+`":{"pool":"ceph-a","bytes":10737418240,"held":true}}}`))
			living := exactPool(t, env, "ceph-a")
			require.Equal(t, "n3", living[object].Node)
			require.True(t, living[object].Held)
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
		})
	})
}

// TestPoolRestoreKeepsAnUnheldObjectUnheld: a restore (core's rollback, or
// set-node-resource-info) whose snapshot names an object unheld, which
// another node's record keeps unheld, takes the object back unheld, as
// docs/pools.md says: a restore never makes an unheld object held. Made
// held, it would be held by a node whose workloads do not have it (here an
// isolated one), and no other node could attach it.
func TestPoolRestoreKeepsAnUnheldObjectUnheld(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		restores := []struct {
			name    string
			restore func(t *testing.T, node string, usage json.RawMessage)
		}{
			{"core's rollback of the usage", func(t *testing.T, node string, usage json.RawMessage) {
				rollbackUsage(t, env, node, usage)
			}},
			{"set-node-resource-info", func(t *testing.T, node string, usage json.RawMessage) {
				env.Call(t, "storage", "set-node-resource-info", obj{"nodename": node,
					"capacity": obj{"volumes": obj{}, "disks": []string{}, "storage": 1 << 40, "pools": obj{"ceph-a": obj{"path": "/mnt/ceph-a"}}},
					"usage":    usage}, nil)
			}},
		}
		addNode(t, env, "keeper", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		for i, c := range restores {
			t.Run("a restore by "+c.name+" takes an object another node keeps unheld back unheld", func(t *testing.T) {
				dead, other := "dead"+strconv.Itoa(i), "other"+strconv.Itoa(i)
				for _, n := range []string{dead, other} {
					addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
				}
				object := planObjects(placed(t, env, dead, 1, "10G")[0])[0]
				env.OpOK(t, "storage", nil, "nodes", "isolate", dead)
				reserved := poolGet(t, env, "ceph-a").Reserved

				c.restore(t, other, json.RawMessage(`{"volumes":{},"disks":[],"storage":0,"pool_objects":{"`+object+`":{"pool":"ceph-a","bytes":10737418240,"held":false}}}`))
				living := exactPool(t, env, "ceph-a")
				require.Equal(t, other, living[object].Node)
				require.False(t, living[object].Held, "the snapshot has the object unheld")
				require.Equal(t, reserved, poolGet(t, env, "ceph-a").Reserved)
			})
		}
	})
}

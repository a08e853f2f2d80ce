package main_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// These tests replay exactly what core's cobalt resource manager sends
// when it rolls a write back or undoes a remove-node: the before a
// set-node-resource-* call answered, passed back unchanged with
// delta=false (usage through resource, capacity through resource_request),
// and set-node-resource-info with what get-node-resource-info answered.

// rollbackUsage replays a usage write's before as core does.
func rollbackUsage(t *testing.T, env *testenv.Env, node string, before json.RawMessage) {
	t.Helper()
	env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": node, "resource": before, "resource_request": nil, "workloads_resource": nil, "delta": false, "incr": false}, nil)
}

// removeWorkloads is core removing workloads from a node: a delta decrease.
func removeWorkloads(t *testing.T, env *testenv.Env, node string, workloads ...json.RawMessage) beforeAfter {
	t.Helper()
	var ba beforeAfter
	env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": node, "resource": nil, "resource_request": nil, "workloads_resource": workloads, "delta": true, "incr": false}, &ba)
	return ba
}

// isolateAndComeBack lets the node's session expire, isolates it and
// brings it back with a new boot id.
func isolateAndComeBack(t *testing.T, env *testenv.Env, node string) {
	t.Helper()
	heartbeat(t, env, node, procRoot(t, "boot-1", 8<<20), "--ttl", "1s")
	require.Eventually(t, func() bool { return nodeGet(t, env, node).Status == "UNAVAILABLE" }, 10*time.Second, 200*time.Millisecond)
	env.OpOK(t, "storage", nil, "nodes", "isolate", node)
	r := heartbeat(t, env, node, procRoot(t, "boot-2", 8<<20), "--ttl", "1m")
	require.Equal(t, "READY", r.Status)
}

func TestRollbackOfAnAbsorbedDecreaseRestoresTheLedger(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:100G"}, "storage": "100G"})
		old := deploy(t, env, "n1", 2, obj{"volumes": []string{"AUTO:/d:rw:30G"}})
		commit(t, env, "n1", old.WorkloadsResource, true)
		isolateAndComeBack(t, env, "n1")
		fresh := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:50G"}})
		commit(t, env, "n1", fresh.WorkloadsResource, true)
		require.JSONEq(t, `{"volumes": {"/data0": 64424509440}, "storage": 64424509440}`, string(nodeGet(t, env, "n1").Released["storage"]))

		var ba beforeAfter
		t.Run("a decrease the ledger absorbs answers the ledger in its before and after", func(t *testing.T) {
			ba = removeWorkloads(t, env, "n1", old.WorkloadsResource[0])
			require.JSONEq(t, `{"storage": 64424509440, "volume:/data0": 64424509440}`, string(field(t, ba.Before, "isolation_ledger")))
			require.JSONEq(t, `{"storage": 32212254720, "volume:/data0": 32212254720}`, string(field(t, ba.After, "isolation_ledger")))
			require.Equal(t, 50*gib, info(t, env, "n1").Usage.Volumes["/data0"], "the new workload's usage is untouched")
		})
		t.Run("core's rollback of that decrease restores usage and ledger exactly", func(t *testing.T) {
			rollbackUsage(t, env, "n1", ba.Before)
			require.JSONEq(t, `{"volumes": {"/data0": 64424509440}, "storage": 64424509440}`, string(nodeGet(t, env, "n1").Released["storage"]))
			require.Equal(t, 50*gib, info(t, env, "n1").Usage.Volumes["/data0"])
		})
		t.Run("the retry and the next removal leave exactly the new workload's usage", func(t *testing.T) {
			removeWorkloads(t, env, "n1", old.WorkloadsResource[0])
			removeWorkloads(t, env, "n1", old.WorkloadsResource[1])
			require.NotContains(t, nodeGet(t, env, "n1").Released, "storage", "the ledger is used up")
			u := info(t, env, "n1", fresh.WorkloadsResource...)
			require.Equal(t, []string{}, u.Diffs)
			require.Equal(t, 50*gib, u.Usage.Volumes["/data0"])
		})
		t.Run("so an 80G deploy on the 100G device is refused", func(t *testing.T) {
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumes": []string{"AUTO:/d:rw:80G"}}})
			require.Contains(t, line, "resource_exhausted")
		})
		t.Run("a ledger snapshot is refused on a delta write and must hold amounts", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource": obj{"isolation_ledger": obj{}}, "delta": true, "incr": false})
			require.Contains(t, line, "invalid_argument: isolation_ledger is a rollback snapshot")
			line = env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource": obj{"isolation_ledger": obj{"storage": -1}}, "delta": false})
			require.Contains(t, line, "invalid_argument: isolation_ledger: storage is -1, below 0")
			require.Equal(t, before, env.Dump(t))
		})
	})
}

func TestRollbackWithoutALedgerAnswersThePlainShape(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		t.Run("a usage write on a node with no ledger answers the usage alone, and its rollback is exact", func(t *testing.T) {
			want := info(t, env, "n1")
			var ba beforeAfter
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data0:5G"}}, "delta": true, "incr": true}, &ba)
			require.NotContains(t, string(ba.Before), "isolation_ledger")
			require.NotContains(t, string(ba.After), "isolation_ledger")
			rollbackUsage(t, env, "n1", ba.Before)
			require.Equal(t, want, info(t, env, "n1"))
		})
		t.Run("core's rollback of a capacity write restores the capacity exactly", func(t *testing.T) {
			want := info(t, env, "n1")
			var ba beforeAfter
			env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data2:1T"}, "storage": "1T"}, "delta": true, "incr": true}, &ba)
			require.NotEqual(t, want, info(t, env, "n1"))
			env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "resource": nil, "resource_request": ba.Before, "delta": false, "incr": false}, nil)
			require.Equal(t, want, info(t, env, "n1"))
		})
	})
}

func TestUndoOfARemoveNodeRestoresTheRegistration(t *testing.T) {
	t.Parallel()
	// undoRemove is cobalt's RemoveNode: read, remove, then (another plugin
	// having failed) set-node-resource-info with what it read.
	removeAndUndo := func(t *testing.T, env *testenv.Env, node string) {
		t.Helper()
		raw := env.Call(t, "storage", "get-node-resource-info", obj{"nodename": node, "workloads_resource": nil}, nil)
		var read struct {
			Capacity json.RawMessage `json:"capacity"`
			Usage    json.RawMessage `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(raw, &read))
		env.Call(t, "storage", "remove-node", obj{"nodename": node}, nil)
		env.Call(t, "storage", "set-node-resource-info", obj{"nodename": node, "capacity": read.Capacity, "usage": read.Usage}, nil)
	}
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		t.Run("a DRAINING node comes back DRAINING and takes no work", func(t *testing.T) {
			addNode(t, env, "d1", standardNode)
			commit(t, env, "d1", deploy(t, env, "d1", 1, smallReq).WorkloadsResource, true)
			want := nodeOp(t, env, "drain", "d1")
			require.Equal(t, "DRAINING", want.Status)
			removeAndUndo(t, env, "d1")
			got := nodeGet(t, env, "d1")
			require.Equal(t, "DRAINING", got.Status)
			require.True(t, got.Drain)
			require.Equal(t, want.Version, got.Version, "the registration is the one the node had")
			require.False(t, placeable(t, env, "d1"))
		})
		t.Run("an isolated node comes back with its ledger, so core's cleanup is absorbed", func(t *testing.T) {
			addNode(t, env, "i1", obj{"volumes": []string{"/data0:200G"}, "storage": "200G"})
			old := deploy(t, env, "i1", 1, obj{"volumes": []string{"AUTO:/d:rw:100G"}})
			commit(t, env, "i1", old.WorkloadsResource, true)
			heartbeat(t, env, "i1", procRoot(t, "boot-1", 8<<20), "--ttl", "1s")
			require.Eventually(t, func() bool { return nodeGet(t, env, "i1").Status == "UNAVAILABLE" }, 10*time.Second, 200*time.Millisecond)
			env.OpOK(t, "storage", nil, "nodes", "isolate", "i1")
			removeAndUndo(t, env, "i1")
			got := nodeGet(t, env, "i1")
			require.True(t, got.Isolated)
			require.Equal(t, "UNAVAILABLE", got.Status)
			require.JSONEq(t, `{"volumes": {"/data0": 107374182400}, "storage": 107374182400}`, string(got.Released["storage"]))
			removeWorkloads(t, env, "i1", old.WorkloadsResource...)
			require.NotContains(t, nodeGet(t, env, "i1").Released, "storage")
			require.Equal(t, int64(0), info(t, env, "i1").Usage.Volumes["/data0"])
		})
		t.Run("add-node of a removed name is a new life: the registration starts fresh", func(t *testing.T) {
			env.Call(t, "storage", "remove-node", obj{"nodename": "d1"}, nil)
			require.True(t, nodeGet(t, env, "d1").Drain, "the removal alone keeps the registration")
			addNode(t, env, "d1", standardNode)
			got := nodeGet(t, env, "d1")
			require.Equal(t, "READY", got.Status)
			require.False(t, got.Drain)
			require.True(t, placeable(t, env, "d1"))
		})
		t.Run("a pristine registration goes with the last record, and set-node-resource-info brings a fresh one", func(t *testing.T) {
			addNode(t, env, "p1", standardNode)
			env.Call(t, "storage", "remove-node", obj{"nodename": "p1"}, nil)
			require.Equal(t, 3, env.Op(t, "storage", "nodes", "get", "p1").Code)
			env.Call(t, "storage", "set-node-resource-info", obj{"nodename": "p1", "capacity": obj{"volumes": obj{"/data0": gib}, "disks": []obj{}, "storage": gib}, "usage": obj{"volumes": obj{}, "disks": []obj{}, "storage": 0}}, nil)
			require.Equal(t, "READY", nodeGet(t, env, "p1").Status)
		})
	})
}

// field is one key of a JSON object.
func field(t *testing.T, raw json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	v, ok := m[key]
	require.True(t, ok, "%s has no %s", raw, key)
	return v
}

func TestRollbackRefusesALedgerItNeverAnswered(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		for _, c := range []struct {
			name   string
			ledger obj
			want   string
		}{
			{"a key that is not one of storage's usage components", obj{"storage": 5, "bogus": 5},
				"isolation_ledger: bogus is not a storage usage component (storage, volume:DEVICE, bindings:DEVICE, disk:DEVICE:QUOTA)"},
			{"a disk key with an unknown quota", obj{"disk:/dev/vda:iops": 5},
				"isolation_ledger: disk:/dev/vda:iops is not a storage usage component (storage, volume:DEVICE, bindings:DEVICE, disk:DEVICE:QUOTA)"},
			{"a volume key with no device", obj{"volume:": 5},
				"isolation_ledger: volume: is not a storage usage component (storage, volume:DEVICE, bindings:DEVICE, disk:DEVICE:QUOTA)"},
			{"an amount above 2^53", obj{"volume:/data0": int64(1)<<53 + 1},
				"isolation_ledger: volume:/data0 is 9007199254740993, above 2^53 (9007199254740992)"},
			{"an amount at the largest int64", obj{"storage": int64(9223372036854775807), "volume:/nonexist": 5, "bogus": 5},
				"isolation_ledger: storage is 9223372036854775807, above 2^53 (9007199254740992)"},
		} {
			t.Run(c.name+" is refused naming the key and the limit, and nothing is written", func(t *testing.T) {
				before := env.Dump(t)
				line := env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n1",
					"resource": obj{"volumes": obj{}, "disks": []obj{}, "storage": 0, "isolation_ledger": c.ledger}, "delta": false})
				require.Equal(t, "storage: set-node-resource-usage: node n1: invalid_argument: "+c.want, line)
				require.Equal(t, before, env.Dump(t))
			})
		}
	})
}

func TestRollbackKeepsTheLedgerOfADeviceTheNodeNoLongerHas(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:100G", "/data1:100G"}, "storage": "100G"})
		on0 := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:60G"}})
		commit(t, env, "n1", on0.WorkloadsResource, true)
		on1 := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:70G"}})
		commit(t, env, "n1", on1.WorkloadsResource, true)
		isolateAndComeBack(t, env, "n1")
		env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data1:0"}}, "delta": false}, nil)
		require.NotContains(t, info(t, env, "n1").Capacity.Volumes, "/data1")

		t.Run("a decrease the ledger absorbs answers the removed device's ledger in its before", func(t *testing.T) {
			ba := removeWorkloads(t, env, "n1", on0.WorkloadsResource...)
			require.Contains(t, string(field(t, ba.Before, "isolation_ledger")), `"volume:/data1"`)
			t.Run("and core's rollback of it is accepted and restores that ledger", func(t *testing.T) {
				rollbackUsage(t, env, "n1", ba.Before)
				got := nodeGet(t, env, "n1").Released["storage"]
				require.JSONEq(t, `{"volumes": {"/data0": 64424509440, "/data1": 75161927680}, "storage": 139586437120}`, string(got))
			})
		})
		t.Run("a decrease that draws the removed device's ledger to nothing is rolled back to it", func(t *testing.T) {
			ba := removeWorkloads(t, env, "n1", on1.WorkloadsResource...)
			require.NotContains(t, string(nodeGet(t, env, "n1").Released["storage"]), `"/data1"`, "the ledger of /data1 is drawn to nothing")
			rollbackUsage(t, env, "n1", ba.Before)
			got := nodeGet(t, env, "n1").Released["storage"]
			require.JSONEq(t, `{"volumes": {"/data0": 64424509440, "/data1": 75161927680}, "storage": 139586437120}`, string(got))
		})
	})
}

func TestIsolatingAgainRefusesALedgerCoreCouldNotReplay(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		// 4 PiB a life, the most a node's volumes and storage allow
		// together: three isolations would leave 12 PiB in the ledger,
		// past 2^53 bytes (8 PiB).
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:4P"}, "storage": "4P"})
		var lives []deployAnswer
		for range 2 {
			d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:4P"}})
			commit(t, env, "n1", d.WorkloadsResource, true)
			isolateAndComeBack(t, env, "n1")
			lives = append(lives, d)
		}
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:4P"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		heartbeat(t, env, "n1", procRoot(t, "boot-1", 8<<20), "--ttl", "1s")
		require.Eventually(t, func() bool { return nodeGet(t, env, "n1").Status == "UNAVAILABLE" }, 10*time.Second, 200*time.Millisecond)

		line := opFails(t, env, 4, "nodes", "isolate", "n1")
		require.Equal(t, "storage: nodes isolate: failed_precondition: node n1 is UNAVAILABLE: the storage isolation ledger would hold more than 2^53 (9007199254740992) of a component: let core remove the workloads of the last isolation first", line)
		removeWorkloads(t, env, "n1", lives[0].WorkloadsResource...)
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
		require.JSONEq(t, `{"volumes": {"/data0": 9007199254740992}, "storage": 9007199254740992}`, string(nodeGet(t, env, "n1").Released["storage"]))
	})
}

// core's RemoveNode reads every plugin's record first and, when another
// plugin's removal fails, hands each plugin that removed back what it read
// (set-node-resource-info). For a node storage never had a record of, it
// read null, so the undo carries capacity and usage null: restoring that
// is restoring no record, not a failure that core reports as a failed
// rollback on top of the removal's own error.
func TestUndoOfARemoveNodeOfANodeWithoutARecordRestoresNothing(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		raw := env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "ghost", "workloads_resource": []any{}}, nil)
		require.Equal(t, "null", string(raw))
		env.Call(t, "storage", "remove-node", obj{"nodename": "ghost"}, nil)
		before := env.Dump(t)

		t.Run("the undo with capacity and usage null succeeds and writes nothing", func(t *testing.T) {
			raw := env.Call(t, "storage", "set-node-resource-info", obj{"nodename": "ghost", "capacity": nil, "usage": nil}, nil)
			require.JSONEq(t, `{}`, string(raw))
			require.Equal(t, before, env.Dump(t))
			raw = env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "ghost", "workloads_resource": []any{}}, nil)
			require.Equal(t, "null", string(raw), "the node is still one storage has never seen")
		})
		t.Run("the node can still be added afterwards", func(t *testing.T) {
			addNode(t, env, "ghost", standardNode)
		})
		t.Run("a capacity without a usage is still refused", func(t *testing.T) {
			line := env.Fail(t, "storage", "set-node-resource-info", obj{"nodename": "other", "capacity": nil, "usage": obj{"volumes": obj{}, "disks": []obj{}, "storage": 0}})
			require.Contains(t, line, "invalid_argument: capacity: missing")
		})
	})
}

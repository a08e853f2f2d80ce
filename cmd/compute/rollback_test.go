package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// These tests replay exactly what core's cobalt resource manager sends
// when it rolls back a write (the before it was answered, with
// delta=false) or undoes a remove-node (set-node-resource-info with what
// get-node-resource-info answered).

// bootDir is a fake /proc whose boot id is boot.
func bootDir(t *testing.T, boot string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "sys/kernel/random/boot_id")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(boot+"\n"), 0o644))
	return dir
}

type rawChange struct {
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

func usageWrite(t *testing.T, env *testenv.Env, req obj) rawChange {
	t.Helper()
	var ch rawChange
	env.Call(t, bin, "set-node-resource-usage", req, &ch)
	return ch
}

func released(t *testing.T, env *testenv.Env, node string) map[string]amount {
	t.Helper()
	var reg struct {
		Released map[string]amount `json:"released"`
	}
	env.OpOK(t, bin, &reg, "nodes", "get", node)
	return reg.Released
}

func TestComputeRollbackOfAnAbsorbedDecrease(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 10, "10G")
		old := workload{3000, 3000, 3 * gib, 3 * gib}
		usageWrite(t, env, obj{"nodename": "n1", "workloads_resource": []workload{old, old}, "delta": true, "incr": true})
		env.OpOK(t, bin, nil, "nodes", "isolate", "n1")
		env.OpOK(t, bin, nil, "nodes", "heartbeat", "n1", "--proc-root", bootDir(t, "boot-2"), "--clock-sync", "SYNCHRONIZED", "--clock-max-error", "1ms")
		fresh := workload{5000, 5000, 5 * gib, 5 * gib}
		usageWrite(t, env, obj{"nodename": "n1", "workloads_resource": []workload{fresh}, "delta": true, "incr": true})

		remove := obj{"nodename": "n1", "resource": nil, "resource_request": nil, "workloads_resource": []workload{old}, "delta": true, "incr": false}
		ch := usageWrite(t, env, remove)
		require.Equal(t, map[string]amount{"compute": {3000, 3 * gib}}, released(t, env, "n1"), "the decrease came from the ledger")

		t.Run("core's replay of the before restores the ledger with the usage", func(t *testing.T) {
			usageWrite(t, env, obj{"nodename": "n1", "resource": ch.Before, "resource_request": nil, "workloads_resource": nil, "delta": false, "incr": false})
			require.Equal(t, map[string]amount{"compute": {6000, 6 * gib}}, released(t, env, "n1"))
			require.Equal(t, amount{5000, 5 * gib}, info(t, env, "n1").Usage)
		})
		t.Run("the retry and the next removal leave exactly the new workload", func(t *testing.T) {
			usageWrite(t, env, remove)
			usageWrite(t, env, remove)
			require.Empty(t, released(t, env, "n1"))
			require.Equal(t, amount{5000, 5 * gib}, info(t, env, "n1").Usage)
			line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"cpu": 8}})
			require.Contains(t, line, "resource_exhausted")
		})
	})
}

func TestComputeUndoOfARemoveNode(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		place(t, env, "n1", 2, obj{"cpu": 5, "memory": "1G"})
		env.OpOK(t, bin, nil, "nodes", "isolate", "n1")

		raw := env.Call(t, bin, "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": nil}, nil)
		var read struct {
			Capacity json.RawMessage `json:"capacity"`
			Usage    json.RawMessage `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(raw, &read))
		env.Call(t, bin, "remove-node", obj{"nodename": "n1"}, nil)
		env.Call(t, bin, "set-node-resource-info", obj{"nodename": "n1", "capacity": read.Capacity, "usage": read.Usage}, nil)

		t.Run("the node comes back isolated with its ledger", func(t *testing.T) {
			require.Equal(t, map[string]amount{"compute": {10000, 2 * gib}}, released(t, env, "n1"))
			line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"cpu": 1}})
			require.Contains(t, line, "node is isolated")
		})
		t.Run("core's cleanup of the dead workloads is absorbed, never out of range", func(t *testing.T) {
			usageWrite(t, env, obj{"nodename": "n1", "workloads_resource": []workload{{5000, 5000, gib, gib}, {5000, 5000, gib, gib}}, "delta": true, "incr": false})
			require.Empty(t, released(t, env, "n1"))
			require.Equal(t, amount{}, info(t, env, "n1").Usage)
		})
	})
}

func TestComputeMostIdleAndMetricsSkipNodesThatCannotTakeWork(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "idle-retired", 64, "64G")
		addNode(t, env, "idle-isolated", 64, "64G")
		addNode(t, env, "busy", 8, "8G")
		place(t, env, "busy", 1, obj{"cpu": 4})
		env.OpOK(t, bin, nil, "nodes", "drain", "idle-retired")
		env.OpOK(t, bin, nil, "nodes", "retire", "idle-retired")
		env.OpOK(t, bin, nil, "nodes", "isolate", "idle-isolated")

		t.Run("get-most-idle-node answers the busier node that can take work", func(t *testing.T) {
			var got struct {
				Nodename string `json:"nodename"`
				Priority int    `json:"priority"`
			}
			env.Call(t, bin, "get-most-idle-node", obj{"nodenames": []string{"idle-retired", "idle-isolated", "busy"}}, &got)
			require.Equal(t, "busy", got.Nodename)
			require.Equal(t, 102, got.Priority, "above core's cpumem (100), which would answer a refused node")
		})
		t.Run("and fails naming why each was skipped when none can", func(t *testing.T) {
			line := env.Fail(t, bin, "get-most-idle-node", obj{"nodenames": []string{"idle-retired", "idle-isolated"}})
			require.Equal(t, "compute: get-most-idle-node: failed_precondition: no node may take new work: idle-retired (node is retired; node is draining), idle-isolated (node is isolated)", line)
		})
		t.Run("get-metrics reports no schedulable capacity for them and node_schedulable 0, labelled by pod and node only", func(t *testing.T) {
			var got []struct {
				Name   string   `json:"name"`
				Labels []string `json:"labels"`
				Key    string   `json:"key"`
				Value  string   `json:"value"`
			}
			env.Call(t, bin, "get-metrics", obj{"nodes": []obj{{"podname": "p", "nodename": "idle-retired"}, {"podname": "p", "nodename": "idle-isolated"}, {"podname": "p", "nodename": "busy"}}}, &got)
			values := map[string]string{}
			for _, m := range got {
				values[m.Key] = m.Value
				if m.Name == "node_schedulable" {
					require.Equal(t, []string{"p", m.Labels[1]}, m.Labels, "no status label: core would keep a node's old status series")
				}
			}
			for _, n := range []string{"idle-retired", "idle-isolated"} {
				require.Equal(t, "0", values["core.node."+n+".compute.cpu.schedulable_millis"], n)
				require.Equal(t, "0", values["core.node."+n+".compute.memory.schedulable_bytes"], n)
				require.Equal(t, "0", values["core.node."+n+".compute.schedulable"], n)
			}
			require.Equal(t, "8000", values["core.node.busy.compute.cpu.schedulable_millis"])
			require.Equal(t, "1", values["core.node.busy.compute.schedulable"])
		})
		t.Run("a RETIRED tombstone refuses capacity writes and records, naming it", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "set-node-resource-capacity", obj{"nodename": "idle-retired", "resource_request": obj{"cpu": 1}, "delta": true, "incr": true})
				require.Equal(t, "compute: set-node-resource-capacity: node idle-retired: failed_precondition: node is RETIRED: the tombstone of a retired node takes no capacity write; a new host takes a new node name", line)
				line = env.Fail(t, bin, "set-node-resource-info", obj{"nodename": "idle-retired", "capacity": obj{"cpu_millis": 1000, "memory_bytes": gib}, "usage": obj{"cpu_millis": 0, "memory_bytes": 0}})
				require.Contains(t, line, "failed_precondition: node is RETIRED: the tombstone of a retired node takes no record")
				line = env.Fail(t, bin, "set-node-resource-usage", obj{"nodename": "idle-retired", "resource_request": obj{"cpu": 1}, "delta": true, "incr": true})
				require.Equal(t, "compute: set-node-resource-usage: node idle-retired: failed_precondition: node is RETIRED: the tombstone takes no growth, the write would add 1000 to cpu_millis", line)
			})
		})
	})
}

func TestComputeRollbackRefusesALedgerItNeverAnswered(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 10, "10G")
		for _, c := range []struct {
			name   string
			ledger obj
			want   string
		}{
			{"a key that is not one of compute's usage components", obj{"cpu_millis": 1, "junk": 1},
				"isolation_ledger: junk is not a compute usage component (cpu_millis, memory_bytes)"},
			{"an amount at the largest int64", obj{"cpu_millis": int64(9223372036854775807)},
				"isolation_ledger: cpu_millis is 9223372036854775807, above 2^53 (9007199254740992)"},
			{"an amount one past 2^53", obj{"memory_bytes": int64(1<<53 + 1)},
				"isolation_ledger: memory_bytes is 9007199254740993, above 2^53 (9007199254740992)"},
			{"an amount beyond int64", obj{"memory_bytes": json.Number("99999999999999999999")},
				"isolation_ledger: want an object of integers from 0 to 2^53 (9007199254740992), as set-node-resource-usage answered it"},
		} {
			t.Run(c.name+" is refused naming the key and the limit, and nothing is written", func(t *testing.T) {
				unchanged(t, env, func() {
					line := env.Fail(t, bin, "set-node-resource-usage", obj{"nodename": "n1",
						"resource": obj{"cpu_millis": 0, "memory_bytes": 0, "isolation_ledger": c.ledger}, "delta": false})
					require.Equal(t, "compute: set-node-resource-usage: node n1: invalid_argument: "+c.want, line)
				})
			})
		}
		t.Run("a ledger of both components at 2^53 is what a rollback may carry, and it is restored", func(t *testing.T) {
			usageWrite(t, env, obj{"nodename": "n1", "resource": obj{"cpu_millis": 0, "memory_bytes": 0,
				"isolation_ledger": obj{"cpu_millis": int64(1 << 53), "memory_bytes": int64(1 << 53)}}, "delta": false})
			require.Equal(t, map[string]amount{"compute": {1 << 53, 1 << 53}}, released(t, env, "n1"))
		})
	})
}

func TestComputeUndoRefusesAnOvercommitVersionOutOfRange(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "c1", 16, "64G")
		undo := func(node string, version any) obj {
			return obj{"nodename": node, "capacity": obj{"cpu_millis": 1, "memory_bytes": 1, "overcommit_version": version},
				"usage": obj{"cpu_millis": 0, "memory_bytes": 0}}
		}
		for _, c := range []struct {
			name    string
			version any
			want    string
		}{
			{"the largest int64", int64(9223372036854775807), "capacity: overcommit_version 9223372036854775807 is out of range: want 0 to 2^53 (9007199254740992)"},
			{"one past 2^53", int64(1<<53 + 1), "capacity: overcommit_version 9007199254740993 is out of range: want 0 to 2^53 (9007199254740992)"},
			{"a negative number", -1, "capacity: overcommit_version -1 is out of range: want 0 to 2^53 (9007199254740992)"},
		} {
			t.Run("a version of "+c.name+" is refused naming the limit, on a new node and a known one, and nothing is written", func(t *testing.T) {
				unchanged(t, env, func() {
					for _, node := range []string{"c5", "c1"} {
						line := env.Fail(t, bin, "set-node-resource-info", undo(node, c.version))
						require.Equal(t, "compute: set-node-resource-info: node "+node+": invalid_argument: "+c.want, line)
					}
				})
			})
		}
		t.Run("a version of 2^53 is restored, and set-node refuses to advance it past 2^53", func(t *testing.T) {
			env.Call(t, bin, "set-node-resource-info", undo("c5", int64(1<<53)), nil)
			require.Equal(t, int64(1<<53), getNode(t, env, "c5").Version)
			unchanged(t, env, func() {
				line := opFail(t, env, 4, "overcommit", "set-node", "c5", "--cpu", "2000")
				require.Equal(t, "compute: overcommit set-node: failed_precondition: node c5 compute record: overcommit version 9007199254740992 is at its limit, 2^53: it cannot advance", line)
			})
		})
	})
}

// core's RemoveNode undoes a removal with what get-node-resource-info
// answered before it; for a node compute has no record of that is null,
// and restoring it is restoring no record (see the storage test of the
// same name).
func TestComputeUndoOfARemoveNodeOfANodeWithoutARecordRestoresNothing(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		raw := env.Call(t, bin, "get-node-resource-info", obj{"nodename": "ghost", "workloads_resource": []any{}}, nil)
		require.Equal(t, "null", string(raw))
		env.Call(t, bin, "remove-node", obj{"nodename": "ghost"}, nil)
		before := env.Dump(t)

		t.Run("the undo with capacity and usage null succeeds and writes nothing", func(t *testing.T) {
			raw := env.Call(t, bin, "set-node-resource-info", obj{"nodename": "ghost", "capacity": nil, "usage": nil}, nil)
			require.JSONEq(t, `{}`, string(raw))
			require.Equal(t, before, env.Dump(t))
			raw = env.Call(t, bin, "get-node-resource-info", obj{"nodename": "ghost", "workloads_resource": []any{}}, nil)
			require.Equal(t, "null", string(raw))
		})
		t.Run("the node can still be added afterwards", func(t *testing.T) {
			addNode(t, env, "ghost", 4, "8G")
		})
	})
}

package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// schedulability is the part of `nodes get` that says whether the node may
// take new work.
type schedulability struct {
	Status      string   `json:"status"`
	Schedulable bool     `json:"schedulable"`
	Reasons     []string `json:"unschedulable_reasons"`
	Version     int64    `json:"registration_version"`
}

func schedOf(t *testing.T, env *testenv.Env, node string) schedulability {
	t.Helper()
	var s schedulability
	env.OpOK(t, "storage", &s, "nodes", "get", node)
	return s
}

// logLines reads the plugin's log.file, one JSON object a line.
func logLines(t *testing.T, env *testenv.Env) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Dir, "plugin.log"))
	require.NoError(t, err)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func TestSchedulable(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "ok", standardNode)
		addNode(t, env, "clock", standardNode)
		addNode(t, env, "tight", standardNode)
		addNode(t, env, "drained", standardNode)
		heartbeat(t, env, "clock", procRoot(t, "b1", 8<<20), "--ttl", "1m", "--clock-sync", "UNSYNCHRONIZED", "--clock-max-error", "16s")
		heartbeat(t, env, "tight", procRoot(t, "b2", 4<<10), "--ttl", "1m")
		nodeOp(t, env, "drain", "drained")

		t.Run("a ready node is schedulable with no reasons", func(t *testing.T) {
			require.Equal(t, schedulability{Status: "READY", Schedulable: true, Reasons: []string{}, Version: 1}, schedOf(t, env, "ok"))
		})
		t.Run("a node whose clock exceeds tolerance is READY but not schedulable, and says why", func(t *testing.T) {
			s := schedOf(t, env, "clock")
			require.Equal(t, "READY", s.Status)
			require.False(t, s.Schedulable)
			require.Equal(t, []string{"node clock exceeds tolerance: UNSYNCHRONIZED, max error 16s > 500ms"}, s.Reasons)
		})
		t.Run("a node short of memory says since when", func(t *testing.T) {
			s := schedOf(t, env, "tight")
			require.Equal(t, "READY", s.Status)
			require.False(t, s.Schedulable)
			require.Len(t, s.Reasons, 1)
			require.True(t, strings.HasPrefix(s.Reasons[0], "node memory is tight since "), s.Reasons[0])
			_, err := time.Parse(time.RFC3339, strings.TrimPrefix(s.Reasons[0], "node memory is tight since "))
			require.NoError(t, err)
		})
		t.Run("a drained node says drained", func(t *testing.T) {
			s := schedOf(t, env, "drained")
			require.Equal(t, "DRAINED", s.Status)
			require.Equal(t, []string{"node is drained"}, s.Reasons)
		})
		t.Run("nodes list shows the same", func(t *testing.T) {
			var out struct {
				Nodes []struct {
					NodeID string `json:"node_id"`
					schedulability
				} `json:"nodes"`
			}
			env.OpOK(t, "storage", &out, "nodes", "list")
			got := map[string]bool{}
			for _, n := range out.Nodes {
				got[n.NodeID] = n.Schedulable
			}
			require.Equal(t, map[string]bool{"ok": true, "clock": false, "tight": false, "drained": false}, got)
		})
		t.Run("calculate-deploy names the reason it refuses", func(t *testing.T) {
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "clock", "deploy_count": 1, "workload_resource_request": smallReq})
			require.Equal(t, "storage: calculate-deploy: node clock: failed_precondition: node clock exceeds tolerance: UNSYNCHRONIZED, max error 16s > 500ms", line)
		})
		t.Run("get-most-idle-node answers the first placeable node", func(t *testing.T) {
			var got struct {
				Nodename string `json:"nodename"`
				Priority int    `json:"priority"`
			}
			env.Call(t, "storage", "get-most-idle-node", obj{"nodenames": []string{"drained", "clock", "ok", "tight"}}, &got)
			require.Equal(t, "ok", got.Nodename)
			require.Equal(t, 102, got.Priority, "above core's cpumem (100), which would answer a refused node")
		})
		t.Run("get-most-idle-node fails naming why each node was skipped when none is placeable", func(t *testing.T) {
			line := env.Fail(t, "storage", "get-most-idle-node", obj{"nodenames": []string{"drained", "clock"}})
			require.Equal(t, "storage: get-most-idle-node: failed_precondition: no node may take new work: drained (node is draining), clock (node clock exceeds tolerance: UNSYNCHRONIZED, max error 16s > 500ms)", line)
		})
		t.Run("get-metrics of a node that cannot take work reports no capacity and node_schedulable 0", func(t *testing.T) {
			var got []struct {
				Name   string   `json:"name"`
				Labels []string `json:"labels"`
				Key    string   `json:"key"`
				Value  string   `json:"value"`
			}
			env.Call(t, "storage", "get-metrics", obj{"nodes": []obj{{"podname": "p", "nodename": "drained"}, {"podname": "p", "nodename": "ok"}}}, &got)
			values := map[string]string{}
			for _, m := range got {
				values[m.Key] = m.Value
				if m.Name == "node_schedulable" {
					require.Len(t, m.Labels, 2, "as many label values as the description declares")
				}
			}
			require.Equal(t, "0", values["core.node.drained.storage.capacity"])
			require.Equal(t, "0", values["core.node.drained.storage.volume._data0.capacity"])
			require.Equal(t, "0", values["core.node.drained.storage.schedulable"])
			require.Equal(t, "4398046511104", values["core.node.ok.storage.capacity"], "2 TiB of volumes and the 2 TiB budget")
			require.Equal(t, "1", values["core.node.ok.storage.schedulable"])
			require.Contains(t, got, struct {
				Name   string   `json:"name"`
				Labels []string `json:"labels"`
				Key    string   `json:"key"`
				Value  string   `json:"value"`
			}{"node_schedulable", []string{"p", "drained"}, "core.node.drained.storage.schedulable", "0"})
		})
	}, testenv.WithConfig("log:\n  file: plugin.log"))
}

func TestCapacityQueryLogsEachNodeLeftOut(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "ok", standardNode)
		addNode(t, env, "drained", standardNode)
		addNode(t, env, "small", obj{"volumes": []string{"/data0:1G"}})
		nodeOp(t, env, "drain", "drained")
		out := capacity(t, env, []string{"ok", "drained", "small", "ghost"}, obj{"volumes": []string{"AUTO:/d:rw:10G"}})
		require.Equal(t, []string{"ok"}, keysOf(out.Nodes))
		why := map[string]string{}
		for _, l := range logLines(t, env) {
			if l["msg"] == "node left out" && l["verb"] == "get-nodes-deploy-capacity" {
				why[l["node"].(string)] = l["reason"].(string)
			}
		}
		require.Equal(t, map[string]string{
			"drained": "node is draining",
			"small":   "the node has no room for one workload of the request",
			"ghost":   "the storage plugin has no record of the node",
		}, why)
	}, testenv.WithConfig("log:\n  file: plugin.log"))
}

func keysOf[V any](m map[string]V) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRetiredTombstoneRefusesRecords(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		nodeOp(t, env, "drain", "n1")
		require.Equal(t, "RETIRED", nodeOp(t, env, "retire", "n1").Status)

		for _, c := range []struct {
			name, verb string
			req        obj
			what       string
		}{
			{"a capacity write is refused", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"storage": "1T"}, "delta": true, "incr": true}, "capacity write"},
			{"even a capacity decrease is refused", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"storage": "1T"}, "delta": true, "incr": false}, "capacity write"},
			{"set-node-resource-info is refused", "set-node-resource-info", obj{"nodename": "n1", "capacity": obj{"storage": gib}, "usage": obj{}}, "record"},
			{"a usage growth is refused", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"storage": "1G"}, "delta": true, "incr": true}, ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				before := env.Dump(t)
				line := env.Fail(t, "storage", c.verb, c.req)
				require.Contains(t, line, "node n1: failed_precondition: node is RETIRED")
				if c.what != "" {
					require.Contains(t, line, "the tombstone of a retired node takes no "+c.what)
				}
				require.Equal(t, before, env.Dump(t))
			})
		}
		t.Run("add-node of the name after core removes it is refused", func(t *testing.T) {
			env.Call(t, "storage", "remove-node", obj{"nodename": "n1"}, nil)
			before := env.Dump(t)
			line := env.Fail(t, "storage", "set-node-resource-info", obj{"nodename": "n1", "capacity": obj{"storage": gib}, "usage": obj{}})
			require.Contains(t, line, "node is RETIRED")
			line = env.Fail(t, "storage", "add-node", obj{"nodename": "n1", "resource": standardNode})
			require.Contains(t, line, "node is RETIRED")
			// a usage write of nothing is no growth, but would create the
			// record again
			line = env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource": obj{"volumes": obj{}, "disks": []any{}, "storage": 0}, "delta": false})
			require.Contains(t, line, "node is RETIRED")
			require.Contains(t, line, "the tombstone of a retired node takes no record")
			require.Equal(t, before, env.Dump(t))
		})
	})
}

func TestRetiredIsolatedNodeStillTakesDecreases(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		old := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:10G"}})
		commit(t, env, "n1", old.WorkloadsResource, true)
		heartbeat(t, env, "n1", procRoot(t, "b", 8<<20), "--ttl", "1s")
		require.Eventually(t, func() bool { return nodeGet(t, env, "n1").Status == "UNAVAILABLE" }, 10*time.Second, 200*time.Millisecond)
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
		nodeOp(t, env, "retire", "n1")
		removeWorkloads(t, env, "n1", old.WorkloadsResource...)
		require.NotContains(t, nodeGet(t, env, "n1").Released, "storage", "core's cleanup drew the ledger down")
		require.Equal(t, "RETIRED", nodeGet(t, env, "n1").Status)
	})
}

func TestNodesThatAlreadyExist(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		// A record written by the upstream plugin, or before the registry
		// existed: the record, no registration.
		addNode(t, env, "template", standardNode)
		record := env.Dump(t)["/resource/storage/template"]
		env.Put(t, "/resource/storage/legacy", record)
		env.Put(t, "/resource/storage/legacy2", record)
		require.NotContains(t, env.Dump(t), "/nodes/legacy")

		t.Run("it is listed, unregistered at version 0, and placeable", func(t *testing.T) {
			var out struct {
				Nodes []struct {
					NodeID string `json:"node_id"`
					schedulability
				} `json:"nodes"`
			}
			env.OpOK(t, "storage", &out, "nodes", "list")
			require.Len(t, out.Nodes, 3)
			require.Equal(t, "legacy", out.Nodes[0].NodeID)
			require.Equal(t, schedulability{Status: "READY", Schedulable: true, Reasons: []string{}, Version: 0}, out.Nodes[0].schedulability)
			require.Equal(t, int64(0), schedOf(t, env, "legacy").Version)
			require.True(t, placeable(t, env, "legacy"))
		})
		t.Run("reading it writes nothing", func(t *testing.T) {
			require.NotContains(t, env.Dump(t), "/nodes/legacy")
		})
		t.Run("it can be drained: the drain creates its registration", func(t *testing.T) {
			r := nodeOp(t, env, "drain", "legacy")
			require.True(t, r.Drain)
			require.Equal(t, int64(1), r.Version)
			require.Contains(t, env.Dump(t), "/nodes/legacy")
			require.False(t, placeable(t, env, "legacy"))
		})
		t.Run("and retired", func(t *testing.T) {
			require.Equal(t, "RETIRED", nodeOp(t, env, "retire", "legacy").Status)
		})
		t.Run("it can be isolated", func(t *testing.T) {
			var out struct {
				Node registration `json:"node"`
			}
			env.OpOK(t, "storage", &out, "nodes", "isolate", "legacy2")
			require.True(t, out.Node.Isolated)
			require.Equal(t, int64(1), out.Node.Version)
		})
		t.Run("a heartbeat of a name no plugin knows is not_found and writes nothing", func(t *testing.T) {
			line := opFails(t, env, 3, "nodes", "heartbeat", "phantom", "--proc-root", t.TempDir(), "--clock-sync", "SYNCHRONIZED")
			require.Contains(t, line, "not_found: node phantom is not registered and no plugin has a record of it")
		})
		t.Run("--register registers it", func(t *testing.T) {
			r := nodeOp(t, env, "heartbeat", "phantom", "--register", "--proc-root", t.TempDir(), "--clock-sync", "SYNCHRONIZED")
			require.Equal(t, "READY", r.Status)
			require.Equal(t, "READY", nodeGet(t, env, "phantom").Status)
		})
		t.Run("nodes forget deletes the registration of a name no plugin has a record of", func(t *testing.T) {
			r := nodeOp(t, env, "forget", "phantom")
			require.Equal(t, "phantom", r.NodeID)
			require.Equal(t, 3, env.Op(t, "storage", "nodes", "get", "phantom").Code)
			require.NotContains(t, env.Dump(t), "/nodes/phantom")
		})
		t.Run("nodes forget refuses a node with a record, and a tombstone", func(t *testing.T) {
			line := opFails(t, env, 4, "nodes", "forget", "template")
			require.Contains(t, line, "failed_precondition: node template is READY: the storage plugin still has a record of it")
			env.Call(t, "storage", "remove-node", obj{"nodename": "legacy"}, nil)
			line = opFails(t, env, 4, "nodes", "forget", "legacy")
			require.Contains(t, line, "failed_precondition: node legacy is RETIRED: a retired node's tombstone stays for ever")
			opFails(t, env, 3, "nodes", "forget", "ghost")
		})
		t.Run("a heartbeat of a node with a record but no registration registers it", func(t *testing.T) {
			env.Put(t, "/resource/storage/legacy3", record)
			r := nodeOp(t, env, "heartbeat", "legacy3", "--proc-root", t.TempDir(), "--clock-sync", "SYNCHRONIZED")
			require.True(t, r.Session.Live)
		})
	})
}

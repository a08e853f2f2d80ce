package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store/storetest"
)

// The engine's verbs, in process, through the same Main the fuzzer and the
// daemon drive, on both stores. The built binaries' behaviour tests live
// beside the mains (cmd/storage, cmd/compute); these find a broken rule in a
// second.

var inProcessPrefix atomic.Int64

// inProcess is one store configured for in-process calls.
type inProcess struct{ config string }

// stores runs f on a fresh embedded store and on a fresh prefix of the
// shared etcd server.
func stores(t *testing.T, f func(t *testing.T, s inProcess)) {
	for _, kind := range []string{"embedded", "etcd"} {
		t.Run("on the "+kind+" store", func(t *testing.T) {
			dir := t.TempDir()
			yaml := fmt.Sprintf("embedded:\n  path: %q\n", filepath.Join(dir, "store.db"))
			if kind == "etcd" {
				yaml = fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: \"/engine-%d-%d\"\n", storetest.SharedEtcd(t).Endpoint, os.Getpid(), inProcessPrefix.Add(1))
			}
			config := filepath.Join(dir, "plugins.yaml")
			require.NoError(t, os.WriteFile(config, []byte(yaml), 0o644))
			f(t, inProcess{config: config})
		})
	}
}

// call runs a verb and requires success with nothing on stderr.
func (s inProcess) call(t *testing.T, bin, verb, req string) string {
	t.Helper()
	code, stdout, stderr := s.run(bin, verb, req)
	require.Equal(t, 0, code, "%s %s: %s", bin, verb, stderr)
	require.Empty(t, stderr)
	return stdout
}

// fail runs a verb and requires the plugin failure: exit 128, one line.
func (s inProcess) fail(t *testing.T, bin, verb, req string) string {
	t.Helper()
	code, stdout, stderr := s.run(bin, verb, req)
	require.Equal(t, PluginExitCode, code, "%s %s answered %s", bin, verb, stdout)
	require.Empty(t, stdout)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	return strings.TrimSpace(stderr)
}

func (s inProcess) run(bin, verb, req string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Main(bin, []string{"--config", s.config, verb}, strings.NewReader(req), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestEngineVerbsInProcess(t *testing.T) {
	capacity := func(cpu, mem int64) string {
		return fmt.Sprintf(`{"cpu_millis":%d,"memory_bytes":%d,"cpu_ratio":1000,"memory_ratio":1000,"schedulable_cpu_millis":%d,"schedulable_memory_bytes":%d,"cpu_ratio_source":"DEFAULT","memory_ratio_source":"DEFAULT","overcommit_version":0}`, cpu, mem, cpu, mem)
	}
	const gib = 1 << 30
	stores(t, func(t *testing.T, s inProcess) {
		t.Run("compute answers every verb", func(t *testing.T) {
			for _, c := range []struct{ verb, req, want string }{
				{"name", "", `"compute"`},
				{"get-node-resource-info", `{"nodename":"c1"}`, `null`},
				{"add-node", `{"nodename":"c1","resource":{"cpu":4,"memory":"8G"}}`, `{"capacity":` + capacity(4000, 8*gib) + `,"usage":{"cpu_millis":0,"memory_bytes":0}}`},
				{"get-nodes-deploy-capacity", `{"nodenames":["c1","unknown"],"workload_resource":{"cpu":1,"memory":"1G"}}`, `{"nodes_deploy_capacity_map":{"c1":{"capacity":4,"usage":0,"rate":0.25,"weight":1}},"total":4}`},
				{"set-node-resource-capacity", `{"nodename":"c1","resource_request":{"cpu":8},"delta":false}`, `{"before":` + capacity(4000, 8*gib) + `,"after":` + capacity(8000, 8*gib) + `}`},
				{"set-node-resource-usage", `{"nodename":"c1","resource_request":{"cpu":1,"memory":"1G"},"delta":true,"incr":true}`, `{"before":{"cpu_millis":0,"memory_bytes":0},"after":{"cpu_millis":1000,"memory_bytes":1073741824}}`},
				{"get-node-resource-info", `{"nodename":"c1","workloads_resource":[{"cpu_request_millis":1000,"cpu_limit_millis":1000,"memory_request":1073741824,"memory_limit":1073741824}]}`,
					`{"capacity":` + capacity(8000, 8*gib) + `,"usage":{"cpu_millis":1000,"memory_bytes":1073741824},"diffs":[]}`},
				{"get-most-idle-node", `{"nodenames":["unknown","c1"]}`, `{"nodename":"c1","priority":1}`},
				{"calculate-deploy", `{"nodename":"c1","deploy_count":1,"workload_resource_request":{"cpu":1,"memory":"1G"}}`,
					`{"engines_params":[{}],"workloads_resource":[{"cpu_request_millis":1000,"cpu_limit_millis":1000,"memory_request":1073741824,"memory_limit":1073741824}]}`},
				{"calculate-realloc", `{"nodename":"c1","workload_resource":{"cpu_request_millis":1000,"cpu_limit_millis":1000,"memory_request":0,"memory_limit":0},"workload_resource_request":{"cpu":1}}`,
					`{"engine_params":{},"delta_resource":{"cpu_request_millis":1000,"cpu_limit_millis":1000,"memory_request":0,"memory_limit":0},"workload_resource":{"cpu_request_millis":2000,"cpu_limit_millis":2000,"memory_request":0,"memory_limit":0}}`},
				{"calculate-remap", `{"nodename":"c1","workloads_resource":{}}`, `{"engine_params_map":{}}`},
				{"fix-node-resource", `{"nodename":"c1","workloads_resource":[]}`,
					`{"capacity":` + capacity(8000, 8*gib) + `,"usage":{"cpu_millis":0,"memory_bytes":0},"diffs":["cpu: stored usage 1000 millicores, workloads hold 0","memory: stored usage 1073741824 bytes, workloads hold 0"]}`},
				{"set-node-resource-info", `{"nodename":"c1","capacity":{"cpu_millis":2000,"memory_bytes":1024},"usage":{"cpu_millis":500,"memory_bytes":0}}`, `{}`},
				{"get-metrics", `{"podname":"p","nodename":"c1"}`, `[
					{"name":"compute_cpu_schedulable_millis","labels":["p","c1"],"key":"core.node.c1.compute.cpu.schedulable_millis","value":"2000"},
					{"name":"compute_cpu_used_millis","labels":["p","c1"],"key":"core.node.c1.compute.cpu.used_millis","value":"500"},
					{"name":"compute_memory_schedulable_bytes","labels":["p","c1"],"key":"core.node.c1.compute.memory.schedulable_bytes","value":"1024"},
					{"name":"compute_memory_used_bytes","labels":["p","c1"],"key":"core.node.c1.compute.memory.used_bytes","value":"0"},
					{"name":"compute_cpu_ratio","labels":["p","c1"],"key":"core.node.c1.compute.cpu.ratio","value":"1000"},
					{"name":"compute_memory_ratio","labels":["p","c1"],"key":"core.node.c1.compute.memory.ratio","value":"1000"},
					{"name":"node_schedulable","labels":["p","c1"],"key":"core.node.c1.compute.schedulable","value":"1"}]`},
				{"remove-node", `{"nodename":"c1"}`, `{}`},
				{"get-node-resource-info", `{"nodename":"c1"}`, `null`},
				{"remove-node", `{"nodename":"c1"}`, `{}`},
			} {
				require.JSONEq(t, c.want, s.call(t, "compute", c.verb, c.req), "%s %s", c.verb, c.req)
			}
		})

		t.Run("storage answers every verb", func(t *testing.T) {
			add := s.call(t, "storage", "add-node", `{"nodename":"s1","resource":{"volumes":["/data0:1G"],"storage":"1G"}}`)
			require.JSONEq(t, `{"capacity":{"volumes":{"/data0":1073741824},"disks":[],"storage":2147483648},"usage":{"volumes":{"/data0":0},"disks":[],"storage":0}}`, add)
			require.JSONEq(t, `{"nodes_deploy_capacity_map":{"s1":{"capacity":2,"usage":0,"rate":0.5,"weight":1}},"total":2}`,
				s.call(t, "storage", "get-nodes-deploy-capacity", `{"nodenames":["s1"],"workload_resource":{"volumes":["AUTO:/data:rw:512M"]}}`))
			deploy := s.call(t, "storage", "calculate-deploy", `{"nodename":"s1","deploy_count":1,"workload_resource_request":{"volumes":["AUTO:/data:rw:512M"]}}`)
			require.Contains(t, deploy, `"volumes":["/data0:/data:rw:536870912"]`)
			require.JSONEq(t, `{"before":{"volumes":{"/data0":0},"disks":[],"storage":0},"after":{"volumes":{"/data0":536870912},"disks":[],"storage":536870912}}`,
				s.call(t, "storage", "set-node-resource-usage", `{"nodename":"s1","resource_request":{"volumes":["/data0:512M"]},"delta":true,"incr":true}`))
			require.JSONEq(t, `{"engine_params_map":{}}`, s.call(t, "storage", "calculate-remap", `{"nodename":"s1","workloads_resource":{}}`))
			require.JSONEq(t, `{"nodename":"s1","priority":1}`, s.call(t, "storage", "get-most-idle-node", `{"nodenames":["s1"]}`))
			require.Contains(t, s.call(t, "storage", "get-metrics", `{"podname":"p","nodename":"s1"}`), `"key":"core.node.s1.storage.used","value":"536870912"`)
			require.JSONEq(t, `{}`, s.call(t, "storage", "remove-node", `{"nodename":"s1"}`))
		})

		t.Run("the change a set carries follows the precedence rule", func(t *testing.T) {
			s.call(t, "compute", "add-node", `{"nodename":"p1","resource":{"cpu":4,"memory":"1G"}}`)
			require.Contains(t, s.call(t, "compute", "set-node-resource-capacity",
				`{"nodename":"p1","resource":{"cpu_millis":1000,"memory_bytes":1},"resource_request":{"cpu":2},"delta":false}`),
				`"after":{"cpu_millis":2000,"memory_bytes":1073741824`, "resource_request wins over resource")
			require.Contains(t, s.call(t, "compute", "set-node-resource-capacity",
				`{"nodename":"p1","resource":{"cpu_millis":3000,"memory_bytes":1024},"delta":false}`),
				`"after":{"cpu_millis":3000,"memory_bytes":1024`, "resource is the stored form")
			require.Contains(t, s.fail(t, "compute", "set-node-resource-capacity", `{"nodename":"p1","resource":{"cpu":2},"delta":false}`),
				`compute: set-node-resource-capacity: node p1: invalid_argument: resource: not a stored compute resource`, "resource in request form is refused")
			require.JSONEq(t, `{"before":{"cpu_millis":0,"memory_bytes":0},"after":{"cpu_millis":1500,"memory_bytes":0}}`,
				s.call(t, "compute", "set-node-resource-usage", `{"nodename":"p1","workloads_resource":[{"cpu_request_millis":1500,"cpu_limit_millis":1500,"memory_request":0,"memory_limit":0}],"delta":true,"incr":true}`),
				"with neither, the workloads' sum is the change")
		})

		t.Run("unknown nodes and bad names", func(t *testing.T) {
			require.Equal(t, "compute: fix-node-resource: node ghost: not_found: the compute plugin has no record of this node",
				s.fail(t, "compute", "fix-node-resource", `{"nodename":"ghost","workloads_resource":[]}`))
			require.Equal(t, "storage: add-node: invalid_argument: nodename is missing", s.fail(t, "storage", "add-node", `{"resource":{}}`))
			require.Contains(t, s.fail(t, "storage", "get-nodes-deploy-capacity", `{"nodenames":["a/b"]}`), "invalid_argument: nodenames: node name")
			require.JSONEq(t, `{"nodes_deploy_capacity_map":{},"total":0}`,
				s.call(t, "storage", "get-nodes-deploy-capacity", `{"nodenames":["ghost"],"workload_resource":{"volumes":["AUTO:/data:rw:1G"]}}`))
		})
	})
}

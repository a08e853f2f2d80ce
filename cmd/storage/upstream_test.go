package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// A cluster switching from the upstream resource-storage plugin keeps core's
// stored workload resources and its node records (testdata/upstream). Every
// verb core calls after the switch must read them: info, realloc, usage
// decreases as workloads are removed and increases as they come back.

// upstreamFixture reads the node record and the workloads as upstream
// stored them.
func upstreamFixture(t *testing.T) (string, map[string]json.RawMessage) {
	t.Helper()
	node, err := os.ReadFile(filepath.Join("testdata", "upstream", "node.json"))
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join("testdata", "upstream", "workloads.json"))
	require.NoError(t, err)
	var ws map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &ws))
	require.Len(t, ws, 6)
	return string(node), ws
}

// upstreamNames lists the fixture's workloads in a fixed order.
var upstreamNames = []string{"data", "logs", "cfg", "mono", "tmp", "shared"}

func listOf(ws map[string]json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(upstreamNames))
	for _, n := range upstreamNames {
		out = append(out, ws[n])
	}
	return out
}

func TestSwitchingFromUpstreamReadsItsRecordsAndWorkloads(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		record, ws := upstreamFixture(t)
		env.Put(t, "/resource/storage/n1", record)

		t.Run("info reads the record and the workloads; only the bindings upstream never counted differ", func(t *testing.T) {
			got := info(t, env, "n1", listOf(ws)...)
			require.Equal(t, map[string]int64{"/data0": 100 * gib, "/data1": 60 * gib, "/data2": 500 * gib}, got.Usage.Volumes)
			require.Equal(t, 560*gib, got.Usage.Storage)
			require.Equal(t, []string{"volume /data1: stored usage holds 0 bindings charged no bytes, workloads hold 1"}, got.Diffs)
		})

		realloc := func(t *testing.T, name string, request obj) reallocAnswer {
			t.Helper()
			var r reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": ws[name], "workload_resource_request": request}, &r)
			for _, v := range r.EngineParams.Volumes {
				require.False(t, strings.HasPrefix(v, "AUTO:"), "the engine is handed %q", v)
			}
			commit(t, env, "n1", []json.RawMessage{r.DeltaResource}, true)
			ws[name] = r.WorkloadResource
			return r
		}
		t.Run("a realloc of a rowo binding finds its plan and keeps its device", func(t *testing.T) {
			r := realloc(t, "logs", obj{"volumes": []string{"AUTO:/logs:rwo:10G"}})
			require.Equal(t, []string{"/data1:/logs:rowo:64424509440"}, r.EngineParams.Volumes)
			require.False(t, r.EngineParams.VolumeChanged)
			require.Equal(t, map[string]map[string]int64{"AUTO:/logs:orw:64424509440:0:0:0:0": {"/data1": 60 * gib}},
				decodeWorkload(t, r.WorkloadResource).VolumePlanRequest)
			require.Equal(t, []disk{}, decodeWorkload(t, r.WorkloadResource).DisksRequest, "the empty-device entry is dropped")
		})
		t.Run("a realloc of an ro binding, written as upstream writes it, finds its plan", func(t *testing.T) {
			r := realloc(t, "cfg", obj{"volumes": []string{"AUTO:/cfg:ro:1G"}})
			require.Equal(t, []string{"/data1:/cfg:ro:11811160064"}, r.EngineParams.Volumes)
			require.False(t, r.EngineParams.VolumeChanged)
		})
		t.Run("a storage-only realloc of a monopoly pair carries its plan", func(t *testing.T) {
			r := realloc(t, "mono", obj{"storage": "1G"})
			require.ElementsMatch(t, []string{"/data2:/m1:rw:134217728000", "/data2:/m2:rw:402653184000"}, r.EngineParams.Volumes)
			require.False(t, r.EngineParams.VolumeChanged)
		})
		t.Run("an IO quota realloc charges the disk upstream charged", func(t *testing.T) {
			r := realloc(t, "data", obj{"volumes": []string{"AUTO:/data:rw:0:50:0:0:0"}})
			require.Equal(t, map[string]string{"/dev/vda": "150:100:0:0"}, r.EngineParams.IOPSOptions)
		})
		t.Run("the node agrees with the reallocated workloads, apart from the uncounted binding", func(t *testing.T) {
			got := info(t, env, "n1", listOf(ws)...)
			require.Equal(t, map[string]int64{"/data0": 100 * gib, "/data1": 71 * gib, "/data2": 500 * gib}, got.Usage.Volumes)
			require.Equal(t, []string{"volume /data1: stored usage holds 0 bindings charged no bytes, workloads hold 1"}, got.Diffs)
			require.Equal(t, []disk{{Device: "/dev/vda", Mounts: []string{"/data0"}, ReadIOPS: 160, WriteIOPS: 110}}, got.Usage.Disks)
		})
		t.Run("fix-node-resource records it", func(t *testing.T) {
			var fixed nodeInfo
			env.Call(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": listOf(ws)}, &fixed)
			require.Len(t, fixed.Diffs, 1)
			require.Equal(t, []string{}, info(t, env, "n1", listOf(ws)...).Diffs)
		})
		t.Run("core removing every workload brings the usage to zero", func(t *testing.T) {
			for _, n := range upstreamNames {
				commit(t, env, "n1", []json.RawMessage{ws[n]}, false)
			}
			got := info(t, env, "n1")
			require.Equal(t, map[string]int64{"/data0": 0, "/data1": 0, "/data2": 0}, got.Usage.Volumes)
			require.Zero(t, got.Usage.Storage)
			require.Equal(t, []disk{{Device: "/dev/vda", Mounts: []string{"/data0"}}}, got.Usage.Disks)
			require.Equal(t, []string{}, got.Diffs)
		})
		t.Run("and adding them back restores it", func(t *testing.T) {
			commit(t, env, "n1", listOf(ws), true)
			require.Equal(t, []string{}, info(t, env, "n1", listOf(ws)...).Diffs)
		})
	})

	t.Run("the original upstream workloads are removed from the original record", func(t *testing.T) {
		testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
			record, ws := upstreamFixture(t)
			env.Put(t, "/resource/storage/n1", record)
			for _, n := range upstreamNames {
				commit(t, env, "n1", []json.RawMessage{ws[n]}, false)
			}
			got := info(t, env, "n1")
			require.Equal(t, map[string]int64{"/data0": 0, "/data1": 0, "/data2": 0}, got.Usage.Volumes)
			require.Zero(t, got.Usage.Storage)
		})
	})
}

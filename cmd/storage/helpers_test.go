package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// Sizes used throughout, in bytes.
const (
	gib int64 = 1 << 30
	tib int64 = 1 << 40
)

// obj is a JSON object literal.
type obj = map[string]any

// nodeResource is the stored capacity or usage of a storage node.
type nodeResource struct {
	Volumes map[string]int64 `json:"volumes"`
	Disks   []disk           `json:"disks"`
	Storage int64            `json:"storage"`
}

type disk struct {
	Device    string   `json:"device"`
	Mounts    []string `json:"mounts"`
	ReadIOPS  int64    `json:"read_IOPS"`
	WriteIOPS int64    `json:"write_IOPS"`
	ReadBPS   int64    `json:"read_bps"`
	WriteBPS  int64    `json:"write_bps"`
}

type nodeInfo struct {
	Capacity nodeResource `json:"capacity"`
	Usage    nodeResource `json:"usage"`
	Diffs    []string     `json:"diffs"`
}

type beforeAfter struct {
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

type workload struct {
	VolumesRequest    []string                    `json:"volumes_request"`
	VolumesLimit      []string                    `json:"volumes_limit"`
	VolumePlanRequest map[string]map[string]int64 `json:"volume_plan_request"`
	VolumePlanLimit   map[string]map[string]int64 `json:"volume_plan_limit"`
	StorageRequest    int64                       `json:"storage_request"`
	StorageLimit      int64                       `json:"storage_limit"`
	DisksRequest      []disk                      `json:"disks_request"`
	DisksLimit        []disk                      `json:"disks_limit"`
}

type engineParams struct {
	Volumes       []string          `json:"volumes"`
	VolumeChanged bool              `json:"volume_changed"`
	Storage       int64             `json:"storage"`
	IOPSOptions   map[string]string `json:"iops_options"`
}

type deployAnswer struct {
	EnginesParams     []engineParams    `json:"engines_params"`
	WorkloadsResource []json.RawMessage `json:"workloads_resource"`
}

type reallocAnswer struct {
	EngineParams     engineParams    `json:"engine_params"`
	DeltaResource    json.RawMessage `json:"delta_resource"`
	WorkloadResource json.RawMessage `json:"workload_resource"`
}

type capacityAnswer struct {
	Nodes map[string]struct {
		Capacity int     `json:"capacity"`
		Usage    float64 `json:"usage"`
		Rate     float64 `json:"rate"`
		Weight   float64 `json:"weight"`
	} `json:"nodes_deploy_capacity_map"`
	Total int `json:"total"`
}

// standardNode is the node of the add-node example in docs/storage.md: two 1 TiB volumes, one
// disk covering / and /data0, a 2 TiB flat budget.
var standardNode = obj{
	"volumes": []string{"/data0:1T", "/data1:1T"},
	"disks":   []string{"/dev/vda:/,/data0:1000:1000:1G:1G"},
	"storage": "2T",
}

func addNode(t *testing.T, env *testenv.Env, node string, resource any) nodeInfo {
	t.Helper()
	var out nodeInfo
	env.Call(t, "storage", "add-node", obj{"nodename": node, "resource": resource}, &out)
	return out
}

func info(t *testing.T, env *testenv.Env, node string, workloads ...json.RawMessage) nodeInfo {
	t.Helper()
	if workloads == nil {
		workloads = []json.RawMessage{}
	}
	var out nodeInfo
	raw := env.Call(t, "storage", "get-node-resource-info", obj{"nodename": node, "workloads_resource": workloads}, &out)
	require.NotEqual(t, "null", string(raw), "node %s is unknown", node)
	return out
}

func deploy(t *testing.T, env *testenv.Env, node string, count int, request any) deployAnswer {
	t.Helper()
	var out deployAnswer
	env.Call(t, "storage", "calculate-deploy", obj{"nodename": node, "deploy_count": count, "workload_resource_request": request}, &out)
	require.Len(t, out.EnginesParams, count)
	require.Len(t, out.WorkloadsResource, count)
	return out
}

// commit does what core does after calculate-deploy: add the workloads'
// usage to the node.
func commit(t *testing.T, env *testenv.Env, node string, workloads []json.RawMessage, incr bool) {
	t.Helper()
	env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": node, "workloads_resource": workloads, "delta": true, "incr": incr}, nil)
}

func capacity(t *testing.T, env *testenv.Env, nodes []string, request any) capacityAnswer {
	t.Helper()
	var out capacityAnswer
	raw := env.Call(t, "storage", "get-nodes-deploy-capacity", obj{"nodenames": nodes, "workload_resource": request}, &out)
	require.NotContains(t, string(raw), `"nodes_deploy_capacity_map":null`, "core reads a null map as no constraint")
	return out
}

func decodeWorkload(t *testing.T, raw json.RawMessage) workload {
	t.Helper()
	var w workload
	require.NoError(t, json.Unmarshal(raw, &w))
	return w
}

package conformance

import (
	"bytes"
	"encoding/json"
	"sort"
	"testing"

	plugintypes "github.com/projecteru2/core/resource/plugins/types"
	"github.com/stretchr/testify/require"
)

// The stored and engine shapes core receives from the plugins
// (storage.md, overcommit.md). Answers are decoded strictly into them, so
// a misspelt or extra key fails the test.

type diskQuota struct {
	Device    string   `json:"device"`
	Mounts    []string `json:"mounts"`
	ReadIOPS  int64    `json:"read_IOPS"`
	WriteIOPS int64    `json:"write_IOPS"`
	ReadBPS   int64    `json:"read_bps"`
	WriteBPS  int64    `json:"write_bps"`
}

var diskKeys = []string{"device", "mounts", "read_IOPS", "write_IOPS", "read_bps", "write_bps"}

// storageNode is a node's storage capacity or usage.
type storageNode struct {
	Volumes map[string]int64 `json:"volumes"`
	Disks   []diskQuota      `json:"disks"`
	Storage int64            `json:"storage"`
}

// storageWorkload is a workload's stored storage resource.
type storageWorkload struct {
	VolumesRequest    []string                    `json:"volumes_request"`
	VolumesLimit      []string                    `json:"volumes_limit"`
	VolumePlanRequest map[string]map[string]int64 `json:"volume_plan_request"`
	VolumePlanLimit   map[string]map[string]int64 `json:"volume_plan_limit"`
	StorageRequest    int64                       `json:"storage_request"`
	StorageLimit      int64                       `json:"storage_limit"`
	DisksRequest      []diskQuota                 `json:"disks_request"`
	DisksLimit        []diskQuota                 `json:"disks_limit"`
}

// storageEngine is the storage plugin's engine params.
type storageEngine struct {
	Volumes       []string          `json:"volumes"`
	VolumeChanged bool              `json:"volume_changed"`
	Storage       int64             `json:"storage"`
	IOPSOptions   map[string]string `json:"iops_options"`
}

// computeNode is a node's compute capacity (with the figures in effect) or
// usage (cpu_millis and memory_bytes only).
type computeNode struct {
	CPUMillis             int64  `json:"cpu_millis"`
	MemoryBytes           int64  `json:"memory_bytes"`
	CPURatio              int64  `json:"cpu_ratio,omitempty"`
	MemoryRatio           int64  `json:"memory_ratio,omitempty"`
	SchedulableCPUMillis  int64  `json:"schedulable_cpu_millis,omitempty"`
	SchedulableMemoryByte int64  `json:"schedulable_memory_bytes,omitempty"`
	CPURatioSource        string `json:"cpu_ratio_source,omitempty"`
	MemoryRatioSource     string `json:"memory_ratio_source,omitempty"`
	OvercommitVersion     int64  `json:"overcommit_version,omitempty"`
}

var (
	computeCapacityKeys = []string{"cpu_millis", "memory_bytes", "cpu_ratio", "memory_ratio", "schedulable_cpu_millis", "schedulable_memory_bytes",
		"cpu_ratio_source", "memory_ratio_source", "overcommit_version"}
	computeUsageKeys = []string{"cpu_millis", "memory_bytes"}
)

// computeWorkload is a workload's stored compute resource.
type computeWorkload struct {
	CPURequestMillis int64 `json:"cpu_request_millis"`
	CPULimitMillis   int64 `json:"cpu_limit_millis"`
	MemoryRequest    int64 `json:"memory_request"`
	MemoryLimit      int64 `json:"memory_limit"`
}

var computeWorkloadKeys = []string{"cpu_request_millis", "cpu_limit_millis", "memory_request", "memory_limit"}

// strict decodes v (a value core decoded) into out, refusing unknown keys,
// after checking that v is an object with exactly wantKeys.
func strict(t *testing.T, v any, out any, wantKeys ...string) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		// core's named map types (RawParams) arrive here too.
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &m), "want a JSON object, got %s", raw)
		require.NotNil(t, m, "want a JSON object, got %s", raw)
	}
	require.ElementsMatch(t, wantKeys, keys(m), "keys of %s", mustJSON(t, v))
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(out), "decoding %s", raw)
}

func checkDiskKeys(t *testing.T, v any) {
	t.Helper()
	if v == nil {
		return
	}
	for _, d := range list(t, v) {
		require.ElementsMatch(t, diskKeys, keys(object(t, d)), "keys of a disk entry %s", mustJSON(t, d))
	}
}

func asStorageNode(t *testing.T, v any) storageNode {
	t.Helper()
	var n storageNode
	strict(t, v, &n, "volumes", "disks", "storage")
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustJSON(t, v)), &raw))
	checkDiskKeys(t, raw["disks"])
	if n.Volumes == nil {
		n.Volumes = map[string]int64{}
	}
	if n.Disks == nil {
		n.Disks = []diskQuota{}
	}
	return n
}

func asStorageWorkload(t *testing.T, v any) storageWorkload {
	t.Helper()
	var w storageWorkload
	strict(t, v, &w, "volumes_request", "volumes_limit", "volume_plan_request", "volume_plan_limit",
		"storage_request", "storage_limit", "disks_request", "disks_limit")
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustJSON(t, v)), &raw))
	checkDiskKeys(t, raw["disks_request"])
	checkDiskKeys(t, raw["disks_limit"])
	return w
}

func asStorageEngine(t *testing.T, v any) storageEngine {
	t.Helper()
	var e storageEngine
	strict(t, v, &e, "volumes", "volume_changed", "storage", "iops_options")
	return e
}

func asComputeCapacity(t *testing.T, v any) computeNode {
	t.Helper()
	var n computeNode
	strict(t, v, &n, computeCapacityKeys...)
	return n
}

func asComputeUsage(t *testing.T, v any) computeNode {
	t.Helper()
	var n computeNode
	strict(t, v, &n, computeUsageKeys...)
	return n
}

func asComputeWorkload(t *testing.T, v any) computeWorkload {
	t.Helper()
	var w computeWorkload
	strict(t, v, &w, computeWorkloadKeys...)
	return w
}

// planBytes sums a volume plan per device.
func planBytes(plan map[string]map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for _, devices := range plan {
		for device, size := range devices {
			out[device] += size
		}
	}
	return out
}

// nonZero drops the zero entries of a per-device sum.
func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// quotaSum sums disk quotas per device: read IOPS, write IOPS, read BPS,
// write BPS.
func quotaSum(disks []diskQuota) map[string][4]int64 {
	out := map[string][4]int64{}
	for _, d := range disks {
		q := out[d.Device]
		q[0] += d.ReadIOPS
		q[1] += d.WriteIOPS
		q[2] += d.ReadBPS
		q[3] += d.WriteBPS
		out[d.Device] = q
	}
	return out
}

// capacityEntry is what core expects for one node of a deploy capacity
// answer.
type capacityEntry struct {
	capacity    int
	usage, rate float64
}

// checkDeployCapacity checks a deploy capacity answer as core reads it:
// exactly the nodes expected, each with its capacity, usage, rate and a
// weight of 1; a total that is the sum; a map that is empty, never null,
// when no node fits.
func checkDeployCapacity(t *testing.T, resp *plugintypes.GetNodesDeployCapacityResponse, want map[string]capacityEntry, checkRate bool) {
	t.Helper()
	require.NotNil(t, resp.NodeDeployCapacityMap, "the map must be {} rather than null: core reads null as no constraint at all")
	wantNodes := keys(want)
	sort.Strings(wantNodes)
	gotNodes := keys(resp.NodeDeployCapacityMap)
	sort.Strings(gotNodes)
	require.Equal(t, wantNodes, gotNodes, "nodes in the capacity map")
	total := 0
	for node, w := range want {
		got := resp.NodeDeployCapacityMap[node]
		require.NotNil(t, got, node)
		require.Equal(t, w.capacity, got.Capacity, "capacity of %s", node)
		require.InDelta(t, w.usage, got.Usage, 1e-9, "usage of %s", node)
		if checkRate {
			require.InDelta(t, w.rate, got.Rate, 1e-9, "rate of %s", node)
		}
		require.Equal(t, 1.0, got.Weight, "weight of %s", node)
		total += w.capacity
	}
	require.Equal(t, total, resp.Total, "total is the sum of the capacities")
}

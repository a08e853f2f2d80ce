package e2e

import (
	"encoding/json"
	"testing"

	pb "github.com/projecteru2/core/rpc/gen"
	"github.com/stretchr/testify/require"
)

// The plugins' stored shapes, as core hands them back through its API.

type disk struct {
	Device    string   `json:"device"`
	Mounts    []string `json:"mounts"`
	ReadIOPS  int64    `json:"read_IOPS"`
	WriteIOPS int64    `json:"write_IOPS"`
	ReadBPS   int64    `json:"read_bps"`
	WriteBPS  int64    `json:"write_bps"`
}

type storageNode struct {
	Volumes map[string]int64 `json:"volumes"`
	Disks   []disk           `json:"disks"`
	Storage int64            `json:"storage"`
}

type storageWorkload struct {
	VolumesRequest    []string                    `json:"volumes_request"`
	VolumePlanRequest map[string]map[string]int64 `json:"volume_plan_request"`
	StorageRequest    int64                       `json:"storage_request"`
	DisksRequest      []disk                      `json:"disks_request"`
}

type computeNode struct {
	CPUMillis            int64  `json:"cpu_millis"`
	MemoryBytes          int64  `json:"memory_bytes"`
	CPURatio             int64  `json:"cpu_ratio"`
	SchedulableCPUMillis int64  `json:"schedulable_cpu_millis"`
	CPURatioSource       string `json:"cpu_ratio_source"`
}

type computeWorkload struct {
	CPURequestMillis int64 `json:"cpu_request_millis"`
	MemoryRequest    int64 `json:"memory_request"`
}

type workloadResources struct {
	Storage storageWorkload `json:"storage"`
	Compute computeWorkload `json:"compute"`
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	return v
}

func resourcesOf(t *testing.T, w *pb.Workload) workloadResources {
	t.Helper()
	return decode[workloadResources](t, json.RawMessage(w.Resources))
}

// usage is a node's usage of both plugins, in the terms the tests compare.
type usage struct {
	Volumes   map[string]int64 // device -> bytes, zero entries left out
	Storage   int64
	ReadIOPS  map[string]int64 // disk device -> IOPS, zero entries left out
	WriteIOPS map[string]int64
	CPUMillis int64
	Memory    int64
}

func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// stored is the node's usage as the plugins hold it.
func (r nodeResource) stored(t *testing.T) usage {
	t.Helper()
	s := decode[storageNode](t, r.Usage["storage"])
	c := decode[computeNode](t, r.Usage["compute"])
	u := usage{Volumes: nonZero(s.Volumes), Storage: s.Storage, ReadIOPS: map[string]int64{}, WriteIOPS: map[string]int64{}, CPUMillis: c.CPUMillis, Memory: c.MemoryBytes}
	for _, d := range s.Disks {
		u.ReadIOPS[d.Device] += d.ReadIOPS
		u.WriteIOPS[d.Device] += d.WriteIOPS
	}
	u.ReadIOPS, u.WriteIOPS = nonZero(u.ReadIOPS), nonZero(u.WriteIOPS)
	return u
}

// sum is what the workloads hold, added up from core's records of them.
func sum(t *testing.T, workloads []*pb.Workload) usage {
	t.Helper()
	u := usage{Volumes: map[string]int64{}, ReadIOPS: map[string]int64{}, WriteIOPS: map[string]int64{}}
	for _, w := range workloads {
		r := resourcesOf(t, w)
		for _, plan := range r.Storage.VolumePlanRequest {
			for device, size := range plan {
				u.Volumes[device] += size
			}
		}
		u.Storage += r.Storage.StorageRequest
		for _, d := range r.Storage.DisksRequest {
			u.ReadIOPS[d.Device] += d.ReadIOPS
			u.WriteIOPS[d.Device] += d.WriteIOPS
		}
		u.CPUMillis += r.Compute.CPURequestMillis
		u.Memory += r.Compute.MemoryRequest
	}
	u.Volumes, u.ReadIOPS, u.WriteIOPS = nonZero(u.Volumes), nonZero(u.ReadIOPS), nonZero(u.WriteIOPS)
	return u
}

// zero is a node with nothing on it.
var zero = usage{Volumes: map[string]int64{}, ReadIOPS: map[string]int64{}, WriteIOPS: map[string]int64{}}

// requireConsistent checks that every node's usage in both plugins is
// exactly the sum of its workloads, and that core's GetNodeResource (which
// has each plugin compare its usage with the workloads) reports no diffs.
func (c *cluster) requireConsistent(t *testing.T, nodes ...string) {
	t.Helper()
	for _, node := range nodes {
		r := c.nodeResource(t, node, false)
		require.Empty(t, r.Diffs, "node %s", node)
		require.Equal(t, sum(t, c.workloads(t, node)), r.stored(t), "node %s: usage is the sum of its workloads", node)
	}
}

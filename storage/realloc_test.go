package storage

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// The realloc fixtures: a node whose /data0 holds workload other (100
// bytes) and workload normal (300 bytes of /a, 60 read IOPS of /q on
// /dev/a), whose /data1 holds workload mono (a monopoly group of 100 and
// 300 bytes), and whose /data2 is unused.
const (
	reallocCapacity = `{"volumes":{"/data0":1000,"/data1":2000,"/data2":500},
		"disks":[{"device":"/dev/a","mounts":["/data0"],"read_IOPS":100},{"device":"/dev/b","mounts":["/data1"],"read_IOPS":100}],
		"storage":10000}`

	otherWorkload = `{"volumes_request":["AUTO:/o:rw:100:0:0:0:0"],"volumes_limit":["AUTO:/o:rw:100:0:0:0:0"],
		"volume_plan_request":{"AUTO:/o:rw:100:0:0:0:0":{"/data0":100}},"volume_plan_limit":{"AUTO:/o:rw:100:0:0:0:0":{"/data0":100}},
		"storage_request":100,"storage_limit":100,
		"disks_request":[{"device":"/dev/a","mounts":["/data0"]}],"disks_limit":[{"device":"/dev/a","mounts":["/data0"]}]}`

	normalWorkload = `{"volumes_request":["AUTO:/a:rw:300:0:0:0:0","AUTO:/q:rw:0:60:0:0:0"],
		"volumes_limit":["AUTO:/a:rw:300:0:0:0:0","AUTO:/q:rw:0:60:0:0:0"],
		"volume_plan_request":{"AUTO:/a:rw:300:0:0:0:0":{"/data0":300},"AUTO:/q:rw:0:60:0:0:0":{"/data0":0}},
		"volume_plan_limit":{"AUTO:/a:rw:300:0:0:0:0":{"/data0":300},"AUTO:/q:rw:0:60:0:0:0":{"/data0":0}},
		"storage_request":300,"storage_limit":300,
		"disks_request":[{"device":"/dev/a","mounts":["/data0"],"read_IOPS":60}],
		"disks_limit":[{"device":"/dev/a","mounts":["/data0"],"read_IOPS":60}]}`

	monoWorkload = `{"volumes_request":["AUTO:/m1:mrw:100:0:0:0:0","AUTO:/m2:mrw:300:0:0:0:0"],
		"volumes_limit":["AUTO:/m1:mrw:100:0:0:0:0","AUTO:/m2:mrw:300:0:0:0:0"],
		"volume_plan_request":{"AUTO:/m1:mrw:100:0:0:0:0":{"/data1":500},"AUTO:/m2:mrw:300:0:0:0:0":{"/data1":1500}},
		"volume_plan_limit":{"AUTO:/m1:mrw:100:0:0:0:0":{"/data1":500},"AUTO:/m2:mrw:300:0:0:0:0":{"/data1":1500}},
		"storage_request":400,"storage_limit":400,
		"disks_request":[{"device":"/dev/b","mounts":["/data1"]}],"disks_limit":[{"device":"/dev/b","mounts":["/data1"]}]}`
)

func mustWorkload(t testing.TB, s string) *Workload {
	t.Helper()
	w, err := DecodeWorkload(raw(s))
	require.NoError(t, err)
	return w
}

// reallocNode is the fixture node with its usage committed from the three
// workloads.
func reallocNode(t testing.TB) *Node {
	n := mustNode(t, reallocCapacity, "")
	return usageAfter(t, n, mustWorkload(t, otherWorkload), mustWorkload(t, normalWorkload), mustWorkload(t, monoWorkload))
}

// perDevice sums a workload's request plan per device.
func perDevice(t testing.TB, w *Workload) map[string]int64 {
	sum, err := sumWorkloads([]*Workload{w})
	require.NoError(t, err)
	for dev, v := range sum.Volumes {
		if v == 0 {
			delete(sum.Volumes, dev)
		}
	}
	return sum.Volumes
}

func TestReallocFixture(t *testing.T) {
	n := reallocNode(t)
	require.Equal(t, map[string]int64{"/data0": 400, "/data1": 2000, "/data2": 0}, n.Usage.Volumes)
	require.Equal(t, int64(800), n.Usage.Storage)
	require.Equal(t, Quota{60, 0, 0, 0}, n.Usage.disk("/dev/a").Quota())
}

func TestRealloc(t *testing.T) {
	tests := []struct {
		name          string
		old           string
		request       string
		volumes       []string         // the new workload's request bindings
		plan          VolumePlan       // the new workload's request plan
		delta         map[string]int64 // the delta's plan summed per device
		deltaStorage  int64
		deltaDisks    []Disk
		grows         bool
		volumeChanged bool
		engine        []string
	}{
		{
			name:          "a size delta adds to the binding, which stays on its device",
			old:           normalWorkload,
			request:       `{"volumes":["AUTO:/a:rw:200"]}`,
			volumes:       []string{"AUTO:/a:rw:500:0:0:0:0", "AUTO:/q:rw:0:60:0:0:0"},
			plan:          VolumePlan{"AUTO:/a:rw:500:0:0:0:0": {"/data0": 500}, "AUTO:/q:rw:0:60:0:0:0": {"/data0": 0}},
			delta:         map[string]int64{"/data0": 200},
			deltaStorage:  200,
			deltaDisks:    []Disk{},
			grows:         true,
			volumeChanged: false, // a resize on the same device: core updates in place
			engine:        []string{"/data0:/a:rw:500", "/data0:/q:rw:0:60:0:0:0"},
		},
		{
			name:          "a negative delta shrinks the binding",
			old:           normalWorkload,
			request:       `{"volumes":["AUTO:/a:rw:-100"]}`,
			volumes:       []string{"AUTO:/a:rw:200:0:0:0:0", "AUTO:/q:rw:0:60:0:0:0"},
			plan:          VolumePlan{"AUTO:/a:rw:200:0:0:0:0": {"/data0": 200}, "AUTO:/q:rw:0:60:0:0:0": {"/data0": 0}},
			delta:         map[string]int64{"/data0": -100},
			deltaStorage:  -100,
			deltaDisks:    []Disk{},
			volumeChanged: false, // a resize on the same device: core updates in place
			engine:        []string{"/data0:/a:rw:200", "/data0:/q:rw:0:60:0:0:0"},
		},
		{
			name:          "shrinking a binding to nothing removes it",
			old:           normalWorkload,
			request:       `{"volumes":["AUTO:/a:rw:-300"]}`,
			volumes:       []string{"AUTO:/q:rw:0:60:0:0:0"},
			plan:          VolumePlan{"AUTO:/q:rw:0:60:0:0:0": {"/data0": 0}},
			delta:         map[string]int64{"/data0": -300},
			deltaStorage:  -300,
			deltaDisks:    []Disk{},
			volumeChanged: true,
			engine:        []string{"/data0:/q:rw:0:60:0:0:0"},
		},
		{
			name:          "an IO quota delta is charged to the disk as the difference",
			old:           normalWorkload,
			request:       `{"volumes":["AUTO:/q:rw:0:30:0:0:0"]}`,
			volumes:       []string{"AUTO:/a:rw:300:0:0:0:0", "AUTO:/q:rw:0:90:0:0:0"},
			plan:          VolumePlan{"AUTO:/a:rw:300:0:0:0:0": {"/data0": 300}, "AUTO:/q:rw:0:90:0:0:0": {"/data0": 0}},
			delta:         map[string]int64{},
			deltaDisks:    []Disk{{Device: "/dev/a", Mounts: []string{"/data0"}, ReadIOPS: 30}},
			grows:         true,
			volumeChanged: false, // a resize on the same device: core updates in place
			engine:        []string{"/data0:/a:rw:300", "/data0:/q:rw:0:90:0:0:0"},
		},
		{
			name:          "a new binding is scheduled afresh while the matched ones keep their device",
			old:           normalWorkload,
			request:       `{"volumes":["AUTO:/b:rw:100"]}`,
			volumes:       []string{"AUTO:/a:rw:300:0:0:0:0", "AUTO:/q:rw:0:60:0:0:0", "AUTO:/b:rw:100:0:0:0:0"},
			plan:          VolumePlan{"AUTO:/a:rw:300:0:0:0:0": {"/data0": 300}, "AUTO:/q:rw:0:60:0:0:0": {"/data0": 0}, "AUTO:/b:rw:100:0:0:0:0": {"/data0": 100}},
			delta:         map[string]int64{"/data0": 100},
			deltaStorage:  100,
			deltaDisks:    []Disk{},
			grows:         true,
			volumeChanged: true,
			engine:        []string{"/data0:/a:rw:300", "/data0:/q:rw:0:60:0:0:0", "/data0:/b:rw:100"},
		},
		{
			name:          "a request that touches nothing placed carries the plan through",
			old:           normalWorkload,
			request:       `{"storage":"100"}`,
			volumes:       []string{"AUTO:/a:rw:300:0:0:0:0", "AUTO:/q:rw:0:60:0:0:0"},
			plan:          VolumePlan{"AUTO:/a:rw:300:0:0:0:0": {"/data0": 300}, "AUTO:/q:rw:0:60:0:0:0": {"/data0": 0}},
			delta:         map[string]int64{},
			deltaStorage:  100,
			deltaDisks:    []Disk{},
			grows:         true,
			volumeChanged: false,
			engine:        []string{"/data0:/a:rw:300", "/data0:/q:rw:0:60:0:0:0"},
		},
		{
			name:          "a new mount binding without IO is not scheduled but changes the volumes",
			old:           normalWorkload,
			request:       `{"volumes":["/host:/h:rw:10"]}`,
			volumes:       []string{"AUTO:/a:rw:300:0:0:0:0", "AUTO:/q:rw:0:60:0:0:0", "/host:/h:rw:10:0:0:0:0"},
			plan:          VolumePlan{"AUTO:/a:rw:300:0:0:0:0": {"/data0": 300}, "AUTO:/q:rw:0:60:0:0:0": {"/data0": 0}},
			delta:         map[string]int64{},
			deltaStorage:  10,
			deltaDisks:    []Disk{},
			grows:         true,
			volumeChanged: true,
			engine:        []string{"/data0:/a:rw:300", "/data0:/q:rw:0:60:0:0:0", "/host:/h:rw:10"},
		},
		{
			name:          "a monopoly group with affinity stays whole on its device and is split anew",
			old:           monoWorkload,
			request:       `{"volumes":["AUTO:/m2:mrw:100"]}`,
			volumes:       []string{"AUTO:/m1:mrw:100:0:0:0:0", "AUTO:/m2:mrw:400:0:0:0:0"},
			plan:          VolumePlan{"AUTO:/m1:mrw:100:0:0:0:0": {"/data1": 400}, "AUTO:/m2:mrw:400:0:0:0:0": {"/data1": 1600}},
			delta:         map[string]int64{},
			deltaStorage:  100,
			deltaDisks:    []Disk{},
			grows:         true,
			volumeChanged: false, // a resize on the same device: core updates in place
			engine:        []string{"/data1:/m1:rw:400", "/data1:/m2:rw:1600"},
		},
		{
			name:    "a new monopoly binding joins its group on the group's device",
			old:     monoWorkload,
			request: `{"volumes":["AUTO:/m3:mrw:500"]}`,
			volumes: []string{"AUTO:/m1:mrw:100:0:0:0:0", "AUTO:/m2:mrw:300:0:0:0:0", "AUTO:/m3:mrw:500:0:0:0:0"},
			plan: VolumePlan{
				"AUTO:/m1:mrw:100:0:0:0:0": {"/data1": 223},
				"AUTO:/m2:mrw:300:0:0:0:0": {"/data1": 666},
				"AUTO:/m3:mrw:500:0:0:0:0": {"/data1": 1111},
			},
			delta:         map[string]int64{},
			deltaStorage:  500,
			deltaDisks:    []Disk{},
			grows:         true,
			volumeChanged: true,
			engine:        []string{"/data1:/m1:rw:223", "/data1:/m2:rw:666", "/data1:/m3:rw:1111"},
		},
		{
			name:          "a new workload's first binding is scheduled like a deploy",
			old:           `null`,
			request:       `{"volumes":["AUTO:/n:rw:50"]}`,
			volumes:       []string{"AUTO:/n:rw:50:0:0:0:0"},
			plan:          VolumePlan{"AUTO:/n:rw:50:0:0:0:0": {"/data0": 50}},
			delta:         map[string]int64{"/data0": 50},
			deltaStorage:  50,
			deltaDisks:    []Disk{},
			grows:         true,
			volumeChanged: true,
			engine:        []string{"/data0:/n:rw:50"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := reallocNode(t)
			old := mustWorkload(t, tt.old)
			res, err := n.Realloc(context.Background(), old, mustRequest(t, tt.request, true))
			require.NoError(t, err)
			require.Equal(t, tt.volumes, strs(res.Workload.VolumesRequest))
			require.Equal(t, tt.plan, res.Workload.VolumePlanRequest)
			require.Equal(t, tt.delta, perDevice(t, res.Delta), "the delta sums per device to the change")
			require.Equal(t, tt.deltaStorage, res.Delta.StorageRequest)
			require.Equal(t, tt.deltaDisks, res.Delta.DisksRequest)
			require.Equal(t, tt.grows, res.Grows)
			require.Equal(t, tt.volumeChanged, res.Engine.VolumeChanged)
			require.ElementsMatch(t, tt.engine, res.Engine.Volumes)

			// core commits the delta with incr: the node then agrees with
			// the workloads as they are after the realloc.
			committed := usageAfter(t, n, res.Delta)
			after := []*Workload{res.Workload}
			for _, s := range []string{otherWorkload, normalWorkload, monoWorkload} {
				if s != tt.old {
					after = append(after, mustWorkload(t, s))
				}
			}
			_, diffs, err := committed.Recompute(after, nil)
			require.NoError(t, err)
			require.Empty(t, diffs)
		})
	}

	refusals := []struct {
		name, old, request string
		class              types.Class
		errHas             string
	}{
		{"growth its device cannot hold", normalWorkload, `{"volumes":["AUTO:/a:rw:601"]}`, types.ResourceExhausted, "cannot grow to 901 B on /data0: 900 B free (900 bytes)"},
		{"IO quota its disk cannot give", normalWorkload, `{"volumes":["AUTO:/q:rw:0:41:0:0:0"]}`, types.ResourceExhausted, "IO quota"},
		{"a monopoly group outgrowing its device", monoWorkload, `{"volumes":["AUTO:/m1:mrw:1601"]}`, types.ResourceExhausted, "do not fit their device /data1"},
		{"shrinking below zero", normalWorkload, `{"volumes":["AUTO:/a:rw:-301"]}`, types.InvalidArgument, "below zero"},
		{"shrinking a binding the workload lacks", normalWorkload, `{"volumes":["AUTO:/z:rw:-1"]}`, types.InvalidArgument, "no such binding"},
		{"a storage budget exceeded", normalWorkload, `{"storage":"9201"}`, types.ResourceExhausted, "storage budget"},
		{"a storage request going below zero", normalWorkload, `{"storage":"-1"}`, types.InvalidArgument, "below zero"},
		{"a limit quota growing beyond 2^53", normalWorkload, `{"volumes-request":["AUTO:/q:rw:0"],"volumes":["AUTO:/q:rw:0:8P:0:0:0"]}`, types.InvalidArgument, "more than 2^53 of read_IOPS"},
		{"a new binding nothing can hold", normalWorkload, `{"volumes":["AUTO:/big:rw:2001"]}`, types.ResourceExhausted, "no room"},
	}
	for _, tt := range refusals {
		t.Run("a realloc of "+tt.name+" is refused", func(t *testing.T) {
			_, err := reallocNode(t).Realloc(context.Background(), mustWorkload(t, tt.old), mustRequest(t, tt.request, true))
			requireClass(t, err, tt.class)
			require.ErrorContains(t, err, tt.errHas)
		})
	}

	t.Run("the plugin reads the wire form and reports growth", func(t *testing.T) {
		r, err := Rules{}.ParseResize(raw(normalWorkload), raw(`{"volumes":["AUTO:/a:rw:-1"]}`))
		require.NoError(t, err)
		out, grows, err := r.Plan(reallocNode(t), types.Env{MaxDeployCount: 10})
		require.NoError(t, err)
		require.False(t, grows)
		data, err := json.Marshal(out.DeltaResource)
		require.NoError(t, err)
		delta, err := DecodeWorkload(data)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"/data0": -1}, perDevice(t, delta))
	})
}

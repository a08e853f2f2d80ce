package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	enginetypes "github.com/projecteru2/core/engine/types"
	"github.com/projecteru2/core/resource/plugins"
	plugintypes "github.com/projecteru2/core/resource/plugins/types"
	resourcetypes "github.com/projecteru2/core/resource/types"
	"github.com/stretchr/testify/require"
)

// params builds the free-form objects core hands plugins.
type params = resourcetypes.RawParams

// The node most storage tests use: two 1 TiB volumes, one disk covering
// / and /data0, a flat budget of 2 TiB (so storage is 4 TiB in all).
var n1Request = params{
	"volumes": []string{"/data0:1T", "/data1:1T"},
	"disks":   []string{"/dev/vda:/,/data0:1000:1000:1G:1G"},
	"storage": "2T",
}

var vda = diskQuota{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 1000, WriteIOPS: 1000, ReadBPS: GiB, WriteBPS: GiB}

func n1Capacity() storageNode {
	return storageNode{
		Volumes: map[string]int64{"/data0": TiB, "/data1": TiB},
		Disks:   []diskQuota{vda},
		Storage: 4 * TiB,
	}
}

// vdaUsage is /dev/vda holding the given quotas.
func vdaUsage(rIOPS, wIOPS, rBPS, wBPS int64) diskQuota {
	return diskQuota{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: rIOPS, WriteIOPS: wIOPS, ReadBPS: rBPS, WriteBPS: wBPS}
}

// step runs one step of a flow; a failed step ends the flow, since the
// later ones build on it.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// addNode adds a node through core's client and fails the test if the
// plugin refuses.
func addNode(t *testing.T, p plugins.Plugin, node string, req params, info *enginetypes.Info) *plugintypes.AddNodeResponse {
	t.Helper()
	resp, err := p.AddNode(t.Context(), node, req, info)
	require.NoError(t, err, "add-node %s", node)
	return resp
}

func nodeInfo(t *testing.T, p plugins.Plugin, node string, workloads []plugintypes.WorkloadResource) *plugintypes.GetNodeResourceInfoResponse {
	t.Helper()
	resp, err := p.GetNodeResourceInfo(t.Context(), node, workloads)
	require.NoError(t, err, "get-node-resource-info %s", node)
	return resp
}

func TestStorageAddNode(t *testing.T) {
	engineReport, err := json.Marshal(map[string]any{
		"volumes": map[string]int64{"/data9": 500 * GiB},
		"disks":   []diskQuota{{Device: "/dev/vdb", Mounts: []string{"/data9"}, ReadIOPS: 500, WriteIOPS: 500, ReadBPS: 100 << 20, WriteBPS: 100 << 20}},
		"storage": 1000 * GiB,
	})
	require.NoError(t, err)

	cases := []struct {
		name     string
		request  params
		info     *enginetypes.Info
		capacity storageNode
		usage    storageNode
	}{
		{
			name:     "records the volumes, the disks and the flat budget plus the volume total",
			request:  n1Request,
			capacity: n1Capacity(),
			usage: storageNode{
				Volumes: map[string]int64{"/data0": 0, "/data1": 0},
				Disks:   []diskQuota{vdaUsage(0, 0, 0, 0)},
			},
		},
		{
			name:     "takes 80% of the engine's storage total when the request names no storage",
			request:  params{"volumes": []string{"/data0:100G"}},
			info:     &enginetypes.Info{Type: "docker", ID: "engine-1", NCPU: 8, MemTotal: 16 * GiB, StorageTotal: 1000 * GiB},
			capacity: storageNode{Volumes: map[string]int64{"/data0": 100 * GiB}, Disks: []diskQuota{}, Storage: 800*GiB + 100*GiB},
			usage:    storageNode{Volumes: map[string]int64{"/data0": 0}, Disks: []diskQuota{}},
		},
		{
			name:    "takes volumes, disks and the storage total from the engine's own storage report",
			request: params{},
			info: &enginetypes.Info{Type: "docker", ID: "engine-2", NCPU: 8, MemTotal: 16 * GiB, StorageTotal: 10 * TiB,
				Resources: map[string][]byte{"storage": engineReport}},
			capacity: storageNode{
				Volumes: map[string]int64{"/data9": 500 * GiB},
				Disks:   []diskQuota{{Device: "/dev/vdb", Mounts: []string{"/data9"}, ReadIOPS: 500, WriteIOPS: 500, ReadBPS: 100 << 20, WriteBPS: 100 << 20}},
				Storage: 800*GiB + 500*GiB,
			},
			usage: storageNode{
				Volumes: map[string]int64{"/data9": 0},
				Disks:   []diskQuota{{Device: "/dev/vdb", Mounts: []string{"/data9"}}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p := e.plugin(t, "storage")

			resp := addNode(t, p, "n1", tc.request, tc.info)
			require.Equal(t, tc.capacity, asStorageNode(t, resp.Capacity), "capacity answered by add-node")
			require.Equal(t, tc.usage, asStorageNode(t, resp.Usage), "usage answered by add-node")

			info := nodeInfo(t, p, "n1", nil)
			require.JSONEq(t, mustJSON(t, resp.Capacity), mustJSON(t, info.Capacity), "stored capacity")
			require.JSONEq(t, mustJSON(t, resp.Usage), mustJSON(t, info.Usage), "stored usage")
			require.NotNil(t, info.Diffs, "diffs are [] rather than null")
			require.Empty(t, info.Diffs)

			stored, version := e.record(t, "storage", "n1")
			require.NotNil(t, stored, "the record is in etcd under <prefix>/resource/storage/n1")

			t.Run("and refuses to add the same node again, leaving it as it was", func(t *testing.T) {
				again, err := p.AddNode(t.Context(), "n1", params{"volumes": []string{"/data5:1T"}}, nil)
				require.Error(t, err)
				require.Equal(t, 128, exitCode(t, err))
				require.Nil(t, again.Capacity, "core gets no half-parsed answer")
				_, after := e.record(t, "storage", "n1")
				require.Equal(t, version, after, "the record was not rewritten")
			})
		})
	}
}

func TestStorageDeployCapacity(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "storage")
	addNode(t, p, "n1", n1Request, nil)
	addNode(t, p, "n2", params{"volumes": []string{"/data0:150G"}, "storage": "100G"}, nil)

	cases := []struct {
		name    string
		nodes   []string
		request params
		want    map[string]capacityEntry
	}{
		{
			name:    "counts the plans of a normal binding on every node that fits one",
			nodes:   []string{"n1", "n2", "ghost"},
			request: params{"volumes": []string{"AUTO:/data:rw:100G"}},
			want: map[string]capacityEntry{
				"n1": {capacity: 20, rate: 100.0 / 2048},
				"n2": {capacity: 1, rate: 100.0 / 150},
			},
		},
		{
			name:    "answers max_deploy_count for a request that asks no storage, unknown nodes included",
			nodes:   []string{"n1", "n2", "ghost"},
			request: nil,
			want: map[string]capacityEntry{
				"n1": {capacity: maxDeploy}, "n2": {capacity: maxDeploy}, "ghost": {capacity: maxDeploy},
			},
		},
		{
			name:    "bounds a flat storage request by the node's storage budget",
			nodes:   []string{"n1", "n2"},
			request: params{"storage": "1T"},
			want:    map[string]capacityEntry{"n1": {capacity: 4, rate: 0.25}},
		},
		{
			name:    "gives each monopoly binding an unused device of its own",
			nodes:   []string{"n1", "n2"},
			request: params{"volumes": []string{"AUTO:/m:mrw:10G"}},
			want: map[string]capacityEntry{
				"n1": {capacity: 2, rate: 10.0 / 2048},
				"n2": {capacity: 1, rate: 10.0 / 150},
			},
		},
		{
			name:    "bounds the IOPS of a mount binding by the quota of the disk covering its path",
			nodes:   []string{"n1"},
			request: params{"volumes": []string{"/data0/db:/db:rw:0:300:0:0:0"}},
			want:    map[string]capacityEntry{"n1": {capacity: 3}},
		},
		{
			name:    "leaves out every node that cannot take one workload, as an empty map",
			nodes:   []string{"n1", "n2", "ghost"},
			request: params{"volumes": []string{"AUTO:/data:rw:2T"}},
			want:    map[string]capacityEntry{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := p.GetNodesDeployCapacity(t.Context(), tc.nodes, tc.request)
			require.NoError(t, err)
			checkDeployCapacity(t, resp, tc.want, true)
		})
	}
}

func TestStorageWorkloadLifecycle(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "storage")
	addNode(t, p, "n1", n1Request, nil)

	deployRequest := params{"volumes": []string{"AUTO:/data:rw:100G", "/data0/logs:/logs:rw:0:100:100:1M:1M"}}
	const (
		autoBinding  = "AUTO:/data:rw:107374182400:0:0:0:0"
		mountBinding = "/data0/logs:/logs:rw:0:100:100:1048576:1048576"
	)
	var workloads []plugintypes.WorkloadResource

	step(t, "calculate-deploy plans every workload and hands the engine only storage keys", func(t *testing.T) {
		_, version := e.record(t, "storage", "n1")
		resp, err := p.CalculateDeploy(t.Context(), "n1", 2, deployRequest)
		require.NoError(t, err)
		require.Len(t, resp.EnginesParams, 2, "one engine params per workload")
		require.Len(t, resp.WorkloadsResource, 2, "one workload resource per workload")
		for i := range 2 {
			engine := asStorageEngine(t, resp.EnginesParams[i])
			require.ElementsMatch(t, []string{"/data0:/data:rw:107374182400", mountBinding}, engine.Volumes)
			require.False(t, engine.VolumeChanged)
			require.Equal(t, 100*GiB, engine.Storage)
			require.Equal(t, map[string]string{"/dev/vda": "100:100:1048576:1048576"}, engine.IOPSOptions)

			w := asStorageWorkload(t, resp.WorkloadsResource[i])
			require.ElementsMatch(t, []string{autoBinding, mountBinding}, w.VolumesRequest)
			require.ElementsMatch(t, []string{autoBinding, mountBinding}, w.VolumesLimit)
			require.Equal(t, map[string]map[string]int64{autoBinding: {"/data0": 100 * GiB}}, w.VolumePlanRequest)
			require.Equal(t, map[string]map[string]int64{autoBinding: {"/data0": 100 * GiB}}, w.VolumePlanLimit)
			require.Equal(t, 100*GiB, w.StorageRequest)
			require.Equal(t, 100*GiB, w.StorageLimit)
			require.Equal(t, []diskQuota{vdaUsage(100, 100, 1<<20, 1<<20)}, w.DisksRequest)
		}
		_, after := e.record(t, "storage", "n1")
		require.Equal(t, version, after, "calculate-deploy is a pure calculation")
		workloads = resp.WorkloadsResource
	})

	step(t, "set-node-resource-usage charges the workloads core commits", func(t *testing.T) {
		resp, err := p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, workloads, true, plugins.Incr)
		require.NoError(t, err)
		require.Equal(t, storageNode{
			Volumes: map[string]int64{"/data0": 0, "/data1": 0}, Disks: []diskQuota{vdaUsage(0, 0, 0, 0)},
		}, asStorageNode(t, resp.Before))
		require.Equal(t, storageNode{
			Volumes: map[string]int64{"/data0": 200 * GiB, "/data1": 0},
			Disks:   []diskQuota{vdaUsage(200, 200, 2<<20, 2<<20)},
			Storage: 200 * GiB,
		}, asStorageNode(t, resp.After))
	})

	step(t, "get-nodes-deploy-capacity reports the node's used fraction and what is left", func(t *testing.T) {
		resp, err := p.GetNodesDeployCapacity(t.Context(), []string{"n1"}, params{"volumes": []string{"AUTO:/data:rw:100G"}})
		require.NoError(t, err)
		checkDeployCapacity(t, resp, map[string]capacityEntry{"n1": {capacity: 18, usage: 200.0 / 2048, rate: 100.0 / 2048}}, true)

		// a flat storage request counts against the storage total instead
		resp, err = p.GetNodesDeployCapacity(t.Context(), []string{"n1"}, params{"storage": "1T"})
		require.NoError(t, err)
		checkDeployCapacity(t, resp, map[string]capacityEntry{"n1": {capacity: 3, usage: 200.0 / 4096, rate: 0.25}}, true)
	})

	step(t, "get-node-resource-info finds no diff when the workloads match the usage", func(t *testing.T) {
		info := nodeInfo(t, p, "n1", workloads)
		require.NotNil(t, info.Diffs, "diffs are [] rather than null")
		require.Empty(t, info.Diffs)
		require.Equal(t, int64(200*GiB), asStorageNode(t, info.Usage).Storage)
	})

	step(t, "get-node-resource-info names each disagreement with the workloads core passes", func(t *testing.T) {
		_, version := e.record(t, "storage", "n1")
		info := nodeInfo(t, p, "n1", workloads[:1])
		// storage total, volume /data0, and the four quotas of /dev/vda
		require.Len(t, info.Diffs, 6, "diffs: %q", info.Diffs)
		all := strings.Join(info.Diffs, "\n")
		for _, word := range []string{"storage", "/data0", "/dev/vda"} {
			require.Contains(t, all, word)
		}
		require.Equal(t, int64(200*GiB), asStorageNode(t, info.Usage).Storage, "get-node-resource-info reports, it does not fix")
		_, after := e.record(t, "storage", "n1")
		require.Equal(t, version, after, "get-node-resource-info writes nothing")
	})

	step(t, "fix-node-resource rewrites the usage from the workloads and answers the record written", func(t *testing.T) {
		fixed, err := p.FixNodeResource(t.Context(), "n1", workloads[:1])
		require.NoError(t, err)
		want := storageNode{
			Volumes: map[string]int64{"/data0": 100 * GiB, "/data1": 0},
			Disks:   []diskQuota{vdaUsage(100, 100, 1<<20, 1<<20)},
			Storage: 100 * GiB,
		}
		require.Equal(t, want, asStorageNode(t, fixed.Usage))
		require.Equal(t, n1Capacity(), asStorageNode(t, fixed.Capacity))

		info := nodeInfo(t, p, "n1", workloads[:1])
		require.Empty(t, info.Diffs)
		require.Equal(t, want, asStorageNode(t, info.Usage))

		// put the second workload back, as it still runs
		_, err = p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, workloads[1:], true, plugins.Incr)
		require.NoError(t, err)
		require.Empty(t, nodeInfo(t, p, "n1", workloads).Diffs)
	})

	var grown, delta plugintypes.WorkloadResource
	step(t, "calculate-realloc grows a binding on its own device and answers the delta core commits", func(t *testing.T) {
		_, version := e.record(t, "storage", "n1")
		resp, err := p.CalculateRealloc(t.Context(), "n1", workloads[0], params{"volumes": []string{"AUTO:/data:rw:50G"}})
		require.NoError(t, err)

		const grownBinding = "AUTO:/data:rw:161061273600:0:0:0:0"
		w := asStorageWorkload(t, resp.WorkloadResource)
		require.ElementsMatch(t, []string{grownBinding, mountBinding}, w.VolumesRequest)
		require.Equal(t, map[string]map[string]int64{grownBinding: {"/data0": 150 * GiB}}, w.VolumePlanRequest)
		require.Equal(t, 150*GiB, w.StorageRequest)
		require.Equal(t, map[string][4]int64{"/dev/vda": {100, 100, 1 << 20, 1 << 20}}, quotaSum(w.DisksRequest))

		d := asStorageWorkload(t, resp.DeltaResource)
		require.Equal(t, map[string]int64{"/data0": 50 * GiB}, nonZero(planBytes(d.VolumePlanRequest)), "the delta's plan sums to the bytes added, per device")
		require.Equal(t, 50*GiB, d.StorageRequest)
		for device, q := range quotaSum(d.DisksRequest) {
			require.Equal(t, [4]int64{}, q, "quota delta of %s", device)
		}

		engine := asStorageEngine(t, resp.EngineParams)
		require.ElementsMatch(t, []string{"/data0:/data:rw:161061273600", mountBinding}, engine.Volumes)
		// volume_changed is core's signal that the realloc brings new
		// volumes; a binding resized on its own device is not one
		require.False(t, engine.VolumeChanged, "only the size changed")
		require.Equal(t, 150*GiB, engine.Storage)
		require.Equal(t, map[string]string{"/dev/vda": "100:100:1048576:1048576"}, engine.IOPSOptions)

		_, after := e.record(t, "storage", "n1")
		require.Equal(t, version, after, "calculate-realloc is a pure calculation")
		grown, delta = resp.WorkloadResource, resp.DeltaResource
	})

	step(t, "set-node-resource-usage commits the realloc delta the way core does", func(t *testing.T) {
		resp, err := p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, []plugintypes.WorkloadResource{delta}, true, plugins.Incr)
		require.NoError(t, err)
		require.Equal(t, storageNode{
			Volumes: map[string]int64{"/data0": 250 * GiB, "/data1": 0},
			Disks:   []diskQuota{vdaUsage(200, 200, 2<<20, 2<<20)},
			Storage: 250 * GiB,
		}, asStorageNode(t, resp.After))
		require.Empty(t, nodeInfo(t, p, "n1", []plugintypes.WorkloadResource{grown, workloads[1]}).Diffs)
	})

	step(t, "calculate-realloc shrinks a binding by a negative size and answers a negative delta", func(t *testing.T) {
		resp, err := p.CalculateRealloc(t.Context(), "n1", grown, params{"volumes": []string{"AUTO:/data:rw:-50G"}})
		require.NoError(t, err)
		w := asStorageWorkload(t, resp.WorkloadResource)
		require.Equal(t, map[string]map[string]int64{autoBinding: {"/data0": 100 * GiB}}, w.VolumePlanRequest)
		require.Equal(t, 100*GiB, w.StorageRequest)
		d := asStorageWorkload(t, resp.DeltaResource)
		require.Equal(t, map[string]int64{"/data0": -50 * GiB}, nonZero(planBytes(d.VolumePlanRequest)))
		require.Equal(t, -50*GiB, d.StorageRequest)
		require.False(t, asStorageEngine(t, resp.EngineParams).VolumeChanged, "only the size changed")

		after, err := p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, []plugintypes.WorkloadResource{resp.DeltaResource}, true, plugins.Incr)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"/data0": 200 * GiB, "/data1": 0}, asStorageNode(t, after.After).Volumes)
		require.Empty(t, nodeInfo(t, p, "n1", workloads).Diffs)
	})

	step(t, "calculate-realloc of the storage budget alone leaves the volumes as they are", func(t *testing.T) {
		resp, err := p.CalculateRealloc(t.Context(), "n1", workloads[0], params{"storage": "10G"})
		require.NoError(t, err)
		engine := asStorageEngine(t, resp.EngineParams)
		require.False(t, engine.VolumeChanged, "the bind list did not change")
		require.ElementsMatch(t, []string{"/data0:/data:rw:107374182400", mountBinding}, engine.Volumes)
		w := asStorageWorkload(t, resp.WorkloadResource)
		require.Equal(t, 110*GiB, w.StorageRequest)
		require.Equal(t, map[string]map[string]int64{autoBinding: {"/data0": 100 * GiB}}, w.VolumePlanRequest)
		d := asStorageWorkload(t, resp.DeltaResource)
		require.Equal(t, 10*GiB, d.StorageRequest)
		require.Empty(t, nonZero(planBytes(d.VolumePlanRequest)))
	})

	step(t, "calculate-realloc refuses growth that does not fit, and core gets an error, not an answer", func(t *testing.T) {
		resp, err := p.CalculateRealloc(t.Context(), "n1", workloads[0], params{"volumes": []string{"AUTO:/data:rw:2T"}})
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		require.Nil(t, resp.WorkloadResource)
		require.Nil(t, resp.DeltaResource)
		require.Nil(t, resp.EngineParams)
	})

	step(t, "calculate-deploy refuses more workloads than fit, and core gets an error, not an answer", func(t *testing.T) {
		resp, err := p.CalculateDeploy(t.Context(), "n1", 100, deployRequest)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		require.Nil(t, resp.EnginesParams)
		require.Nil(t, resp.WorkloadsResource)
	})

	step(t, "calculate-remap moves no volume of a running workload", func(t *testing.T) {
		resp, err := p.CalculateRemap(t.Context(), "n1", map[string]plugintypes.WorkloadResource{"w1": workloads[0], "w2": workloads[1]})
		require.NoError(t, err)
		require.Empty(t, resp.EngineParamsMap)
	})

	step(t, "set-node-resource-usage releases the workloads core removes", func(t *testing.T) {
		resp, err := p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, workloads, true, plugins.Decr)
		require.NoError(t, err)
		require.Equal(t, storageNode{
			Volumes: map[string]int64{"/data0": 0, "/data1": 0}, Disks: []diskQuota{vdaUsage(0, 0, 0, 0)},
		}, asStorageNode(t, resp.After))
		require.Empty(t, nodeInfo(t, p, "n1", nil).Diffs)
	})
}

func TestStorageCapacityChangesAndCoreRollback(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "storage")
	addNode(t, p, "n1", n1Request, nil)
	deploy, err := p.CalculateDeploy(t.Context(), "n1", 1, params{"volumes": []string{"AUTO:/data:rw:100G"}})
	require.NoError(t, err)
	_, err = p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, deploy.WorkloadsResource, true, plugins.Incr)
	require.NoError(t, err)

	cases := []struct {
		name    string
		request params
		delta   bool
		incr    bool
		check   func(t *testing.T, before, after storageNode)
	}{
		{
			name:    "adding a volume with delta grows the volumes and the storage total",
			request: params{"volumes": []string{"/data2:1T"}},
			delta:   true, incr: plugins.Incr,
			check: func(t *testing.T, before, after storageNode) {
				require.Equal(t, map[string]int64{"/data0": TiB, "/data1": TiB, "/data2": TiB}, after.Volumes)
				require.Equal(t, before.Storage+TiB, after.Storage)
				require.Equal(t, before.Disks, after.Disks)
			},
		},
		{
			name:    "taking a whole volume away with delta removes it and its size",
			request: params{"volumes": []string{"/data1:1T"}},
			delta:   true, incr: plugins.Decr,
			check: func(t *testing.T, before, after storageNode) {
				require.Equal(t, map[string]int64{"/data0": TiB}, after.Volumes)
				require.Equal(t, before.Storage-TiB, after.Storage)
			},
		},
		{
			name:    "an absolute storage becomes the node's storage total",
			request: params{"storage": "5T"},
			delta:   false,
			check: func(t *testing.T, before, after storageNode) {
				require.Equal(t, 5*TiB, after.Storage)
				require.Equal(t, before.Volumes, after.Volumes)
				require.Equal(t, before.Disks, after.Disks)
			},
		},
		{
			name:    "an absolute request keeps every key it leaves out",
			request: params{"disks": []string{"/dev/vda:/,/data0:2000:2000:2G:2G"}},
			delta:   false,
			check: func(t *testing.T, before, after storageNode) {
				require.Equal(t, []diskQuota{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 2000, WriteIOPS: 2000, ReadBPS: 2 * GiB, WriteBPS: 2 * GiB}}, after.Disks)
				require.Equal(t, before.Volumes, after.Volumes)
				require.Equal(t, before.Storage, after.Storage)
			},
		},
		{
			name:    "adding a disk with delta keeps the disks already there",
			request: params{"disks": []string{"/dev/vdb:/data1:500:500:100M:100M"}},
			delta:   true, incr: plugins.Incr,
			check: func(t *testing.T, before, after storageNode) {
				require.ElementsMatch(t, []diskQuota{vda, {Device: "/dev/vdb", Mounts: []string{"/data1"}, ReadIOPS: 500, WriteIOPS: 500, ReadBPS: 100 << 20, WriteBPS: 100 << 20}}, after.Disks)
				require.Equal(t, before.Storage, after.Storage)
			},
		},
		{
			name:    "rm-disks in absolute mode removes the disk",
			request: params{"rm-disks": "/dev/vda"},
			delta:   false,
			check: func(t *testing.T, before, after storageNode) {
				require.Empty(t, after.Disks)
				require.Equal(t, before.Volumes, after.Volumes)
				require.Equal(t, before.Storage, after.Storage)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name+", and core's rollback with the before snapshot restores the record exactly", func(t *testing.T) {
			origin := nodeInfo(t, p, "n1", nil)

			resp, err := p.SetNodeResourceCapacity(t.Context(), "n1", nil, tc.request, tc.delta, tc.incr)
			require.NoError(t, err)
			require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, resp.Before), "before is the capacity as it was")
			tc.check(t, asStorageNode(t, resp.Before), asStorageNode(t, resp.After))
			require.JSONEq(t, mustJSON(t, resp.After), mustJSON(t, nodeInfo(t, p, "n1", nil).Capacity), "after is the capacity stored")

			// what cobalt's rollback sends when another plugin failed
			_, err = p.SetNodeResourceCapacity(t.Context(), "n1", nil, resp.Before, false, false)
			require.NoError(t, err)
			restored := nodeInfo(t, p, "n1", nil)
			require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity), "capacity after the rollback")
			require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage), "usage after the rollback")
		})
	}

	t.Run("a capacity below what the node uses is refused and nothing is written", func(t *testing.T) {
		_, version := e.record(t, "storage", "n1")
		resp, err := p.SetNodeResourceCapacity(t.Context(), "n1", nil, params{"volumes": []string{"/data0:1T"}}, true, plugins.Decr)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		require.Nil(t, resp.Before)
		_, after := e.record(t, "storage", "n1")
		require.Equal(t, version, after)
	})

	t.Run("rm-disks with delta is refused and nothing is written", func(t *testing.T) {
		_, version := e.record(t, "storage", "n1")
		_, err := p.SetNodeResourceCapacity(t.Context(), "n1", nil, params{"rm-disks": "/dev/vda"}, true, plugins.Decr)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		_, after := e.record(t, "storage", "n1")
		require.Equal(t, version, after)
	})
}

func TestStorageUsageChangesAndCoreRollback(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "storage")
	addNode(t, p, "n1", n1Request, nil)
	deploy, err := p.CalculateDeploy(t.Context(), "n1", 2, params{"volumes": []string{"AUTO:/data:rw:100G", "/data0/logs:/logs:rw:0:100:100:1M:1M"}})
	require.NoError(t, err)
	_, err = p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, deploy.WorkloadsResource[:1], true, plugins.Incr)
	require.NoError(t, err)

	cases := []struct {
		name            string
		resource        params
		request         params
		workloads       []plugintypes.WorkloadResource
		delta, incr     bool
		check           func(t *testing.T, after storageNode)
		wantBeforeUsage bool
	}{
		{
			name:      "workloads added with delta, as Alloc commits them",
			workloads: deploy.WorkloadsResource[1:], delta: true, incr: plugins.Incr,
			check: func(t *testing.T, after storageNode) {
				require.Equal(t, 200*GiB, after.Storage)
				require.Equal(t, int64(200*GiB), after.Volumes["/data0"])
			},
		},
		{
			name:      "workloads released with delta, as a removal commits them",
			workloads: deploy.WorkloadsResource[:1], delta: true, incr: plugins.Decr,
			check: func(t *testing.T, after storageNode) {
				require.Equal(t, storageNode{Volumes: map[string]int64{"/data0": 0, "/data1": 0}, Disks: []diskQuota{vdaUsage(0, 0, 0, 0)}}, after)
			},
		},
		{
			name: "a stored usage written absolutely",
			resource: params{
				"volumes": map[string]int64{"/data0": 300 * GiB, "/data1": 10 * GiB},
				"disks":   []diskQuota{vdaUsage(10, 20, 30, 40)},
				"storage": 400 * GiB,
			},
			delta: false,
			check: func(t *testing.T, after storageNode) {
				require.Equal(t, storageNode{
					Volumes: map[string]int64{"/data0": 300 * GiB, "/data1": 10 * GiB},
					Disks:   []diskQuota{vdaUsage(10, 20, 30, 40)},
					Storage: 400 * GiB,
				}, after)
			},
		},
		{
			name:    "a usage request in request form, added with delta",
			request: params{"volumes": []string{"/data1:20G"}},
			delta:   true, incr: plugins.Incr,
			check: func(t *testing.T, after storageNode) {
				require.Equal(t, int64(20*GiB), after.Volumes["/data1"])
				require.Equal(t, int64(100*GiB), after.Volumes["/data0"])
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name+", and core's rollback with the before snapshot restores the usage exactly", func(t *testing.T) {
			origin := nodeInfo(t, p, "n1", nil)

			resp, err := p.SetNodeResourceUsage(t.Context(), "n1", tc.resource, tc.request, tc.workloads, tc.delta, tc.incr)
			require.NoError(t, err)
			require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, resp.Before), "before is the usage as it was")
			tc.check(t, asStorageNode(t, resp.After))
			require.JSONEq(t, mustJSON(t, resp.After), mustJSON(t, nodeInfo(t, p, "n1", nil).Usage), "after is the usage stored")

			// what cobalt's rollback sends when another plugin failed
			_, err = p.SetNodeResourceUsage(t.Context(), "n1", resp.Before, nil, nil, false, false)
			require.NoError(t, err)
			restored := nodeInfo(t, p, "n1", nil)
			require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage), "usage after the rollback")
			require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity), "capacity after the rollback")
		})
	}

	t.Run("usage above capacity is refused and nothing is written", func(t *testing.T) {
		_, version := e.record(t, "storage", "n1")
		_, err := p.SetNodeResourceUsage(t.Context(), "n1", nil, params{"volumes": []string{"/data1:2T"}}, nil, true, plugins.Incr)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		_, after := e.record(t, "storage", "n1")
		require.Equal(t, version, after)
	})
}

func TestStorageRemoveNodeAndCoreRestore(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "storage")
	addNode(t, p, "n1", n1Request, nil)
	deploy, err := p.CalculateDeploy(t.Context(), "n1", 1, params{"volumes": []string{"AUTO:/data:rw:100G", "/data0/logs:/logs:rw:0:100:100:1M:1M"}})
	require.NoError(t, err)
	_, err = p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, deploy.WorkloadsResource, true, plugins.Incr)
	require.NoError(t, err)
	origin := nodeInfo(t, p, "n1", nil)

	step(t, "remove-node forgets the node", func(t *testing.T) {
		_, err := p.RemoveNode(t.Context(), "n1")
		require.NoError(t, err)
		stored, _ := e.record(t, "storage", "n1")
		require.Nil(t, stored, "the record is gone from etcd")
		info := nodeInfo(t, p, "n1", nil)
		require.Empty(t, info.Capacity)
		require.Empty(t, info.Usage)
	})

	step(t, "remove-node of a node already gone succeeds", func(t *testing.T) {
		_, err := p.RemoveNode(t.Context(), "n1")
		require.NoError(t, err)
	})

	step(t, "set-node-resource-info with what get-node-resource-info answered restores the node exactly", func(t *testing.T) {
		_, err := p.SetNodeResourceInfo(t.Context(), "n1", origin.Capacity, origin.Usage)
		require.NoError(t, err)
		restored := nodeInfo(t, p, "n1", deploy.WorkloadsResource)
		require.JSONEq(t, mustJSON(t, origin.Capacity), mustJSON(t, restored.Capacity))
		require.JSONEq(t, mustJSON(t, origin.Usage), mustJSON(t, restored.Usage))
		require.Empty(t, restored.Diffs)
	})
}

func TestStorageUnknownNode(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "storage")
	volumeRequest := params{"volumes": []string{"AUTO:/data:rw:1G"}}

	t.Run("get-node-resource-info gives core an empty resource, not an error", func(t *testing.T) {
		info := nodeInfo(t, p, "ghost", nil)
		require.Empty(t, info.Capacity)
		require.Empty(t, info.Usage)
		require.Empty(t, info.Diffs)
	})

	t.Run("get-nodes-deploy-capacity lets it take workloads that ask no storage, and no others", func(t *testing.T) {
		resp, err := p.GetNodesDeployCapacity(t.Context(), []string{"ghost"}, params{})
		require.NoError(t, err)
		checkDeployCapacity(t, resp, map[string]capacityEntry{"ghost": {capacity: maxDeploy}}, true)

		resp, err = p.GetNodesDeployCapacity(t.Context(), []string{"ghost"}, volumeRequest)
		require.NoError(t, err)
		checkDeployCapacity(t, resp, map[string]capacityEntry{}, true)
	})

	t.Run("calculate-deploy plans workloads that ask no storage", func(t *testing.T) {
		resp, err := p.CalculateDeploy(t.Context(), "ghost", 2, nil)
		require.NoError(t, err)
		require.Len(t, resp.EnginesParams, 2)
		require.Len(t, resp.WorkloadsResource, 2)
		for i := range 2 {
			engine := asStorageEngine(t, resp.EnginesParams[i])
			require.Empty(t, engine.Volumes)
			require.Zero(t, engine.Storage)
			require.False(t, engine.VolumeChanged)
			w := asStorageWorkload(t, resp.WorkloadsResource[i])
			require.Zero(t, w.StorageRequest)
			require.Empty(t, w.VolumePlanRequest)
		}
	})

	t.Run("calculate-deploy refuses workloads that ask storage", func(t *testing.T) {
		resp, err := p.CalculateDeploy(t.Context(), "ghost", 1, volumeRequest)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		require.Nil(t, resp.WorkloadsResource)
	})

	t.Run("get-most-idle-node answers a node it has never seen", func(t *testing.T) {
		resp, err := p.GetMostIdleNode(t.Context(), []string{"ghost"})
		require.NoError(t, err)
		require.Equal(t, "ghost", resp.Nodename)
		require.Equal(t, 1, resp.Priority)
	})

	t.Run("fix-node-resource fails with an error core surfaces", func(t *testing.T) {
		resp, err := p.FixNodeResource(t.Context(), "ghost", nil)
		require.Error(t, err)
		require.Equal(t, 128, exitCode(t, err))
		require.Nil(t, resp.Capacity)
	})

	t.Run("remove-node succeeds", func(t *testing.T) {
		_, err := p.RemoveNode(t.Context(), "ghost")
		require.NoError(t, err)
	})

	t.Run("set-node-resource-capacity creates the record, and core's rollback leaves it empty again", func(t *testing.T) {
		resp, err := p.SetNodeResourceCapacity(t.Context(), "fresh", nil, params{"volumes": []string{"/data0:1T"}}, true, plugins.Incr)
		require.NoError(t, err)
		require.Equal(t, storageNode{Volumes: map[string]int64{}, Disks: []diskQuota{}}, asStorageNode(t, resp.Before))
		require.Equal(t, storageNode{Volumes: map[string]int64{"/data0": TiB}, Disks: []diskQuota{}, Storage: TiB}, asStorageNode(t, resp.After))
		stored, _ := e.record(t, "storage", "fresh")
		require.NotNil(t, stored)

		_, err = p.SetNodeResourceCapacity(t.Context(), "fresh", nil, resp.Before, false, false)
		require.NoError(t, err)
		info := nodeInfo(t, p, "fresh", nil)
		require.Equal(t, storageNode{Volumes: map[string]int64{}, Disks: []diskQuota{}}, asStorageNode(t, info.Capacity))
	})

	t.Run("set-node-resource-usage creates the record from an empty one", func(t *testing.T) {
		resp, err := p.SetNodeResourceUsage(t.Context(), "fresh2", nil, nil, nil, true, plugins.Incr)
		require.NoError(t, err)
		require.Equal(t, storageNode{Volumes: map[string]int64{}, Disks: []diskQuota{}}, asStorageNode(t, resp.After))
		stored, _ := e.record(t, "storage", "fresh2")
		require.NotNil(t, stored)
	})
}

func TestStorageMostIdleNodeAndName(t *testing.T) {
	e := newEnv(t)
	p := e.plugin(t, "storage")
	addNode(t, p, "n1", n1Request, nil)
	addNode(t, p, "n2", params{"volumes": []string{"/data0:1T"}}, nil)

	t.Run("get-most-idle-node answers the first node it is given with priority 1", func(t *testing.T) {
		for _, nodes := range [][]string{{"n2", "n1"}, {"n1", "n2"}} {
			resp, err := p.GetMostIdleNode(t.Context(), nodes)
			require.NoError(t, err)
			require.Equal(t, nodes[0], resp.Nodename)
			require.Equal(t, 1, resp.Priority)
		}
	})

	t.Run("the name verb prints the resource name core knows the binary by", func(t *testing.T) {
		stdout, stderr, code := e.run(t, "storage", "name", nil)
		require.Zero(t, code, stderr)
		var name string
		require.NoError(t, json.Unmarshal([]byte(stdout), &name))
		require.Equal(t, p.Name(), name)
	})
}

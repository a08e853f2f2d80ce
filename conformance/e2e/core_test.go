package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	pb "github.com/projecteru2/core/rpc/gen"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// node is what eru-cli sends for `node add`: cpumem's flags, and our
// plugins' resources under their names.
func node() res {
	return res{
		"cpumem":  map[string]any{"cpu": 8, "memory": "16G"},
		"compute": map[string]any{"cpu": 8, "memory": "16G"},
		"storage": map[string]any{
			"volumes": []string{"/data0:100G", "/data1:100G", "/data2:50G"},
			"disks":   []string{"/dev/vda:/,/data0,/data1,/data2:1000:1000:100M:100M"},
			"storage": "50G",
		},
	}
}

// web is a deploy request: a 10G volume, one CPU and 1G of memory.
func web() res {
	return res{
		"cpumem":  map[string]any{"cpu-request": 1, "memory-request": GiB},
		"compute": map[string]any{"cpu": 1, "memory": "1G"},
		"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:10G"}},
	}
}

func ids(msgs []*pb.CreateWorkloadMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Id
	}
	return out
}

func (c *cluster) workload(t *testing.T, id string) *pb.Workload {
	t.Helper()
	w, err := c.rpc.GetWorkload(ctx(t), &pb.WorkloadID{Id: id})
	require.NoError(t, err)
	return w
}

func storageCapacity(t *testing.T, c *cluster, node string) storageNode {
	t.Helper()
	return decode[storageNode](t, c.nodeResource(t, node, false).Capacity["storage"])
}

func computeCapacity(t *testing.T, c *cluster, node string) computeNode {
	t.Helper()
	return decode[computeNode](t, c.nodeResource(t, node, false).Capacity["compute"])
}

// TestCoreDrivesBothPlugins is the eru flow through core's gRPC API, in
// order: pod and nodes, capacity, deploys, reallocs, removal, node changes.
func TestCoreDrivesBothPlugins(t *testing.T) {
	c := theCluster(t)
	const pod = "flow"
	nodes := []string{"f1", "f2", "f3"}

	step(t, "pod add and node add record both plugins' capacity", func(t *testing.T) {
		c.addPod(t, pod)
		for _, name := range nodes {
			n, err := c.addNode(t, pod, name, node())
			require.NoError(t, err, name)
			var capacity map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(n.ResourceCapacity), &capacity))
			require.ElementsMatch(t, []string{"cpumem", "compute", "storage"}, keys(capacity))
			s := decode[storageNode](t, capacity["storage"])
			require.Equal(t, map[string]int64{"/data0": 100 * GiB, "/data1": 100 * GiB, "/data2": 50 * GiB}, s.Volumes)
			require.Equal(t, 300*GiB, s.Storage, "the budget plus the volumes")
			require.Equal(t, []disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0", "/data1", "/data2"}, ReadIOPS: 1000, WriteIOPS: 1000, ReadBPS: 100 << 20, WriteBPS: 100 << 20}}, s.Disks)
			cp := decode[computeNode](t, capacity["compute"])
			require.Equal(t, int64(8000), cp.CPUMillis)
			require.Equal(t, 16*GiB, cp.MemoryBytes)
		}
	})

	step(t, "node get answers the node with both plugins' capacity and nothing used", func(t *testing.T) {
		n, err := c.rpc.GetNode(ctx(t), &pb.GetNodeOptions{Nodename: "f1"})
		require.NoError(t, err)
		require.Equal(t, pod, n.Podname)
		require.True(t, n.Available)
		require.Contains(t, n.ResourceCapacity, `"storage":{`)
		require.Contains(t, n.ResourceCapacity, `"compute":{`)
		c.requireConsistent(t, nodes...)
		require.Equal(t, zero, c.nodeResource(t, "f1", false).stored(t))
	})

	step(t, "a second node add of the same name fails and changes nothing", func(t *testing.T) {
		before := c.nodeResource(t, "f1", false)
		_, err := c.addNode(t, pod, "f1", node())
		require.Error(t, err)
		require.Equal(t, before, c.nodeResource(t, "f1", false))
	})

	step(t, "known issue of core: a second node add naming only some plugins removes the node from the others", func(t *testing.T) {
		// core's resource manager counts a plugin the request does not name
		// as having added the node, and its rollback of the refused add
		// calls remove-node on it
		c.addPod(t, "scratch")
		_, err := c.addNode(t, "scratch", "scratch", node())
		require.NoError(t, err)
		_, err = c.addNode(t, "scratch", "scratch", res{"storage": map[string]any{"volumes": []string{"/data0:1T"}}})
		require.Error(t, err)
		require.NotEmpty(t, c.keys(t, pluginPrefix+"/resource/storage/scratch"), "storage refused and kept its record")
		require.Empty(t, c.keys(t, pluginPrefix+"/resource/compute/scratch"), "core removed the node from compute")
		require.Empty(t, c.keys(t, corePrefix+"/resource/cpumem/scratch"), "and from its own cpumem")
		// and core can no longer remove the node: reading it fails in cpumem
		_, err = c.rpc.RemoveNode(ctx(t), &pb.RemoveNodeOptions{Nodename: "scratch"})
		require.ErrorContains(t, err, "cpumem")
		// what an operator is left with: deleting the node's keys by hand
		for _, prefix := range []string{corePrefix + "/node/scratch", pluginPrefix + "/resource/storage/scratch", pluginPrefix + "/nodes/scratch"} {
			_, err := c.kv.Delete(ctx(t), prefix, clientv3.WithPrefix())
			require.NoError(t, err)
		}
		_, err = c.rpc.RemovePod(ctx(t), &pb.RemovePodOptions{Name: "scratch"})
		require.NoError(t, err)
	})

	step(t, "capacity is the smallest of the plugins' answers", func(t *testing.T) {
		require.Equal(t, map[string]int64{"f1": 8, "f2": 8, "f3": 8}, c.capacities(t, pod, nodes, web()), "CPU bounds: 8 CPUs of 1")

		big := res{"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:60G"}}, "compute": map[string]any{"cpu": 0.1, "memory": "1M"}}
		require.Equal(t, map[string]int64{"f1": 2, "f2": 2, "f3": 2}, c.capacities(t, pod, nodes, big), "storage bounds: 60G fits once on each 100G device")

		_, err := c.capacity(t, pod, nodes, res{"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:101G"}}})
		require.ErrorContains(t, err, "no node meets all the resource requirements", "no device holds 101G")
	})

	var webIDs []string
	step(t, "deploys with volumes, monopoly, IOPS and compute land across the nodes and add up", func(t *testing.T) {
		// two on every node, so each node's devices fill alike
		msgs := c.spread(t, "web", pod, nodes, 2, web())
		on := map[string]int{}
		for _, m := range msgs {
			on[m.Nodename]++
		}
		require.Equal(t, map[string]int{"f1": 2, "f2": 2, "f3": 2}, on)
		webIDs = ids(msgs)

		mono := res{
			"compute": map[string]any{"cpu": 0.5, "memory": "512M"},
			"storage": map[string]any{"volumes": []string{"AUTO:/mono:mrw:20G"}},
		}
		msgs = c.spread(t, "mono", pod, []string{"f1", "f2"}, 1, mono)
		for _, m := range msgs {
			r := resourcesOf(t, c.workload(t, m.Id))
			require.Len(t, r.Storage.VolumePlanRequest, 1)
			for binding, plan := range r.Storage.VolumePlanRequest {
				require.True(t, strings.HasPrefix(binding, "AUTO:/mono:mrw:"), binding)
				require.Len(t, plan, 1)
				for device, size := range plan {
					capacity := storageCapacity(t, c, m.Nodename).Volumes[device]
					require.Equal(t, capacity, size, "a monopoly binding takes its device %s whole", device)
				}
			}
		}

		io := res{
			"compute": map[string]any{"cpu": 0.25, "memory": "256M"},
			"storage": map[string]any{"volumes": []string{"AUTO:/io:rw:5G:100:50:1M:1M"}, "storage": "1G"},
		}
		msgs = c.spread(t, "io", pod, nodes, 1, io)
		for _, m := range msgs {
			r := resourcesOf(t, c.workload(t, m.Id))
			require.Equal(t, 6*GiB, r.Storage.StorageRequest, "the volume and the flat storage")
			require.Equal(t, []int64{100, 50}, []int64{r.Storage.DisksRequest[0].ReadIOPS, r.Storage.DisksRequest[0].WriteIOPS})
		}
		c.requireConsistent(t, nodes...)
		var cpu, readIOPS int64
		for _, n := range nodes {
			u := c.nodeResource(t, n, false).stored(t)
			cpu += u.CPUMillis
			readIOPS += u.ReadIOPS["/dev/vda"]
		}
		require.Equal(t, int64(6*1000+2*500+3*250), cpu)
		require.Equal(t, int64(3*100), readIOPS)
	})

	step(t, "realloc grows, shrinks, changes storage only or CPU only, and usage follows exactly", func(t *testing.T) {
		id := webIDs[0]
		before := resourcesOf(t, c.workload(t, id))
		nodeName := c.workload(t, id).Nodename

		require.NoError(t, c.realloc(t, id, res{
			"cpumem":  map[string]any{"cpu-request": 1, "memory-request": GiB},
			"compute": map[string]any{"cpu": 1, "memory": "1G"},
			"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:5G"}},
		}))
		grown := resourcesOf(t, c.workload(t, id))
		require.Equal(t, before.Storage.StorageRequest+5*GiB, grown.Storage.StorageRequest)
		require.Equal(t, before.Compute.CPURequestMillis+1000, grown.Compute.CPURequestMillis)
		require.Equal(t, before.Compute.MemoryRequest+GiB, grown.Compute.MemoryRequest)
		c.requireConsistent(t, nodeName)

		require.NoError(t, c.realloc(t, id, res{
			"cpumem":  map[string]any{"cpu-request": -1, "memory-request": -GiB},
			"compute": map[string]any{"cpu": -1, "memory": "-1G"},
			"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:-5G"}},
		}))
		require.Equal(t, before, resourcesOf(t, c.workload(t, id)), "a shrink by the same amounts is the workload as deployed")
		c.requireConsistent(t, nodeName)

		require.NoError(t, c.realloc(t, id, res{"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:2G"}}}))
		only := resourcesOf(t, c.workload(t, id))
		require.Equal(t, before.Storage.StorageRequest+2*GiB, only.Storage.StorageRequest)
		require.Equal(t, before.Compute, only.Compute, "a storage-only realloc leaves compute alone")
		c.requireConsistent(t, nodeName)

		require.NoError(t, c.realloc(t, id, res{"compute": map[string]any{"cpu": 0.5}}))
		cpu := resourcesOf(t, c.workload(t, id))
		require.Equal(t, only.Storage, cpu.Storage, "a CPU-only realloc leaves storage alone")
		require.Equal(t, before.Compute.CPURequestMillis+500, cpu.Compute.CPURequestMillis)
		c.requireConsistent(t, nodeName)

		err := c.realloc(t, id, res{"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:500G"}}})
		require.Error(t, err, "no device holds 500G more")
		require.Equal(t, cpu, resourcesOf(t, c.workload(t, id)), "a refused realloc changes nothing")
		c.requireConsistent(t, nodeName)
	})

	step(t, "replace keeps a workload's resources, dissociate gives them back", func(t *testing.T) {
		old := c.workload(t, webIDs[1])
		usageBefore := c.nodeResource(t, old.Nodename, false).stored(t)
		stream, err := c.rpc.ReplaceWorkload(ctx(t), &pb.ReplaceOptions{
			DeployOpt: &pb.DeployOptions{
				Name: "web", Entrypoint: &pb.EntrypointOptions{Name: "web", Commands: []string{"sleep", "infinity"}},
				Podname: pod, Image: "mock-image:2", Count: 1,
			},
			IDs: []string{old.Id},
		})
		require.NoError(t, err)
		var replaced string
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			require.Empty(t, m.Error)
			require.NotNil(t, m.Create)
			require.True(t, m.Create.Success, m.Create.Error)
			require.True(t, m.Remove.Success)
			replaced = m.Create.Id
		}
		require.NotEmpty(t, replaced)
		_, err = c.rpc.GetWorkload(ctx(t), &pb.WorkloadID{Id: old.Id})
		require.Error(t, err, "the old workload is gone")
		nw := c.workload(t, replaced)
		require.Equal(t, old.Nodename, nw.Nodename)
		require.Equal(t, resourcesOf(t, old), resourcesOf(t, nw), "the new workload holds the old one's resources")
		require.Equal(t, usageBefore, c.nodeResource(t, old.Nodename, false).stored(t), "usage unchanged")
		c.requireConsistent(t, old.Nodename)

		gone := c.workload(t, webIDs[2])
		dstream, err := c.rpc.DissociateWorkload(ctx(t), &pb.DissociateWorkloadOptions{IDs: []string{gone.Id}})
		require.NoError(t, err)
		for {
			m, err := dstream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			require.Empty(t, m.Error)
		}
		_, err = c.rpc.GetWorkload(ctx(t), &pb.WorkloadID{Id: gone.Id})
		require.Error(t, err, "core forgot the dissociated workload")
		c.requireConsistent(t, gone.Nodename)
	})

	step(t, "removing every workload brings usage back to exactly zero", func(t *testing.T) {
		var all []string
		for _, n := range nodes {
			for _, w := range c.workloads(t, n) {
				all = append(all, w.Id)
			}
		}
		require.Len(t, all, 6+2+3-1, "all deployed, less the dissociated one")
		c.remove(t, all...)
		for _, n := range nodes {
			require.Empty(t, c.workloads(t, n))
			r := c.nodeResource(t, n, false)
			require.Empty(t, r.Diffs)
			require.Equal(t, zero, r.stored(t), "node %s", n)
		}
	})

	computeOnly := func(cpu float64) res { return res{"compute": map[string]any{"cpu": cpu, "memory": "1G"}} }

	step(t, "overcommit set-defaults and set-node change core's next capacity, and evict nothing", func(t *testing.T) {
		require.Equal(t, map[string]int64{"f2": 2}, c.capacities(t, pod, []string{"f2"}, computeOnly(4)), "8 CPUs at 1x")
		c.operator(t, "compute", "overcommit", "set-defaults", "--cpu", "2000", "--memory", "1000")
		require.Equal(t, map[string]int64{"f2": 4}, c.capacities(t, pod, []string{"f2"}, computeOnly(4)), "8 CPUs at 2x")
		c.operator(t, "compute", "overcommit", "set-node", "f2", "--cpu", "4000")
		require.Equal(t, map[string]int64{"f2": 8}, c.capacities(t, pod, []string{"f2"}, computeOnly(4)), "f2's own 4x")
		require.Equal(t, map[string]int64{"f1": 4}, c.capacities(t, pod, []string{"f1"}, computeOnly(4)), "f1 keeps the default")

		deployed := ids(c.spread(t, "packed", pod, []string{"f2"}, 8, computeOnly(4)))
		c.operator(t, "compute", "overcommit", "set-node", "f2", "--cpu", "1000")
		_, err := c.capacity(t, pod, []string{"f2"}, computeOnly(4))
		require.ErrorContains(t, err, "no node meets", "f2 is over its schedulable CPU now")
		require.Len(t, c.workloads(t, "f2"), 8, "nothing evicted")
		c.requireConsistent(t, "f2")
		require.Equal(t, int64(32000), c.nodeResource(t, "f2", false).stored(t).CPUMillis)

		c.remove(t, deployed...)
		c.operator(t, "compute", "overcommit", "set-node", "f2")
		c.operator(t, "compute", "overcommit", "set-defaults", "--cpu", "1000", "--memory", "1000")
		require.Equal(t, map[string]int64{"f2": 2}, c.capacities(t, pod, []string{"f2"}, computeOnly(4)))
		require.Equal(t, zero, c.nodeResource(t, "f2", false).stored(t))
	})

	step(t, "a draining node is left out of placement, refuses growth and allows shrink, and stays out once drained", func(t *testing.T) {
		id := c.deployOK(t, "drained", pod, []string{"f1"}, 1, web())[0].Id
		c.operator(t, "storage", "nodes", "drain", "f1")

		caps := c.capacities(t, pod, []string{"f1", "f3"}, web())
		require.NotContains(t, caps, "f1")
		require.Contains(t, caps, "f3")
		msgs := c.deploy(t, "drained", pod, []string{"f1"}, 1, web())
		require.NotEmpty(t, msgs, "core reports the failed deploy")
		for _, m := range msgs {
			require.False(t, m.Success, "no deploy lands on a draining node")
		}
		require.Len(t, c.workloads(t, "f1"), 1)

		require.Error(t, c.realloc(t, id, res{"compute": map[string]any{"cpu": 1}}), "growth refused")
		require.Error(t, c.realloc(t, id, res{"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:1G"}}}), "growth refused")
		require.NoError(t, c.realloc(t, id, res{
			"compute": map[string]any{"cpu": -0.5},
			"storage": map[string]any{"volumes": []string{"AUTO:/data:rw:-2G"}},
		}), "shrink allowed")
		c.requireConsistent(t, "f1")

		c.remove(t, id)
		require.Equal(t, zero, c.nodeResource(t, "f1", false).stored(t))
		require.Contains(t, c.operator(t, "storage", "nodes", "get", "f1"), "DRAINED", "empty now")
		require.NotContains(t, c.capacities(t, pod, []string{"f1", "f3"}, web()), "f1", "a drained node is left out too")

		c.operator(t, "storage", "nodes", "cancel-drain", "f1")
		require.Contains(t, c.capacities(t, pod, []string{"f1"}, web()), "f1")
	})

	step(t, "a node isolated after its session lapses takes no placement, and its workloads can still be removed", func(t *testing.T) {
		deployed := ids(c.spread(t, "isolated", pod, []string{"f3"}, 2, web()))
		// a TTL long enough that the isolate right after it meets a live
		// session even on a loaded machine
		heartbeat := []string{"nodes", "heartbeat", "f3", "--ttl", "8s", "--clock-sync", "SYNCHRONIZED", "--clock-max-error", "1ms"}
		c.operator(t, "storage", heartbeat...)
		_, err := c.operatorResult(t, "storage", "nodes", "isolate", "f3")
		require.Error(t, err, "isolate is refused while the session is live")
		// the session lapses after its TTL (etcd rounds a lease up to its
		// minimum and expires it on its own schedule)
		require.Eventually(t, func() bool {
			_, err := c.operatorResult(t, "storage", "nodes", "isolate", "f3")
			return err == nil
		}, 30*time.Second, 500*time.Millisecond, "isolate succeeds once the session has lapsed")

		_, err = c.capacity(t, pod, []string{"f3"}, web())
		require.ErrorContains(t, err, "no node meets")
		c.remove(t, deployed...)
		r := c.nodeResource(t, "f3", false)
		require.Equal(t, zero, r.stored(t))
		require.Empty(t, r.Diffs)
	})

	step(t, "node set absolute and with a positive delta changes both plugins' capacity", func(t *testing.T) {
		before := storageCapacity(t, c, "f1")
		c.setNode(t, "f1", false, res{
			"compute": map[string]any{"cpu": 16, "memory": "32G"},
			"storage": map[string]any{"volumes": []string{"/data3:10G"}, "disks": []string{"/dev/vdb:/data3:500:500:50M:50M"}},
		})
		s := storageCapacity(t, c, "f1")
		require.Equal(t, map[string]int64{"/data0": 100 * GiB, "/data1": 100 * GiB, "/data2": 50 * GiB, "/data3": 10 * GiB}, s.Volumes, "absolute keeps the volumes it does not name")
		require.Equal(t, before.Storage+10*GiB, s.Storage, "the budget moves with the volumes")
		require.Len(t, s.Disks, 2)
		cp := computeCapacity(t, c, "f1")
		require.Equal(t, int64(16000), cp.CPUMillis)
		require.Equal(t, 32*GiB, cp.MemoryBytes)

		c.setNode(t, "f1", true, res{
			"compute": map[string]any{"cpu": 4, "memory": "8G"},
			"storage": map[string]any{"volumes": []string{"/data3:10G"}},
		})
		s = storageCapacity(t, c, "f1")
		require.Equal(t, 20*GiB, s.Volumes["/data3"])
		require.Equal(t, before.Storage+20*GiB, s.Storage)
		cp = computeCapacity(t, c, "f1")
		require.Equal(t, int64(20000), cp.CPUMillis)
		require.Equal(t, 40*GiB, cp.MemoryBytes)

		c.setNode(t, "f1", false, res{"storage": map[string]any{"rm-disks": []string{"/dev/vdb"}}})
		s = storageCapacity(t, c, "f1")
		require.Len(t, s.Disks, 1, "rm-disks removed /dev/vdb")
		require.Equal(t, "/dev/vda", s.Disks[0].Device)
		c.requireConsistent(t, "f1")
	})

	// Not a step: what follows does not build on it (f2 is used for it).
	t.Run("node set with a negative delta shrinks both plugins, as eru-cli node set --delta sends it", func(t *testing.T) {
		before := storageCapacity(t, c, "f2")
		c.setNode(t, "f2", true, res{
			"compute": map[string]any{"cpu": -4, "memory": "-8G"},
			"storage": map[string]any{"volumes": []string{"/data2:-20G"}, "storage": "-10G"},
		})
		s := storageCapacity(t, c, "f2")
		require.Equal(t, 30*GiB, s.Volumes["/data2"])
		require.Equal(t, before.Storage-30*GiB, s.Storage)
		cp := computeCapacity(t, c, "f2")
		require.Equal(t, int64(4000), cp.CPUMillis)
		require.Equal(t, 8*GiB, cp.MemoryBytes)
		c.requireConsistent(t, "f2")
	})

	step(t, "a node set one plugin refuses leaves our plugins as they were", func(t *testing.T) {
		before := c.nodeResource(t, "f1", false)
		_, err := c.rpc.SetNode(ctx(t), &pb.SetNodeOptions{Nodename: "f1", Delta: false, Resources: res{
			"cpumem":  map[string]any{"cpu": 4, "memory": "8G"},
			"compute": map[string]any{"cpu": 2, "memory": "4G"},
			"storage": map[string]any{"volumes": []string{"/data0:lots"}},
		}.pb(t)})
		require.ErrorContains(t, err, "storage")
		after := c.nodeResource(t, "f1", false)
		for _, name := range []string{"storage", "compute"} {
			require.JSONEq(t, string(before.Capacity[name]), string(after.Capacity[name]), name)
			require.JSONEq(t, string(before.Usage[name]), string(after.Usage[name]), name)
		}

		// Known issue of core: its rollback replays cpumem's capacity
		// snapshot as a request, where cpumem reads "memory" as a string;
		// the number reads as 0, so the node is left with no memory.
		type cpumem struct {
			CPU    float64 `json:"cpu"`
			Memory int64   `json:"memory"`
		}
		require.Equal(t, cpumem{CPU: 8, Memory: 16 * GiB}, decode[cpumem](t, before.Capacity["cpumem"]))
		require.Equal(t, cpumem{CPU: 8, Memory: 0}, decode[cpumem](t, after.Capacity["cpumem"]), "core zeroed cpumem's memory")
		// the operator's repair: set cpumem's memory again
		c.setNode(t, "f1", false, res{"cpumem": map[string]any{"memory": "16G"}})
		require.Equal(t, cpumem{CPU: 8, Memory: 16 * GiB}, decode[cpumem](t, c.nodeResource(t, "f1", false).Capacity["cpumem"]))
	})

	step(t, "core's Prometheus endpoint shows the plugins' metric families with the node's figures", func(t *testing.T) {
		id := c.deployOK(t, "measured", pod, []string{"f1"}, 1, web())[0].Id
		// core refreshes a node's plugin metrics on node add and node set
		// only (see the known issues); a set with no resources is enough
		_, err := c.rpc.SetNode(ctx(t), &pb.SetNodeOptions{Nodename: "f1"})
		require.NoError(t, err)
		labels := map[string]string{"podname": pod, "nodename": "f1"}
		eventually(t, 30*time.Second, func() error {
			families, err := new(expfmt.TextParser).TextToMetricFamilies(strings.NewReader(c.metrics(t)))
			if err != nil {
				return err
			}
			for _, name := range []string{
				"storage_capacity", "storage_used", "storage_volume_capacity", "storage_volume_used",
				"compute_cpu_ratio", "compute_cpu_schedulable_millis", "compute_cpu_used_millis",
				"compute_memory_ratio", "compute_memory_schedulable_bytes", "compute_memory_used_bytes",
			} {
				if _, ok := families[name]; !ok {
					return fmt.Errorf("no metric family %s", name)
				}
			}
			for _, want := range []struct {
				name   string
				labels map[string]string
				value  float64
			}{
				{"storage_used", labels, float64(10 * GiB)},
				{"compute_cpu_used_millis", labels, 1000},
				{"compute_cpu_schedulable_millis", labels, 20000},
				{"storage_volume_capacity", map[string]string{"podname": pod, "nodename": "f1", "device": "/data3"}, float64(20 * GiB)},
			} {
				if got := gauge(families, want.name, want.labels); got != want.value {
					return fmt.Errorf("%s%v is %v, want %v", want.name, want.labels, got, want.value)
				}
			}
			return nil
		})
		c.remove(t, id)
	})

	step(t, "a core restart mid-suite changes nothing", func(t *testing.T) {
		deployed := ids(c.spread(t, "restarted", pod, []string{"f1"}, 3, web()))
		type snapshot struct {
			Resource  nodeResource
			Workloads map[string]string
		}
		take := func() snapshot {
			s := snapshot{Resource: c.nodeResource(t, "f1", false), Workloads: map[string]string{}}
			for _, w := range c.workloads(t, "f1") {
				s.Workloads[w.Id] = w.Resources
			}
			return s
		}
		before := take()
		require.Len(t, before.Workloads, 3)
		c.stopCore()
		require.NoError(t, c.startCore())
		require.Equal(t, before, take())

		require.NoError(t, c.realloc(t, deployed[0], res{"compute": map[string]any{"cpu": 0.5}, "storage": map[string]any{"storage": "1G"}}))
		deployed = append(deployed, ids(c.deployOK(t, "restarted", pod, []string{"f1"}, 1, web()))...)
		c.requireConsistent(t, "f1")
		c.remove(t, deployed...)
		require.Equal(t, zero, c.nodeResource(t, "f1", false).stored(t))
	})

	step(t, "node remove leaves no key of the node and the name can be added again", func(t *testing.T) {
		for range 2 {
			_, err := c.addNode(t, pod, "f4", node())
			require.NoError(t, err)
			require.NotEmpty(t, c.nodeKeys(t, "f4"))
			_, err = c.rpc.RemoveNode(ctx(t), &pb.RemoveNodeOptions{Nodename: "f4"})
			require.NoError(t, err)
			require.Empty(t, c.nodeKeys(t, "f4"))
		}
	})
}

// gauge is the value of the family's sample with exactly these labels, or
// -1 when there is none.
func gauge(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) == len(labels) {
			match := true
			for k, v := range labels {
				match = match && got[k] == v
			}
			if match {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// eventually retries f until it returns nil, failing with its last error
// after within.
func eventually(t *testing.T, within time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			require.NoError(t, err, "still failing after %s", within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// setNode is core's SetNode with resources; it must succeed.
func (c *cluster) setNode(t *testing.T, node string, delta bool, r res) {
	t.Helper()
	_, err := c.rpc.SetNode(ctx(t), &pb.SetNodeOptions{Nodename: node, Delta: delta, Resources: r.pb(t)})
	require.NoError(t, err, "set node %s (delta %v) %v", node, delta, r)
}

// nodeKeys are the etcd keys, core's and the plugins', that name node.
func (c *cluster) nodeKeys(t *testing.T, node string) []string {
	t.Helper()
	var out []string
	for _, k := range append(c.keys(t, corePrefix+"/"), c.keys(t, pluginPrefix+"/")...) {
		if strings.HasSuffix(k, "/"+node) || strings.Contains(k, "/"+node+"/") || strings.Contains(k, "/"+node+":") {
			out = append(out, k)
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

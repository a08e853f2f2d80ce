package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"testing"

	pb "github.com/projecteru2/core/rpc/gen"
	"github.com/stretchr/testify/require"
)

// poolRecord is `storage pools get <id> -o json`: the pool's counters.
type poolRecord struct {
	ID       string `json:"pool_id"`
	Capacity *int64 `json:"capacity_bytes"`
	Reserved int64  `json:"reserved_bytes"`
	Version  int64  `json:"version"`
	Objects  int64  `json:"object_count"`
}

func (c *cluster) pool(t *testing.T, id string) poolRecord {
	t.Helper()
	out := c.operator(t, "storage", "pools", "get", id, "-o", "json")
	var r poolRecord
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	return r
}

// poolPlan is one entry of a workload's pool_plan_request: the object
// the workload's pool binding holds.
type poolPlan struct {
	Pool   string `json:"pool"`
	Object string `json:"object"`
	Bytes  int64  `json:"bytes"`
}

func poolPlansOf(t *testing.T, w *pb.Workload) map[string]poolPlan {
	t.Helper()
	var r struct {
		Storage struct {
			Plans map[string]poolPlan `json:"pool_plan_request"`
		} `json:"storage"`
	}
	require.NoError(t, json.Unmarshal([]byte(w.Resources), &r), "%s", w.Resources)
	return r.Storage.Plans
}

// requireNoPoolDrift runs `storage pools check`: every pool's counters
// equal what the node records hold.
func (c *cluster) requireNoPoolDrift(t *testing.T) {
	t.Helper()
	out := c.operator(t, "storage", "pools", "check")
	var check struct {
		Drifted *bool `json:"drifted"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &check), out)
	require.NotNil(t, check.Drifted, "pools check answers drifted: %s", out)
	require.False(t, *check.Drifted, "pools check: %s", out)
}

// deployOutcome deploys and returns what core answered: the stream's error,
// if any, and the messages streamed before it.
func (c *cluster) deployOutcome(t *testing.T, app, pod string, nodes []string, r res) ([]*pb.CreateWorkloadMessage, error) {
	t.Helper()
	stream, err := c.rpc.CreateWorkload(ctx(t), &pb.DeployOptions{
		DeployStrategy: pb.DeployOptions_AUTO,
		Name:           app,
		Entrypoint:     &pb.EntrypointOptions{Name: "web", Commands: []string{"sleep", "infinity"}},
		Podname:        pod,
		Nodenames:      nodes,
		Image:          "mock-image",
		Count:          1,
		Resources:      r.pb(t),
	})
	if err != nil {
		return nil, err
	}
	var msgs []*pb.CreateWorkloadMessage
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

// TestCorePlacesPoolVolumes deploys pool volumes through core on two nodes
// that share pool ceph-a, until the pool is full, and removes them: the
// pool's record follows every step exactly.
func TestCorePlacesPoolVolumes(t *testing.T) {
	c := theCluster(t)
	const pod, pool = "pools", "ceph-a"
	nodes := []string{"p1", "p2"}
	paths := map[string]string{"p1": "/mnt/ceph-a", "p2": "/srv/ceph"}
	withPool := func(path string) res {
		r := node()
		r["storage"] = map[string]any{
			"volumes":      []string{"/data0:100G"},
			"storage":      "50G",
			"pools":        []string{pool + ":" + path},
			"default-pool": pool,
		}
		return r
	}
	app := res{
		"cpumem":  map[string]any{"cpu-request": 0.1, "memory-request": 64 << 20},
		"compute": map[string]any{"cpu": 0.1, "memory": "64M"},
		"storage": map[string]any{"volumes": []string{"POOL:/data:rw:10G"}},
	}

	step(t, "node add declares the pool on both nodes, without capacity", func(t *testing.T) {
		c.addPod(t, pod)
		for _, name := range nodes {
			_, err := c.addNode(t, pod, name, withPool(paths[name]))
			require.NoError(t, err, name)
		}
		r := c.pool(t, pool)
		require.Equal(t, pool, r.ID)
		require.Nil(t, r.Capacity, "the first declaration creates the record without capacity")
		require.Zero(t, r.Reserved)
		require.Zero(t, r.Version)
	})

	step(t, "a pool without capacity takes no workload", func(t *testing.T) {
		msgs, err := c.deployOutcome(t, "pool-early", pod, nodes, app)
		for _, m := range msgs {
			require.False(t, m.Success, "workload %s on %s created", m.Id, m.Nodename)
		}
		require.True(t, err != nil || len(msgs) > 0, "core reported neither a refusal nor a failed workload")
		require.Zero(t, c.pool(t, pool).Objects)
	})

	step(t, "the operator sets the capacity", func(t *testing.T) {
		c.operator(t, "storage", "pools", "set-capacity", pool, "40G", "--if-version", "0")
		r := c.pool(t, pool)
		require.NotNil(t, r.Capacity)
		require.Equal(t, 40*GiB, *r.Capacity)
		require.Equal(t, int64(1), r.Version)
	})

	var workloads []string
	step(t, "four 10G pool volumes fill the pool across both nodes", func(t *testing.T) {
		msgs := c.spread(t, "pool-app", pod, nodes, 2, app)
		on := map[string]int{}
		objects := map[string]bool{}
		for _, m := range msgs {
			on[m.Nodename]++
			stored := c.workload(t, m.Id)
			w := resourcesOf(t, stored)
			plans := poolPlansOf(t, stored)
			require.Len(t, plans, 1, "one pool object per workload")
			for binding, plan := range plans {
				require.Equal(t, "POOL:/data:rw:10737418240:0:0:0:0", binding)
				require.Equal(t, pool, plan.Pool, "a binding naming no pool lands in the node's default pool")
				require.Regexp(t, `^v-[0-9a-f]{16}$`, plan.Object)
				require.Equal(t, 10*GiB, plan.Bytes)
				require.NotContains(t, objects, plan.Object, "object ids are unique")
				objects[plan.Object] = true
			}
			require.Empty(t, w.Storage.VolumePlanRequest, "a pool volume takes no node volume")
			require.Zero(t, w.Storage.StorageRequest, "pool bytes are not part of the flat budget")
		}
		require.Equal(t, map[string]int{"p1": 2, "p2": 2}, on)
		workloads = ids(msgs)

		r := c.pool(t, pool)
		require.Equal(t, 4*10*GiB, r.Reserved, "reserved is the sum of the workloads' objects")
		require.Equal(t, int64(4), r.Objects)
		c.requireNoPoolDrift(t)
		c.requireConsistent(t, nodes...)
	})

	step(t, "one more deploy is refused and changes nothing", func(t *testing.T) {
		msgs, err := c.deployOutcome(t, "pool-more", pod, nodes, app)
		for _, m := range msgs {
			require.False(t, m.Success, "workload %s on %s created in a full pool", m.Id, m.Nodename)
			require.Contains(t, m.Error, "not enough resource")
		}
		require.True(t, err != nil || len(msgs) > 0, "core reported neither a refusal nor a failed workload")

		// the pool is what is full: the same request without the pool
		// volume still fits on both nodes
		_, err = c.capacity(t, pod, nodes, app)
		require.ErrorContains(t, err, "no node meets all the resource requirements")
		noPool := res{"cpumem": app["cpumem"], "compute": app["compute"], "storage": map[string]any{"volumes": []string{"AUTO:/data:rw:10G"}}}
		for name, n := range c.capacities(t, pod, nodes, noPool) {
			require.Positive(t, n, name)
		}
		r := c.pool(t, pool)
		require.Equal(t, 40*GiB, r.Reserved)
		require.Equal(t, int64(4), r.Objects)
		c.requireNoPoolDrift(t)
		for _, name := range nodes {
			require.Len(t, c.workloads(t, name), 2, name)
		}
	})

	step(t, "removing the workloads through core gives the pool back whole", func(t *testing.T) {
		c.remove(t, workloads...)
		r := c.pool(t, pool)
		require.Zero(t, r.Reserved)
		require.Zero(t, r.Objects)
		c.requireNoPoolDrift(t)
		for _, name := range nodes {
			require.Equal(t, zero, c.nodeResource(t, name, false).stored(t), name)
		}
	})
}

// TestCoreFailsAPoolVolumeOver runs a failover through core: a workload's
// pool object on a node that dies is attached by a new workload on another
// node that reaches the pool (POOL@ceph-f/<object>); the pool reserves it
// once throughout, core's removal of the dead workload releases nothing,
// and the removal of the new one ends the object.
func TestCoreFailsAPoolVolumeOver(t *testing.T) {
	c := theCluster(t)
	const pod, pool = "failover", "ceph-f"
	nodes := []string{"fo1", "fo2"}
	app := func(binding string) res {
		return res{
			"cpumem":  map[string]any{"cpu-request": 0.1, "memory-request": 64 << 20},
			"compute": map[string]any{"cpu": 0.1, "memory": "64M"},
			"storage": map[string]any{"volumes": []string{binding}},
		}
	}
	type object struct {
		ID   string `json:"object_id"`
		Node string `json:"node_id"`
		Held bool   `json:"held"`
	}
	objects := func(t *testing.T) []object {
		t.Helper()
		out := c.operator(t, "storage", "pools", "objects", pool)
		var o struct {
			Objects []object `json:"objects"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &o), out)
		return o.Objects
	}
	requirePool := func(t *testing.T, reserved, count int64) {
		t.Helper()
		r := c.pool(t, pool)
		require.Equal(t, reserved, r.Reserved)
		require.Equal(t, count, r.Objects)
		c.requireNoPoolDrift(t)
	}

	c.addPod(t, pod)
	for _, name := range nodes {
		r := node()
		r["storage"] = map[string]any{"volumes": []string{"/data0:100G"}, "storage": "50G", "pools": []string{pool + ":/mnt/" + name + "/" + pool}}
		_, err := c.addNode(t, pod, name, r)
		require.NoError(t, err, name)
	}
	c.operator(t, "storage", "pools", "set-capacity", pool, "40G", "--if-version", "0")

	var dead, object0 string
	step(t, "a workload on fo1 places a 10G object", func(t *testing.T) {
		dead = c.deployOK(t, "failover-old", pod, []string{"fo1"}, 1, app("POOL@"+pool+":/data:rw:10G"))[0].Id
		for _, p := range poolPlansOf(t, c.workload(t, dead)) {
			object0 = p.Object
		}
		require.Equal(t, []object{{ID: object0, Node: "fo1", Held: true}}, objects(t))
		requirePool(t, 10*GiB, 1)
	})
	step(t, "fo1 is isolated: its object is unheld and still reserved", func(t *testing.T) {
		c.operator(t, "storage", "nodes", "isolate", "fo1")
		require.Equal(t, []object{{ID: object0, Node: "fo1", Held: false}}, objects(t))
		requirePool(t, 10*GiB, 1)
	})
	var fresh string
	step(t, "core deploys on fo2 attaching the object: the same object, held by fo2, reserved once", func(t *testing.T) {
		fresh = c.deployOK(t, "failover-new", pod, []string{"fo2"}, 1, app("POOL@"+pool+"/"+object0+":/data:rw"))[0].Id
		plans := poolPlansOf(t, c.workload(t, fresh))
		require.Len(t, plans, 1)
		for _, p := range plans {
			require.Equal(t, poolPlan{Pool: pool, Object: object0, Bytes: 10 * GiB}, p, "the size comes from the object")
		}
		require.Equal(t, []object{{ID: object0, Node: "fo2", Held: true}}, objects(t))
		requirePool(t, 10*GiB, 1)
	})
	step(t, "core's removal of the dead workload releases nothing", func(t *testing.T) {
		c.remove(t, dead)
		require.Equal(t, []object{{ID: object0, Node: "fo2", Held: true}}, objects(t))
		requirePool(t, 10*GiB, 1)
	})
	step(t, "the removal of the failed-over workload ends the object", func(t *testing.T) {
		c.remove(t, fresh)
		require.Empty(t, objects(t))
		requirePool(t, 0, 0)
	})
}

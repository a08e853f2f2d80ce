package conformance

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/projecteru2/core/resource/plugins"
	plugintypes "github.com/projecteru2/core/resource/plugins/types"
	resourcetypes "github.com/projecteru2/core/resource/types"
	"github.com/stretchr/testify/require"
)

// poolNode is what eru-cli sends for `node add` of a node that mounts pool
// ceph-a at path.
func poolNode(path string) resourcetypes.Resources {
	return resourcetypes.Resources{
		"cpumem":  {"cpu": 4, "memory": "8G"},
		"compute": {"cpu": 4, "memory": "8G"},
		"storage": {"storage": "100G", "pools": []string{"ceph-a:" + path}},
	}
}

// poolDeploy is what eru-cli sends for `workload deploy` with one pool
// volume binding.
func poolDeploy(binding string) resourcetypes.Resources {
	return resourcetypes.Resources{
		"cpumem":  {"cpu-request": 0.5, "memory-request": 512 << 20},
		"compute": {"cpu": 0.5, "memory": "512M"},
		"storage": {"volumes": []string{binding}},
	}
}

// refusedByCompute is a workload whose compute part compute refuses, so
// that core's resource manager rolls storage back with its before.
func refusedByCompute(storage resourcetypes.RawParams) resourcetypes.Resources {
	return resourcetypes.Resources{"storage": storage, "compute": {"cpu_request_millis": "lots"}}
}

// poolState is what `storage pools get` and `storage pools objects` say
// of pool ceph-a: its counters, each object's node and use right, and
// each member's held count.
type poolState struct {
	Reserved int64
	Objects  int64
	Version  int64
	// Where is object id → "node" (held) or "node unheld".
	Where map[string]string
	// Held is member node → held_object_count.
	Held map[string]int
}

// pools reads pool ceph-a back through the operator commands, and requires
// `storage pools check` to report no drift.
func (e *env) pools(t *testing.T) poolState {
	t.Helper()
	run := func(out any, args ...string) {
		t.Helper()
		stdout, stderr, code := e.command(t, "storage", append([]string{"pools"}, args...), nil)
		require.Equal(t, 0, code, "storage pools %v: %s", args, stderr)
		require.NoError(t, json.Unmarshal([]byte(stdout), out), stdout)
	}
	var p struct {
		Reserved    int64 `json:"reserved_bytes"`
		Objects     int64 `json:"object_count"`
		Version     int64 `json:"version"`
		Attachments []struct {
			Node string `json:"node_id"`
			Held int    `json:"held_object_count"`
		} `json:"attachments"`
	}
	run(&p, "get", "ceph-a")
	var o struct {
		Objects []struct {
			ID   string `json:"object_id"`
			Node string `json:"node_id"`
			Held bool   `json:"held"`
		} `json:"objects"`
	}
	run(&o, "objects", "ceph-a")
	var c struct {
		Drifted bool            `json:"drifted"`
		Pools   json.RawMessage `json:"pools"`
	}
	run(&c, "check")
	require.False(t, c.Drifted, "storage pools check: %s", c.Pools)

	s := poolState{Reserved: p.Reserved, Objects: p.Objects, Version: p.Version, Where: map[string]string{}, Held: map[string]int{}}
	for _, a := range p.Attachments {
		s.Held[a.Node] = a.Held
	}
	for _, x := range o.Objects {
		s.Where[x.ID] = x.Node
		if !x.Held {
			s.Where[x.ID] += " unheld"
		}
	}
	return s
}

// setCapacity sets ceph-a's capacity through the operator command.
func (e *env) setCapacity(t *testing.T, size string, version int64) {
	t.Helper()
	_, stderr, code := e.command(t, "storage", []string{"pools", "set-capacity", "ceph-a", size, "--if-version", strconv.FormatInt(version, 10)}, nil)
	require.Equal(t, 0, code, stderr)
}

// objectsOf are the pool object ids a deploy's workloads plan.
func objectsOf(t *testing.T, workloads []resourcetypes.Resources) []string {
	t.Helper()
	var ids []string
	for _, w := range workloads {
		var plan struct {
			Plans map[string]struct {
				Object string `json:"object"`
			} `json:"pool_plan_request"`
		}
		raw, err := json.Marshal(w["storage"])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &plan))
		for _, p := range plan.Plans {
			ids = append(ids, p.Object)
		}
	}
	require.NotEmpty(t, ids, "the deploy planned pool objects")
	slices.Sort(ids)
	return ids
}

// TestCoreRollbackKeepsPoolCountersExact runs core's rollback of storage
// (its `before` replayed with delta=false) on a node of a pool that
// another node shares: after every rollback the pool's reservation, its
// object count, and which node keeps each object are exactly what they
// were, and `storage pools check` reports no drift.
func TestCoreRollbackKeepsPoolCountersExact(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	storage := e.plugin(t, "storage")
	ctx := t.Context()
	for _, n := range []string{"n1", "n2"} {
		_, err := m.AddNode(ctx, n, poolNode("/mnt/"+n+"/ceph-a"), engineInfo("engine-"+n))
		require.NoError(t, err)
	}
	e.setCapacity(t, "1T", 0)
	on1, _, err := m.Alloc(ctx, "n1", 1, poolDeploy("POOL@ceph-a:/data:rw:100G"))
	require.NoError(t, err)
	on2, _, err := m.Alloc(ctx, "n2", 1, poolDeploy("POOL@ceph-a:/data:rw:100G"))
	require.NoError(t, err)
	a, b := objectsOf(t, on1)[0], objectsOf(t, on2)[0]
	start := e.pools(t)
	require.Equal(t, poolState{Reserved: 200 * GiB, Objects: 2, Version: 1,
		Where: map[string]string{a: "n1", b: "n2"}, Held: map[string]int{"n1": 1, "n2": 1}}, start)

	step(t, "a deploy another plugin refuses is rolled back: the new object is gone and nothing else moved", func(t *testing.T) {
		plan, err := storage.CalculateDeploy(ctx, "n1", 1, poolDeploy("POOL@ceph-a:/data:rw:300G")["storage"])
		require.NoError(t, err)
		_, _, err = m.SetNodeResourceUsage(ctx, "n1", nil, nil, []resourcetypes.Resources{refusedByCompute(plan.WorkloadsResource[0])}, true, plugins.Incr)
		require.Error(t, err, "compute refuses the malformed workload, so core rolls storage back")
		require.Equal(t, start, e.pools(t))
	})
	step(t, "a removal another plugin refuses is rolled back: the object is back on its node, reserved once", func(t *testing.T) {
		_, _, err := m.SetNodeResourceUsage(ctx, "n1", nil, nil, []resourcetypes.Resources{refusedByCompute(on1[0]["storage"])}, true, plugins.Decr)
		require.Error(t, err)
		require.Equal(t, start, e.pools(t))
	})
	step(t, "a grow another plugin refuses is rolled back: the object keeps its size", func(t *testing.T) {
		grow, err := storage.CalculateRealloc(ctx, "n1", on1[0]["storage"], resourcetypes.RawParams{"volumes": []string{"POOL@ceph-a:/data:rw:50G"}})
		require.NoError(t, err)
		_, _, err = m.SetNodeResourceUsage(ctx, "n1", nil, nil, []resourcetypes.Resources{refusedByCompute(grow.DeltaResource)}, true, plugins.Incr)
		require.Error(t, err)
		require.Equal(t, start, e.pools(t))
		_, _, err = m.SetNodeResourceUsage(ctx, "n1", nil, nil, []resourcetypes.Resources{{"storage": grow.DeltaResource}}, true, plugins.Incr)
		require.NoError(t, err, "the same grow lands once nothing refuses it")
		require.Equal(t, 250*GiB, e.pools(t).Reserved)
		_, _, err = m.SetNodeResourceUsage(ctx, "n1", nil, nil, []resourcetypes.Resources{{"storage": grow.DeltaResource}}, true, plugins.Decr)
		require.NoError(t, err)
		require.Equal(t, start, e.pools(t))
	})
	step(t, "a before replayed on n1 after n2 placed into the same pool keeps n2's share", func(t *testing.T) {
		plan, err := storage.CalculateDeploy(ctx, "n1", 1, poolDeploy("POOL@ceph-a:/data:rw:300G")["storage"])
		require.NoError(t, err)
		resp, err := storage.SetNodeResourceUsage(ctx, "n1", nil, nil, []plugintypes.WorkloadResource{plan.WorkloadsResource[0]}, true, plugins.Incr)
		require.NoError(t, err)
		require.Equal(t, 500*GiB, e.pools(t).Reserved)
		more, _, err := m.Alloc(ctx, "n2", 1, poolDeploy("POOL@ceph-a:/data:rw:50G"))
		require.NoError(t, err)
		c := objectsOf(t, more)[0]
		// What core's rollback sends: the plugin's before, absolute.
		_, err = storage.SetNodeResourceUsage(ctx, "n1", resp.Before, nil, nil, false, false)
		require.NoError(t, err)
		require.Equal(t, poolState{Reserved: 250 * GiB, Objects: 3, Version: 1,
			Where: map[string]string{a: "n1", b: "n2", c: "n2"}, Held: map[string]int{"n1": 1, "n2": 2}}, e.pools(t))
		_, _, err = m.SetNodeResourceUsage(ctx, "n2", nil, nil, more, true, plugins.Decr)
		require.NoError(t, err)
		require.Equal(t, start, e.pools(t))
	})
	step(t, "an attach on n2 of isolated n1's object that another plugin refuses is rolled back: the object is n1's again, unheld, still reserved", func(t *testing.T) {
		stdout, stderr, code := e.command(t, "storage", []string{"nodes", "isolate", "n1"}, nil)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, `"released_pool_objects":1`)
		isolated := e.pools(t)
		require.Equal(t, "n1 unheld", isolated.Where[a])
		plan, err := storage.CalculateDeploy(ctx, "n2", 1, poolDeploy("POOL@ceph-a/" + a + ":/data:rw")["storage"])
		require.NoError(t, err)
		_, _, err = m.SetNodeResourceUsage(ctx, "n2", nil, nil, []resourcetypes.Resources{refusedByCompute(plan.WorkloadsResource[0])}, true, plugins.Incr)
		require.Error(t, err)
		require.Equal(t, isolated, e.pools(t), "the object keeps its data, its reservation and its place")

		attached, _, err := m.Alloc(ctx, "n2", 1, poolDeploy("POOL@ceph-a/"+a+":/data:rw"))
		require.NoError(t, err, "the failover can be tried again")
		require.Equal(t, []string{a}, objectsOf(t, attached))
		require.Equal(t, poolState{Reserved: 200 * GiB, Objects: 2, Version: 1,
			Where: map[string]string{a: "n2", b: "n2"}, Held: map[string]int{"n1": 0, "n2": 2}}, e.pools(t), "isolated n1 is still a member")
		_, _, err = m.SetNodeResourceUsage(ctx, "n1", nil, nil, on1, true, plugins.Decr)
		require.NoError(t, err, "core removing the dead workload from n1")
		require.Equal(t, 200*GiB, e.pools(t).Reserved, "never a second release")
	})
}

// TestCoreUndoOfARemoveNodeKeepsPoolMembership runs core's undo of a
// remove-node another plugin refuses (set-node-resource-info of what core
// read) on pool members: the node comes back a member with the same path,
// the pool's counters never move, and a node that still keeps objects is
// refused by storage itself with nothing written.
func TestCoreUndoOfARemoveNodeKeepsPoolMembership(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	ctx := t.Context()
	for _, n := range []string{"n1", "n2"} {
		_, err := m.AddNode(ctx, n, poolNode("/mnt/"+n+"/ceph-a"), engineInfo("engine-"+n))
		require.NoError(t, err)
	}
	e.setCapacity(t, "1T", 0)
	w, _, err := m.Alloc(ctx, "n1", 2, poolDeploy("POOL@ceph-a:/data:rw:100G"))
	require.NoError(t, err)
	ids := objectsOf(t, w)
	start := e.pools(t)
	require.Equal(t, poolState{Reserved: 200 * GiB, Objects: 2, Version: 1,
		Where: map[string]string{ids[0]: "n1", ids[1]: "n1"}, Held: map[string]int{"n1": 2, "n2": 0}}, start)
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "refuser"), []byte(refusingPlugin), 0o755))
	undoing := e.manager(t)
	stored := func(node string) map[string]any {
		t.Helper()
		rec, _ := e.record(t, "storage", node)
		require.NotNil(t, rec)
		return rec
	}

	step(t, "a member without objects comes back a member, at its path", func(t *testing.T) {
		before := stored("n2")
		require.Error(t, undoing.RemoveNode(ctx, "n2"))
		require.Equal(t, object(t, before["capacity"])["pools"], object(t, stored("n2")["capacity"])["pools"])
		require.Equal(t, start, e.pools(t))
	})
	step(t, "a member keeping objects is refused by storage, and nothing of it moves", func(t *testing.T) {
		before, version := e.record(t, "storage", "n1")
		require.Error(t, undoing.RemoveNode(ctx, "n1"))
		_, stderr, code := e.run(t, "storage", "remove-node", []byte(`{"nodename":"n1"}`))
		require.NotZero(t, code)
		require.Contains(t, stderr, "failed_precondition", "storage itself refuses a node keeping objects")
		after, v := e.record(t, "storage", "n1")
		require.Equal(t, version, v, "storage wrote nothing")
		require.Equal(t, before, after)
		require.Equal(t, start, e.pools(t))
	})
	step(t, "once its workloads are gone the member is removed, undone, and still takes objects", func(t *testing.T) {
		_, _, err := m.SetNodeResourceUsage(ctx, "n1", nil, nil, w, true, plugins.Decr)
		require.NoError(t, err)
		require.Error(t, undoing.RemoveNode(ctx, "n1"))
		got := e.pools(t)
		require.Equal(t, poolState{Reserved: 0, Objects: 0, Version: 1, Where: map[string]string{}, Held: map[string]int{"n1": 0, "n2": 0}}, got)
		again, _, err := m.Alloc(ctx, "n1", 1, poolDeploy("POOL@ceph-a:/data:rw:100G"))
		require.NoError(t, err)
		require.Equal(t, map[string]string{objectsOf(t, again)[0]: "n1"}, e.pools(t).Where)
		require.ElementsMatch(t, []string{"n1", "n2"}, slices.Collect(maps.Keys(e.pools(t).Held)))
	})
}

// TestCoreRollbackOfAReattachOnTheNodeThatCameBack: an isolated node comes
// back with a new incarnation and takes its own unheld object back
// (POOL@ceph-a/ID on that node); when another plugin refuses the deploy,
// core's rollback leaves the object unheld again, so any node may still
// attach it.
func TestCoreRollbackOfAReattachOnTheNodeThatCameBack(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	storage := e.plugin(t, "storage")
	ctx := t.Context()
	for _, n := range []string{"n1", "n2"} {
		// Real directories: the heartbeat checks the pool paths.
		_, err := m.AddNode(ctx, n, poolNode(t.TempDir()), engineInfo("engine-"+n))
		require.NoError(t, err)
	}
	e.setCapacity(t, "1T", 0)
	w, _, err := m.Alloc(ctx, "n1", 1, poolDeploy("POOL@ceph-a:/data:rw:100G"))
	require.NoError(t, err)
	a := objectsOf(t, w)[0]
	_, stderr, code := e.command(t, "storage", []string{"nodes", "isolate", "n1"}, nil)
	require.Equal(t, 0, code, stderr)
	proc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "sys/kernel/random"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "sys/kernel/random/boot_id"), []byte("boot-2\n"), 0o644))
	stdout, stderr, code := e.command(t, "storage", []string{"nodes", "heartbeat", "n1", "--proc-root", proc,
		"--clock-sync", "SYNCHRONIZED", "--clock-max-error", "1ms", "--pool-check", "exists"}, nil)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"status":"READY"`, "n1 is back with a new incarnation")
	unheld := poolState{Reserved: 100 * GiB, Objects: 1, Version: 1, Where: map[string]string{a: "n1 unheld"}, Held: map[string]int{"n1": 0, "n2": 0}}
	require.Equal(t, unheld, e.pools(t))

	step(t, "the reattach another plugin refuses is rolled back: the object is unheld again", func(t *testing.T) {
		plan, err := storage.CalculateDeploy(ctx, "n1", 1, poolDeploy("POOL@ceph-a/" + a + ":/data:rw")["storage"])
		require.NoError(t, err)
		_, _, err = m.SetNodeResourceUsage(ctx, "n1", nil, nil, []resourcetypes.Resources{refusedByCompute(plan.WorkloadsResource[0])}, true, plugins.Incr)
		require.Error(t, err)
		require.Equal(t, unheld, e.pools(t))
	})
	step(t, "so n2 can still attach it", func(t *testing.T) {
		attached, _, err := m.Alloc(ctx, "n2", 1, poolDeploy("POOL@ceph-a/"+a+":/data:rw"))
		require.NoError(t, err)
		require.Equal(t, []string{a}, objectsOf(t, attached))
		require.Equal(t, poolState{Reserved: 100 * GiB, Objects: 1, Version: 1, Where: map[string]string{a: "n2"}, Held: map[string]int{"n1": 0, "n2": 1}}, e.pools(t))
	})
}

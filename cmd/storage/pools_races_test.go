package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// The races of docs/pools.md ("Races proven") about capacity and
// accounting, 2, 3, 5, 6, 7 and 10: each runs plugin processes
// concurrently, as core and operators would, on a real etcd and on the
// embedded store, and ends with exact counters (pool records against every
// node record) and `pools check` finding no drift. Race 1 is
// TestPoolRaceManyDeploys; 4, 8 and 9 are in pools_races_failover_test.go,
// 11 in pools_races_limits_test.go, 12 in pools_races_chaos_test.go.

// fourNodes declares ceph-a on n1…n4 and sets its capacity.
func fourNodes(t *testing.T, env *testenv.Env, capacity string) []string {
	t.Helper()
	names := []string{"n1", "n2", "n3", "n4"}
	for _, n := range names {
		addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
	}
	env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", capacity, "--if-version", "0")
	return names
}

// TestPoolRaceCapacityLowered is race 2: an operator lowers the capacity
// while processes place objects through four nodes. Nothing above the new
// capacity commits after the lowering: the pool ends with exactly what it
// reserved when the lowering committed (its answer says so), or filled to
// the new capacity if it reserved less. Then, over capacity, shrinks all
// pass and growths are all refused.
func TestPoolRaceCapacityLowered(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		names := fourNodes(t, env, "100G")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:10G"}}
		r := newRacer(t, env)
		var landed atomic.Int64
		var workloads []json.RawMessage
		for p := range sizes(6, 3) {
			node := names[p%len(names)]
			r.goes(func() {
				for range 12 {
					wl, ok := r.planDeploy(node, request, "resource_exhausted: pool ceph-a")
					if !ok {
						return
					}
					if _, ok := r.write(node, true, []json.RawMessage{wl}, "resource_exhausted: pool ceph-a"); ok {
						landed.Add(1)
						r.locked(func() { workloads = append(workloads, wl) })
					}
				}
			})
		}
		require.Eventually(t, func() bool { return landed.Load() >= 2 }, 20*time.Second, 5*time.Millisecond)
		var lowered poolView
		env.OpOK(t, "storage", &lowered, "pools", "set-capacity", "ceph-a", "70G", "--if-version", "1")
		r.done(t)

		v := poolGet(t, env, "ceph-a")
		t.Logf("lowered at %d GiB reserved; %d landed", lowered.Reserved/gib, landed.Load())
		require.Equal(t, max(lowered.Reserved, 70*gib), v.Reserved, "nothing above the lowered capacity committed after it (reserved %d when it was lowered)", lowered.Reserved)
		living := exactPool(t, env, "ceph-a")
		require.Len(t, living, int(landed.Load()))
		require.Len(t, workloads, int(landed.Load()))

		// Over capacity now: every shrink passes, every growth is refused.
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "20G", "--if-version", "2")
		r = newRacer(t, env)
		var shrunk atomic.Int64
		holders := allObjects(t, env)
		for i, wl := range workloads {
			node := holders[planObjects(wl)[0]].Node
			change := "-5G"
			if i%3 == 2 {
				change = "1G"
			}
			r.goes(func() {
				res := r.verb("calculate-realloc", obj{"nodename": node, "workload_resource": wl, "workload_resource_request": obj{"volumes": []string{"POOL@ceph-a:/data:rw:" + change}}})
				var out reallocAnswer
				if change == "1G" {
					r.refused("growth over capacity", res, "resource_exhausted: pool ceph-a")
					return
				}
				if !r.ok("calculate-realloc of a shrink", res, &out) {
					r.failf("a shrink over capacity was refused: %s", res.Stderr)
					return
				}
				if _, ok := r.write(node, true, []json.RawMessage{out.DeltaResource}); ok {
					shrunk.Add(1)
				}
			})
		}
		r.done(t)
		want := int64(len(workloads) - len(workloads)/3)
		require.Equal(t, want, shrunk.Load())
		exactPool(t, env, "ceph-a")
		require.Equal(t, v.Reserved-want*5*gib, poolGet(t, env, "ceph-a").Reserved)
	}
	races(t, run)
}

// TestPoolRaceCapacityVersions is race 3: operators race set-capacity.
// Of several writes at the same --if-version exactly one lands, the others
// are aborted; processes sharing one --command-id and arguments land once
// and all print the same answer; a replay prints the first answer and
// writes nothing, and the same id with other arguments is already_exists.
func TestPoolRaceCapacityVersions(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		fourNodes(t, env, "100G")
		n := sizes(6, 3)
		r := newRacer(t, env)
		results := make([]testenv.Result, n)
		for i := range n {
			r.goes(func() {
				results[i] = r.op("pools", "set-capacity", "ceph-a", fmt.Sprintf("%dG", 200+i), "--if-version", "1", "--command-id", fmt.Sprintf("c%d", i))
			})
		}
		r.done(t)
		winner := -1
		for i, res := range results {
			switch res.Code {
			case 0:
				require.Equal(t, -1, winner, "two writes at version 1 landed: c%d and c%d", winner, i)
				winner = i
			case 5:
				require.Contains(t, res.Stderr, "aborted")
				require.Empty(t, res.Stdout)
			default:
				t.Fatalf("c%d: exit %d: %s", i, res.Code, res.Stderr)
			}
		}
		require.NotEqual(t, -1, winner, "one write at the current version lands")
		v := poolGet(t, env, "ceph-a")
		require.Equal(t, int64(2), v.Version)
		require.Equal(t, int64(200+winner)*gib, *v.Capacity)

		// One command id, the same arguments, from several processes at once.
		r = newRacer(t, env)
		for i := range n {
			r.goes(func() {
				results[i] = r.op("pools", "set-capacity", "ceph-a", "500G", "--if-version", "2", "--command-id", "grow")
			})
		}
		r.done(t)
		first := 0
		for _, res := range results {
			require.Equal(t, 0, res.Code, res.Stderr)
			require.JSONEq(t, results[0].Stdout, res.Stdout, "every process prints the one answer")
			if res.Stderr == "" {
				first++
			} else {
				require.Contains(t, res.Stderr, "replay of command grow")
			}
		}
		require.Equal(t, 1, first, "exactly one process wrote; the others replayed its answer")
		v = poolGet(t, env, "ceph-a")
		require.Equal(t, int64(3), v.Version, "the version moved once")
		require.Equal(t, 500*gib, *v.Capacity)

		// Replays and reuses of the id with other arguments race: none writes.
		before := env.Dump(t)
		r = newRacer(t, env)
		replays, reuses := make([]testenv.Result, n), make([]testenv.Result, n)
		for i := range n {
			r.goes(func() {
				replays[i] = r.op("pools", "set-capacity", "ceph-a", "500G", "--if-version", "2", "--command-id", "grow")
			})
			r.goes(func() {
				reuses[i] = r.op("pools", "set-capacity", "ceph-a", "600G", "--if-version", "3", "--command-id", "grow")
			})
		}
		stale := r.op("pools", "set-capacity", "ceph-a", "700G", "--if-version", "2")
		r.done(t)
		for i := range n {
			require.Equal(t, 0, replays[i].Code, replays[i].Stderr)
			require.JSONEq(t, results[0].Stdout, replays[i].Stdout)
			require.Equal(t, 6, reuses[i].Code, "the same id with other arguments is already_exists: %s", reuses[i].Stderr)
			require.Contains(t, reuses[i].Stderr, "already_exists")
		}
		require.Equal(t, 5, stale.Code, stale.Stderr)
		require.Equal(t, before, env.Dump(t), "replays, reuses and a stale version write nothing")
		exactPool(t, env, "ceph-a")
	}
	races(t, run)
}

// TestPoolRaceRollbackBesideAPlacement is race 5: core rolls back usage
// writes on n1 (its before replayed, delta=false) again and again while
// processes place objects into the same pool through n2 and n3. The
// rollbacks never fail and never clobber the others' shares: n1 ends with
// nothing, n2 and n3 with every object they placed, and the pool reserves
// exactly their sum.
func TestPoolRaceRollbackBesideAPlacement(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		rounds := sizes(5, 2)
		fourNodes(t, env, "1T")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:10G"}}
		r := newRacer(t, env)
		var placed atomic.Int64
		for _, node := range []string{"n2", "n3"} {
			r.goes(func() {
				for range rounds {
					if wl, ok := r.planDeploy(node, request); ok {
						if _, ok := r.write(node, true, []json.RawMessage{wl}); ok {
							placed.Add(1)
						}
					}
				}
			})
		}
		r.goes(func() {
			for range rounds {
				wl, ok := r.planDeploy("n1", request)
				if !ok {
					continue
				}
				before, ok := r.write("n1", true, []json.RawMessage{wl})
				if !ok {
					continue
				}
				res := r.verb("set-node-resource-usage", obj{"nodename": "n1", "resource": before, "resource_request": nil, "workloads_resource": nil, "delta": false, "incr": false})
				r.ok("the rollback of n1's write", res, nil)
				if res.Code != 0 {
					r.failf("a rollback failed: %s", res.Stderr)
				}
			}
		})
		r.done(t)
		require.Equal(t, int64(2*rounds), placed.Load())
		living := exactPool(t, env, "ceph-a")
		require.Len(t, living, 2*rounds)
		for id, o := range living {
			require.NotEqual(t, "n1", o.Node, "object %s survived n1's rollback", id)
		}
		require.Equal(t, int64(2*rounds)*10*gib, poolGet(t, env, "ceph-a").Reserved)
	}
	races(t, run)
}

// TestPoolRaceHalfFailedDeploys is race 6: processes deploy pairs of
// workloads, one on n1 then one on n2, into a pool with room for five;
// when n2's write is refused, core's deploy has half failed and n1's
// object is an orphan (its rollback never came). The pool holds an odd
// number of objects at the end, so at least one pair half failed. The
// orphans are n1's diffs; fix on both nodes at once releases them, and the
// counters are exactly the complete pairs.
func TestPoolRaceHalfFailedDeploys(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		fourNodes(t, env, "50G")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:10G"}}
		full := "resource_exhausted: pool ceph-a"
		r := newRacer(t, env)
		var pairs [][2]json.RawMessage
		var orphans []string
		for range sizes(4, 2) {
			r.goes(func() {
				for range 6 {
					a, ok := r.planDeploy("n1", request, full)
					if !ok {
						return
					}
					b, ok := r.planDeploy("n2", request, full)
					if !ok {
						return
					}
					if _, ok := r.write("n1", true, []json.RawMessage{a}, full); !ok {
						return
					}
					if _, ok := r.write("n2", true, []json.RawMessage{b}, full); !ok {
						r.locked(func() { orphans = append(orphans, planObjects(a)[0]) })
						return
					}
					r.locked(func() { pairs = append(pairs, [2]json.RawMessage{a, b}) })
				}
			})
		}
		r.done(t)
		require.NotEmpty(t, orphans, "an odd number of 10G objects fills 50G: some pair half failed")
		require.Equal(t, 50*gib, poolGet(t, env, "ceph-a").Reserved)
		exactPool(t, env, "ceph-a")

		var recorded [2][]json.RawMessage
		for _, p := range pairs {
			recorded[0] = append(recorded[0], p[0])
			recorded[1] = append(recorded[1], p[1])
		}
		diffs := info(t, env, "n1", recorded[0]...).Diffs
		require.Len(t, diffs, len(orphans))
		for _, id := range orphans {
			require.True(t, strings.Contains(strings.Join(diffs, "\n"), "pool object "+id+" in pool ceph-a"), "no diff names orphan %s: %v", id, diffs)
		}
		require.Empty(t, info(t, env, "n2", recorded[1]...).Diffs)

		r = newRacer(t, env)
		for i, node := range []string{"n1", "n2"} {
			r.goes(func() {
				res := r.verb("fix-node-resource", obj{"nodename": node, "workloads_resource": recorded[i]})
				if !r.ok("fix-node-resource on "+node, res, nil) {
					r.failf("fix on %s: %s", node, res.Stderr)
				}
			})
		}
		r.done(t)
		living := exactPool(t, env, "ceph-a")
		require.Len(t, living, 2*len(pairs))
		require.Equal(t, int64(2*len(pairs))*10*gib, poolGet(t, env, "ceph-a").Reserved)
		require.Empty(t, info(t, env, "n1", recorded[0]...).Diffs)
	}
	races(t, run)
}

// TestPoolRaceApportioning is race 7: capacity queries run while
// processes place workloads that draw on two pools at once. n1 and n2
// reach both pools, n3 only ceph-a, n4 only nfs1. Every answer deals at
// most the slots the pools had when it was asked (a pool's slots only
// shrink while nobody frees), for each pool and for the request that
// needs both; once the placements end, the answers are exactly the slots
// left, dealt round-robin by name.
func TestPoolRaceApportioning(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		reach := map[string][]string{
			"n1": {"ceph-a:/mnt/ceph-a", "nfs1:/mnt/nfs1"},
			"n2": {"ceph-a:/mnt/ceph-a", "nfs1:/mnt/nfs1"},
			"n3": {"ceph-a:/mnt/ceph-a"},
			"n4": {"nfs1:/mnt/nfs1"},
		}
		names := []string{"n1", "n2", "n3", "n4"}
		for _, n := range names {
			addNode(t, env, n, obj{"storage": "1T", "pools": reach[n], "default-pool": strings.Split(reach[n][0], ":")[0]})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "nfs1", "60G", "--if-version", "0")
		both := obj{"volumes": []string{"POOL@ceph-a:/a:rw:10G", "POOL@nfs1:/b:rw:10G"}}
		onlyA := obj{"volumes": []string{"POOL@ceph-a:/a:rw:10G"}}
		slots := func(v poolView) int { return int((*v.Capacity - v.Reserved) / (10 * gib)) }

		r := newRacer(t, env)
		var placing atomic.Int64
		for _, node := range []string{"n1", "n2"} {
			placing.Add(1)
			r.goes(func() {
				defer placing.Add(-1)
				for range 8 {
					wl, ok := r.planDeploy(node, both, "resource_exhausted: pool nfs1")
					if !ok {
						return
					}
					r.write(node, true, []json.RawMessage{wl}, "resource_exhausted: pool nfs1")
				}
			})
		}
		var asked atomic.Int64
		for range sizes(2, 1) {
			r.goes(func() {
				for placing.Load() > 0 {
					var a, n poolView
					if !r.ok("pools get", r.op("pools", "get", "ceph-a"), &a) || !r.ok("pools get", r.op("pools", "get", "nfs1"), &n) {
						return
					}
					for _, q := range []struct {
						request obj
						most    int
					}{{both, min(slots(a), slots(n))}, {onlyA, slots(a)}} {
						var c capacityAnswer
						if r.ok("get-nodes-deploy-capacity", r.verb("get-nodes-deploy-capacity", obj{"nodenames": names, "workload_resource": q.request}), &c) {
							sum := 0
							for _, node := range c.Nodes {
								sum += node.Capacity
							}
							if sum > q.most || c.Total > q.most {
								r.failf("capacity answer deals %d (total %d) for %v, the pools had %d slots before: %+v", sum, c.Total, q.request, q.most, c.Nodes)
							}
							asked.Add(1)
						}
					}
				}
			})
		}
		r.done(t)
		require.Positive(t, asked.Load())

		exactPool(t, env, "ceph-a")
		living := exactPool(t, env, "nfs1")
		require.Len(t, living, 6, "nfs1 (60G) filled by workloads of 10G in each pool")
		c := capacity(t, env, names, both)
		require.Zero(t, c.Total, "nfs1 is full: no node takes a workload that needs it")
		c = capacity(t, env, names, onlyA)
		require.Equal(t, 4, c.Total, "ceph-a has 40G left")
		require.Equal(t, 2, c.Nodes["n1"].Capacity)
		require.Equal(t, 1, c.Nodes["n2"].Capacity)
		require.Equal(t, 1, c.Nodes["n3"].Capacity)
		require.NotContains(t, c.Nodes, "n4")
	}
	races(t, run)
}

// TestPoolRaceRealloc is race 10: every workload grows by 10G at once in
// a pool with room for four growths: exactly four grow. With the capacity
// then lowered below the reservation, shrinks all pass while growths
// racing them are all refused.
func TestPoolRaceRealloc(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		n := sizes(6, 5)
		fourNodes(t, env, fmt.Sprintf("%dG", 10*n+40))
		var current []json.RawMessage
		var nodeOf []string
		for i := range n {
			node := []string{"n1", "n2", "n3", "n4"}[i%4]
			current = append(current, placed(t, env, node, 1, "10G")...)
			nodeOf = append(nodeOf, node)
		}
		realloc := func(r *racer, i int, change string, reasons ...string) bool {
			var was json.RawMessage
			r.locked(func() { was = current[i] })
			res := r.verb("calculate-realloc", obj{"nodename": nodeOf[i], "workload_resource": was, "workload_resource_request": obj{"volumes": []string{"POOL@ceph-a:/data:rw:" + change}}})
			var out reallocAnswer
			if !r.ok("calculate-realloc", res, &out) {
				r.refused("calculate-realloc "+change, res, reasons...)
				return false
			}
			if _, ok := r.write(nodeOf[i], true, []json.RawMessage{out.DeltaResource}, reasons...); !ok {
				return false
			}
			if len(planObjects(out.WorkloadResource)) != 1 || planObjects(out.WorkloadResource)[0] != planObjects(was)[0] {
				r.failf("a resize changed the object id: %s", out.WorkloadResource)
			}
			r.locked(func() { current[i] = out.WorkloadResource })
			return true
		}

		r := newRacer(t, env)
		var grew atomic.Int64
		for i := range n {
			r.goes(func() {
				if realloc(r, i, "10G", "resource_exhausted: pool ceph-a") {
					grew.Add(1)
				}
			})
		}
		r.done(t)
		require.Equal(t, int64(4), grew.Load(), "room for exactly four growths")
		exactPool(t, env, "ceph-a")
		v := poolGet(t, env, "ceph-a")
		require.Equal(t, *v.Capacity, v.Reserved)

		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "10G", "--if-version", "1")
		r = newRacer(t, env)
		var shrank atomic.Int64
		for i := range n {
			r.goes(func() {
				if realloc(r, i, "-5G") {
					shrank.Add(1)
				}
			})
			r.goes(func() { realloc(r, i, "1G", "resource_exhausted: pool ceph-a") })
		}
		r.done(t)
		require.Equal(t, int64(n), shrank.Load(), "every shrink passes over capacity")
		exactPool(t, env, "ceph-a")
		require.Equal(t, v.Reserved-int64(n)*5*gib, poolGet(t, env, "ceph-a").Reserved, "no growth landed")
	}
	races(t, run)
}

package main_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// The races of failover (docs/pools.md, "Races proven" 4, 8 and 9):
// loss, isolation and retirement racing placements, attaches and core's
// removals.

// placed deploys and commits count workloads of size on node, one by one.
func placed(t *testing.T, env *testenv.Env, node string, count int, size string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for range count {
		d := deploy(t, env, node, 1, obj{"volumes": []string{"POOL@ceph-a:/data:rw:" + size}})
		commit(t, env, node, d.WorkloadsResource, true)
		out = append(out, d.WorkloadsResource[0])
	}
	return out
}

// TestPoolRaceDeclareLost is race 4: an operator isolates every member of
// a pool and declares it lost while usage writes planned earlier land on
// those members, and a new node declares the pool and places into it.
// Either an object landed and reads LOST, or its placement was refused;
// a declaration that loses to the new member is refused naming it.
func TestPoolRaceDeclareLost(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		members := []string{"n1", "n2", "n3"}
		for _, n := range members {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "1T", "--if-version", "0")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:10G"}}
		type plan struct {
			node string
			wl   json.RawMessage
		}
		var plans []plan
		for range sizes(2, 1) {
			for _, n := range members {
				plans = append(plans, plan{n, deploy(t, env, n, 1, request).WorkloadsResource[0]})
			}
		}

		r := newRacer(t, env)
		var landed atomic.Int64
		for _, p := range plans {
			r.goes(func() {
				if _, ok := r.write(p.node, true, []json.RawMessage{p.wl}, "node is isolated", "declared lost"); ok {
					landed.Add(1)
				}
			})
		}
		var lost testenv.Result
		r.goes(func() {
			for _, n := range members {
				if res := r.op("nodes", "isolate", n); res.Code != 0 {
					r.failf("isolate %s: %s", n, res.Stderr)
				}
			}
			lost = r.op("pools", "declare-lost", "ceph-a")
		})
		var newcomer atomic.Bool
		r.goes(func() {
			time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
			res := r.verb("add-node", obj{"nodename": "n4", "resource": obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}}})
			if !r.ok("add-node n4", res, nil) {
				r.failf("add-node n4: %s", res.Stderr)
				return
			}
			wl, ok := r.planDeploy("n4", request, "attachment to pool ceph-a is unavailable", "declared lost")
			if !ok {
				return
			}
			if _, ok := r.write("n4", true, []json.RawMessage{wl}, "declared lost"); ok {
				newcomer.Store(true)
			}
		})
		r.done(t)

		objs := allObjects(t, env)
		t.Logf("declare-lost exit %d; %d of %d planned writes landed; n4 placed: %v", lost.Code, landed.Load(), len(plans), newcomer.Load())
		for id, o := range objs {
			require.False(t, o.Node == "n4" && lost.Code == 0, "object %s landed on n4, yet ceph-a was declared lost", id)
			if o.Node != "n4" {
				require.False(t, o.Held, "object %s on isolated %s is unheld", id, o.Node)
			}
		}
		if lost.Code == 0 {
			var answer struct {
				Pool        poolView `json:"pool"`
				LostVolumes int64    `json:"lost_volumes"`
			}
			require.NoError(t, json.Unmarshal([]byte(lost.Stdout), &answer))
			require.NotNil(t, answer.Pool.LostAt)
			require.Equal(t, landed.Load(), answer.LostVolumes, "every object that landed is counted lost")
			require.False(t, newcomer.Load(), "n4 placed into a lost pool")
			require.Len(t, objs, int(landed.Load()))
			var list struct {
				Objects []struct {
					ID    string `json:"object_id"`
					State string `json:"state"`
				} `json:"objects"`
			}
			env.OpOK(t, "storage", &list, "pools", "objects", "ceph-a")
			require.Len(t, list.Objects, int(landed.Load()))
			for _, o := range list.Objects {
				require.Equal(t, "LOST", o.State, "object %s", o.ID)
			}
			exactPool(t, env, "ceph-a")
			return
		}
		require.Equal(t, 4, lost.Code, lost.Stderr)
		require.Contains(t, lost.Stderr, "members that are not isolated: n4", "only the newcomer is in the way")
		require.True(t, newcomer.Load(), "n4 declared ceph-a before the declaration read it, so its placement landed")
		require.Len(t, objs, int(landed.Load())+1)
		exactPool(t, env, "ceph-a")
	}
	pick := testenv.ShortStore(t)
	for i := range sizes(2, 1) {
		t.Run(fmt.Sprintf("on etcd, round %d", i+1), func(t *testing.T) {
			testenv.SkipUnlessShortStore(t, pick, "etcd")
			run(t, testenv.NewEtcd(t, raceBudget))
		})
	}
	t.Run("on the embedded store", func(t *testing.T) {
		testenv.SkipUnlessShortStore(t, pick, "embedded")
		run(t, testenv.NewEmbedded(t, raceBudget))
	})
}

// TestPoolRaceIsolation is race 8: n1 is isolated with four objects; for
// each, processes on n2 and n3 race to attach it while core removes n1's
// dead workloads one by one and a deploy planned on n1 before the
// isolation tries to land. Each object ends in exactly one record or none
// (deleted by core's decrease before any attach); the decrease never
// releases an attached object a second time; the isolated node's increase
// is refused.
func TestPoolRaceIsolation(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		for _, n := range []string{"n1", "n2", "n3"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		dead := placed(t, env, "n1", sizes(4, 2), "10G")
		late := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL@ceph-a:/data:rw:10G"}}).WorkloadsResource
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
		for id, o := range allObjects(t, env) {
			require.False(t, o.Held, "object %s", id)
		}
		require.Len(t, exactPool(t, env, "ceph-a"), len(dead), "an isolation unholds the objects, they still reserve")
		require.Equal(t, int64(len(dead))*10*gib, poolGet(t, env, "ceph-a").Reserved)

		r := newRacer(t, env)
		attached := map[string]string{}
		for _, wl := range dead {
			id := planObjects(wl)[0]
			for _, node := range []string{"n2", "n3"} {
				r.goes(func() {
					a, ok := r.planDeploy(node, obj{"volumes": []string{"POOL@ceph-a/" + id + ":/data:rw"}}, "is held by node", "does not exist")
					if !ok {
						return
					}
					if _, ok := r.write(node, true, []json.RawMessage{a}, "is held by node", "is no longer in node n1's record"); ok {
						r.locked(func() {
							if prev, twice := attached[id]; twice {
								r.errs = append(r.errs, "object "+id+" attached on "+prev+" and "+node)
							}
							attached[id] = node
						})
					}
				})
			}
		}
		r.goes(func() {
			for _, wl := range dead {
				if _, ok := r.write("n1", false, []json.RawMessage{wl}); !ok {
					r.failf("core's decrease on the isolated node was refused")
				}
			}
		})
		r.goes(func() { r.write("n1", true, late, "node is isolated") })
		r.done(t)

		living := exactPool(t, env, "ceph-a")
		t.Logf("%d of %d objects attached, the others deleted by core's decrease first", len(attached), len(dead))
		require.Len(t, living, len(attached))
		for id, node := range attached {
			require.Equal(t, node, living[id].Node, "object %s", id)
			require.True(t, living[id].Held)
		}
		require.Equal(t, int64(len(attached))*10*gib, poolGet(t, env, "ceph-a").Reserved, "no release twice, none missed")
		require.Empty(t, poolObjects(t, env, "n1"))
	}
	races(t, run)
}

// TestPoolRaceRetireAndRemove is race 9: n1 is isolated with four
// objects; it is retired while n2 attaches two of them and core removes
// the two other workloads, and remove-node keeps trying. remove-node is
// refused while n1 keeps an object; at the end n1 is gone, the pool's
// members are n2 alone, and the counters are the two attached objects.
func TestPoolRaceRetireAndRemove(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		for _, n := range []string{"n1", "n2"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		dead := placed(t, env, "n1", 4, "10G")
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
		before := env.Dump(t)
		require.Contains(t, env.Fail(t, "storage", "remove-node", obj{"nodename": "n1"}), "failed_precondition: the node keeps 4 pool objects")
		require.Equal(t, before, env.Dump(t))

		r := newRacer(t, env)
		var finished atomic.Int64
		r.goes(func() {
			defer finished.Add(1)
			if res := r.op("nodes", "retire", "n1"); res.Code != 0 {
				r.failf("retire n1: %s", res.Stderr)
			}
		})
		for _, wl := range dead[:2] {
			r.goes(func() {
				defer finished.Add(1)
				a, ok := r.planDeploy("n2", obj{"volumes": []string{"POOL@ceph-a/" + planObjects(wl)[0] + ":/data:rw"}})
				if !ok {
					return
				}
				if _, ok := r.write("n2", true, []json.RawMessage{a}); !ok {
					r.failf("attach on n2 refused")
				}
			})
		}
		r.goes(func() {
			defer finished.Add(1)
			for _, wl := range dead[2:] {
				if _, ok := r.write("n1", false, []json.RawMessage{wl}); !ok {
					r.failf("core's decrease on n1 refused")
				}
			}
		})
		var removed atomic.Bool
		r.goes(func() {
			for !removed.Load() {
				last := finished.Load() == 4
				res := r.verb("remove-node", obj{"nodename": "n1"})
				switch {
				case res.Code == 0:
					removed.Store(true)
				case last:
					r.failf("remove-node once n1 keeps nothing: %s", res.Stderr)
					return
				default:
					r.refused("remove-node while n1 keeps objects", res, "failed_precondition: the node keeps")
				}
			}
		})
		r.done(t)

		require.True(t, removed.Load())
		require.False(t, env.Record(t, "/resource/storage/n1", nil), "n1's record is gone")
		v := poolGet(t, env, "ceph-a")
		require.Len(t, v.Attachments, 1)
		require.Equal(t, "n2", v.Attachments[0].Node)
		require.Equal(t, 2, v.Attachments[0].Held)
		living := exactPool(t, env, "ceph-a")
		require.Len(t, living, 2)
		for _, wl := range dead[:2] {
			require.Equal(t, "n2", living[planObjects(wl)[0]].Node)
		}
		require.Equal(t, 20*gib, v.Reserved)
		require.True(t, strings.HasPrefix(nodeGet(t, env, "n1").Status, "RETIRED"))
	}
	races(t, run)
}

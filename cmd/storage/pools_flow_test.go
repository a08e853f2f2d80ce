package main_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// poolPlan is one entry of a workload's pool_plan_request.
type poolPlan struct {
	Pool   string `json:"pool"`
	Object string `json:"object"`
	Bytes  int64  `json:"bytes"`
}

func poolPlans(t *testing.T, raw json.RawMessage) map[string]poolPlan {
	t.Helper()
	var w struct {
		Request map[string]poolPlan `json:"pool_plan_request"`
		Limit   map[string]poolPlan `json:"pool_plan_limit"`
	}
	require.NoError(t, json.Unmarshal(raw, &w))
	require.Equal(t, w.Request, w.Limit)
	return w.Request
}

// poolObjects reads the pool objects a node's record keeps.
func poolObjects(t *testing.T, env *testenv.Env, node string) map[string]struct {
	Pool  string `json:"pool"`
	Bytes int64  `json:"bytes"`
	Held  bool   `json:"held"`
} {
	t.Helper()
	var rec struct {
		Usage struct {
			Objects map[string]struct {
				Pool  string `json:"pool"`
				Bytes int64  `json:"bytes"`
				Held  bool   `json:"held"`
			} `json:"pool_objects"`
		} `json:"usage"`
	}
	require.True(t, env.Record(t, "/resource/storage/"+node, &rec))
	return rec.Usage.Objects
}

func noDrift(t *testing.T, env *testenv.Env) {
	t.Helper()
	var c struct {
		Drifted bool `json:"drifted"`
	}
	raw := env.OpOK(t, "storage", &c, "pools", "check")
	require.False(t, c.Drifted, "pools check: %s", raw)
}

var objectID = regexp.MustCompile(`^v-[0-9a-f]{16}$`)

func TestPoolWorkedFlow(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		addNode(t, env, "n2", obj{"storage": "1T", "pools": []string{"ceph-a:/srv/ceph"}})
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:100G"}}

		t.Run("a pool without capacity takes no object", func(t *testing.T) {
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": request})
			require.Contains(t, line, "failed_precondition")
			require.Contains(t, line, "no capacity")
		})
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "300G", "--if-version", "0")

		var first json.RawMessage
		var firstObject string
		t.Run("three 100 GiB workloads land across both nodes", func(t *testing.T) {
			for i, node := range []string{"n1", "n2", "n1"} {
				d := deploy(t, env, node, 1, request)
				plans := poolPlans(t, d.WorkloadsResource[0])
				plan := plans["POOL@ceph-a:/data:rw:107374182400:0:0:0:0"]
				require.Equal(t, "ceph-a", plan.Pool)
				require.Equal(t, 100*gib, plan.Bytes)
				require.Regexp(t, objectID, plan.Object)
				path := map[string]string{"n1": "/mnt/ceph-a", "n2": "/srv/ceph"}[node]
				require.Equal(t, []string{path + "/" + plan.Object + ":/data:rw:107374182400"}, d.EnginesParams[0].Volumes)
				w := decodeWorkload(t, d.WorkloadsResource[0])
				require.Zero(t, w.StorageRequest, "pool bytes are not part of the node's flat budget")
				commit(t, env, node, d.WorkloadsResource, true)
				if i == 0 {
					first, firstObject = d.WorkloadsResource[0], plan.Object
				}
			}
			v := poolGet(t, env, "ceph-a")
			require.Equal(t, 300*gib, v.Reserved)
			require.Equal(t, int64(3), v.Objects)
			require.Len(t, poolObjects(t, env, "n1"), 2)
			require.Len(t, poolObjects(t, env, "n2"), 1)
			noDrift(t, env)
		})
		t.Run("the fourth is refused naming the pool", func(t *testing.T) {
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n2", "deploy_count": 1, "workload_resource_request": request})
			require.Contains(t, line, "resource_exhausted: pool ceph-a has 0 B free, 100 GiB asked")
		})
		t.Run("remove-node is refused while the node keeps pool objects, and writes nothing", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "remove-node", obj{"nodename": "n2"})
			require.Contains(t, line, "failed_precondition: the node keeps 1 pool objects")
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("get-metrics reports the bytes each node holds per pool", func(t *testing.T) {
			var metrics []struct {
				Name   string   `json:"name"`
				Labels []string `json:"labels"`
				Value  string   `json:"value"`
			}
			env.Call(t, "storage", "get-metrics", obj{"podname": "p", "nodename": "n1"}, &metrics)
			found := false
			for _, m := range metrics {
				if m.Name == "storage_pool_held_bytes" {
					require.Equal(t, []string{"p", "n1", "ceph-a"}, m.Labels)
					require.Equal(t, "214748364800", m.Value)
					found = true
				}
			}
			require.True(t, found, "no storage_pool_held_bytes sample")
		})
		t.Run("the usage write is the authoritative admission: a plan made while there was room is refused and writes nothing", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "400G", "--if-version", "1")
			d1 := deploy(t, env, "n1", 1, request)
			d2 := deploy(t, env, "n2", 1, request)
			commit(t, env, "n1", d1.WorkloadsResource, true)
			before := env.Dump(t)
			line := env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n2", "workloads_resource": d2.WorkloadsResource, "delta": true, "incr": true})
			require.Contains(t, line, "resource_exhausted: pool ceph-a")
			require.Equal(t, before, env.Dump(t))
			// core removes the workload it placed: the decrease releases it.
			commit(t, env, "n1", d1.WorkloadsResource, false)
			require.Equal(t, 300*gib, poolGet(t, env, "ceph-a").Reserved)
			noDrift(t, env)
		})
		t.Run("core's rollback of a before keeps the counters exact", func(t *testing.T) {
			d := deploy(t, env, "n2", 1, request)
			var ba beforeAfter
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n2", "workloads_resource": d.WorkloadsResource, "delta": true, "incr": true}, &ba)
			require.Equal(t, 400*gib, poolGet(t, env, "ceph-a").Reserved)
			object := poolPlans(t, d.WorkloadsResource[0])["POOL@ceph-a:/data:rw:107374182400:0:0:0:0"].Object
			require.NotContains(t, string(ba.Before), object)
			require.Contains(t, string(ba.After), object, "the answer's after is the record stored, pool objects included")
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n2", "resource": ba.Before, "delta": false}, nil)
			require.Equal(t, 300*gib, poolGet(t, env, "ceph-a").Reserved)
			require.Len(t, poolObjects(t, env, "n2"), 1)
			noDrift(t, env)
		})
		t.Run("n1 isolated: its objects are unheld and still reserve", func(t *testing.T) {
			var out struct {
				Objects int64 `json:"released_pool_objects"`
				Bytes   int64 `json:"released_pool_bytes"`
			}
			env.OpOK(t, "storage", &out, "nodes", "isolate", "n1")
			require.Equal(t, int64(2), out.Objects)
			require.Equal(t, 200*gib, out.Bytes)
			for id, o := range poolObjects(t, env, "n1") {
				require.False(t, o.Held, "object %s", id)
			}
			require.Equal(t, 300*gib, poolGet(t, env, "ceph-a").Reserved)
		})
		t.Run("declare-lost is refused while n2 is not isolated", func(t *testing.T) {
			res := env.Op(t, "storage", "pools", "declare-lost", "ceph-a")
			require.Equal(t, 4, res.Code)
			require.Contains(t, res.Stderr, "n2")
			require.NotContains(t, res.Stderr, "n1,")
		})
		var attached json.RawMessage
		t.Run("n1's object is attached on n2 with the same object under n2's path", func(t *testing.T) {
			binding := "POOL@ceph-a/" + firstObject + ":/data:rw"
			d := deploy(t, env, "n2", 1, obj{"volumes": []string{binding}})
			require.Equal(t, []string{"/srv/ceph/" + firstObject + ":/data:rw:107374182400"}, d.EnginesParams[0].Volumes)
			commit(t, env, "n2", d.WorkloadsResource, true)
			attached = d.WorkloadsResource[0]
			require.NotContains(t, poolObjects(t, env, "n1"), firstObject)
			o := poolObjects(t, env, "n2")[firstObject]
			require.True(t, o.Held)
			require.Equal(t, 100*gib, o.Bytes)
			v := poolGet(t, env, "ceph-a")
			require.Equal(t, 300*gib, v.Reserved, "an attach moves the use right, not the reservation")
			require.Equal(t, int64(3), v.Objects)
			noDrift(t, env)
		})
		t.Run("a second attach of a held object is refused naming the holder", func(t *testing.T) {
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n2", "deploy_count": 1,
				"workload_resource_request": obj{"volumes": []string{"POOL@ceph-a/" + firstObject + ":/data:rw"}}})
			require.Contains(t, line, "is held by node n2")
		})
		t.Run("core removing the dead workload from n1 never releases the attached object twice", func(t *testing.T) {
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []json.RawMessage{first}, "delta": true, "incr": false}, nil)
			require.Equal(t, 300*gib, poolGet(t, env, "ceph-a").Reserved)
			require.Contains(t, poolObjects(t, env, "n2"), firstObject)
			noDrift(t, env)
		})
		t.Run("declare-lost once every member is isolated", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "nodes", "isolate", "n2")
			var lost struct {
				Pool        poolView `json:"pool"`
				LostVolumes int      `json:"lost_volumes"`
			}
			env.OpOK(t, "storage", &lost, "pools", "declare-lost", "ceph-a")
			require.Equal(t, 3, lost.LostVolumes)
			require.NotNil(t, lost.Pool.LostAt)
			require.Zero(t, lost.Pool.Reserved)
			var objs struct {
				Objects []struct {
					State string `json:"state"`
				} `json:"objects"`
			}
			env.OpOK(t, "storage", &objs, "pools", "objects", "ceph-a")
			require.Len(t, objs.Objects, 3)
			for _, o := range objs.Objects {
				require.Equal(t, "LOST", o.State)
			}
			noDrift(t, env)
			_ = attached
			require.True(t, strings.HasPrefix(firstObject, "v-"))
		})
	})
}

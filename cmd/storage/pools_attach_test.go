package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolAttachRefusals: an attach the usage write or calculate-deploy
// cannot honour is refused with one line naming why, and nothing is
// written.
func TestPoolAttachRefusals(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		for _, n := range []string{"n1", "n2", "n3"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "10G", "--if-version", "0")
		object := planObjects(placed(t, env, "n1", 1, "1G")[0])[0]
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")

		attach := obj{"volumes": []string{"POOL@ceph-a/" + object + ":/data:rw"}}
		twice := obj{"volumes": []string{"POOL@ceph-a/" + object + ":/a:rw", "POOL@ceph-a/" + object + ":/b:rw"}}
		for _, c := range []struct {
			verb string
			req  obj
		}{
			{"calculate-deploy", obj{"nodename": "n2", "deploy_count": 1, "workload_resource_request": twice}},
			{"get-nodes-deploy-capacity", obj{"nodenames": []string{"n2"}, "workload_resource": twice}},
		} {
			t.Run(c.verb+" refuses one object attached at two destinations of a workload", func(t *testing.T) {
				before := env.Dump(t)
				line := env.Fail(t, "storage", c.verb, c.req)
				require.Contains(t, line, "invalid_argument: pool object "+object+" is attached twice, at /a and /b: a workload attaches an object once")
				require.Equal(t, before, env.Dump(t))
				living := exactPool(t, env, "ceph-a")
				require.Equal(t, storedObject{Node: "n1", Pool: "ceph-a", Bytes: gib}, living[object])
			})
		}
		t.Run("a usage write planned before another node attached the object is aborted and writes nothing", func(t *testing.T) {
			stale := deploy(t, env, "n2", 1, attach).WorkloadsResource
			commit(t, env, "n3", deploy(t, env, "n3", 1, attach).WorkloadsResource, true)
			before := env.Dump(t)
			line := env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n2", "workloads_resource": stale, "delta": true, "incr": true})
			require.Contains(t, line, "aborted: object "+object+" is no longer in node n1's record, where the deploy's plan found it (attached elsewhere or deleted since); plan the deploy again")
			require.Equal(t, before, env.Dump(t))
			living := exactPool(t, env, "ceph-a")
			require.Equal(t, storedObject{Node: "n3", Pool: "ceph-a", Bytes: gib, Held: true}, living[object])
		})
	})
}

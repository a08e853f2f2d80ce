package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestAMountsIOLimitReachesTheEngine: a mount binding whose IO quota is
// in its limit only reserves nothing, but the engine is given its limit
// on the disk that covers its source, as for any binding; and a realloc
// that changes only a limit gives the engine the new limits.
func TestAMountsIOLimitReachesTheEngine(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:100G"}, "disks": []string{"/dev/vda:/:1000:1000:1G:1G"}, "storage": "100G"})
		limited := []disk{{Device: "/dev/vda", Mounts: []string{"/"}, ReadIOPS: 10, WriteIOPS: 10, ReadBPS: 10, WriteBPS: 10}}
		for _, c := range []struct {
			name     string
			request  obj
			reserved int64 // read IOPS the deploy reserves
		}{
			{"a mount with IO quota in its limit only", obj{"volumes-request": []string{"/data0/x:/x:rw:0"}, "volumes": []string{"/data0/x:/x:rw:0:10:10:10:10"}}, 0},
			{"a mount with a smaller request quota", obj{"volumes-request": []string{"/data0/x:/x:rw:0:1:1:1:1"}, "volumes": []string{"/data0/x:/x:rw:0:10:10:10:10"}}, 1},
		} {
			t.Run(c.name+" is limited on its covering disk", func(t *testing.T) {
				d := deploy(t, env, "n1", 1, c.request)
				require.Equal(t, map[string]string{"/dev/vda": "10:10:10:10"}, d.EnginesParams[0].IOPSOptions)
				w := decodeWorkload(t, d.WorkloadsResource[0])
				require.Equal(t, limited, w.DisksLimit)
				var reserved int64
				for _, q := range w.DisksRequest {
					reserved += q.ReadIOPS
				}
				require.Equal(t, c.reserved, reserved)
			})
		}
		t.Run("a realloc raising only a mount's IO limit gives the engine the new limit", func(t *testing.T) {
			d := deploy(t, env, "n1", 1, obj{"volumes": []string{"/data0/x:/x:rw:0:1:1:1:1"}})
			var r reallocAnswer
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": d.WorkloadsResource[0],
				"workload_resource_request": obj{"volumes-request": []string{"/data0/x:/x:rw:0"}, "volumes": []string{"/data0/x:/x:rw:0:9:9:9:9"}}}, &r)
			require.Equal(t, map[string]string{"/dev/vda": "10:10:10:10"}, r.EngineParams.IOPSOptions)
			require.Equal(t, limited, decodeWorkload(t, r.WorkloadResource).DisksLimit)
		})
	})
}

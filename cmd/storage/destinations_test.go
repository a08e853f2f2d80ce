package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestOneMountPerDestination: the engine takes one mount per destination
// inside the container, so a workload whose bindings would mount two
// different things at one destination is refused as invalid_argument naming
// the destination, by calculate-deploy and by calculate-realloc (on the
// bindings the realloc would leave), with nothing written. A realloc that
// resizes a binding, or swaps it for another at the same destination, is
// no clash.
func TestOneMountPerDestination(t *testing.T) {
	t.Parallel()
	node := obj{
		"volumes": []string{"/data0:1T", "/data1:1T"},
		"disks":   []string{"/dev/vda:/,/data0:1000:1000:1G:1G"},
		"storage": "2T",
		"pools":   []string{"ceph-a:/mnt/ceph-a"},
	}
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", node)
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "300G", "--if-version", "0")

		deployCases := []struct {
			name    string
			volumes []string
			want    string
		}{
			{"two AUTO bindings whose flags differ", []string{"AUTO:/x:rw:1G", "AUTO:/x:ro:1G"},
				"invalid_argument: destination /x is mounted twice, by AUTO:/x:rw:1073741824:0:0:0:0 and AUTO:/x:or:1073741824:0:0:0:0: a container takes one mount per destination"},
			{"an AUTO binding and a host path", []string{"AUTO:/x:rw:1G", "/data0:/x:rw"},
				"invalid_argument: destination /x is mounted twice, by AUTO:/x:rw:1073741824:0:0:0:0 and /data0:/x:rw:0:0:0:0:0"},
			{"two spellings of one destination", []string{"AUTO:/x:rw:1G", "AUTO:/x/:rw:1G"},
				"invalid_argument: destination /x is mounted twice"},
			{"a volume and a pool volume", []string{"AUTO:/x:rw:1G", "POOL:/x:rw:1G"},
				"invalid_argument: destination /x is mounted twice, by AUTO:/x:rw:1073741824:0:0:0:0 and POOL:/x:rw:1073741824:0:0:0:0"},
			{"two new pool volumes", []string{"POOL:/x:rw:1G", "POOL@ceph-a:/x:rw:2G"},
				"invalid_argument: destination /x is mounted twice"},
		}
		for _, c := range deployCases {
			t.Run("a deploy with "+c.name+" at one destination is refused", func(t *testing.T) {
				before := env.Dump(t)
				line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumes": c.volumes}})
				require.Contains(t, line, "storage: calculate-deploy: node n1: "+c.want)
				require.Equal(t, before, env.Dump(t), "nothing written")
			})
		}
		t.Run("a capacity query for such a request is refused the same way", func(t *testing.T) {
			res := env.Verb(t, "storage", "get-nodes-deploy-capacity", obj{"nodenames": []string{"n1"}, "workload_resource": obj{"volumes": []string{"AUTO:/x:rw:1G", "AUTO:/x:ro:1G"}}})
			require.Equal(t, 128, res.Code, res.Stdout)
			require.Contains(t, res.Stderr, "invalid_argument: destination /x is mounted twice")
		})

		held := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/x:rw:1G"}}).WorkloadsResource[0]
		pooled := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/p:rw:1G"}}).WorkloadsResource[0]
		realloc := func(workload json.RawMessage, volumes ...string) obj {
			return obj{"nodename": "n1", "workload_resource": workload, "workload_resource_request": obj{"volumes": volumes}}
		}
		reallocRefused := []struct {
			name     string
			workload json.RawMessage
			volumes  []string
			want     string
		}{
			{"a binding of other flags beside the one held", held, []string{"AUTO:/x:ro:0"},
				"invalid_argument: destination /x is mounted twice, by AUTO:/x:rw:1073741824:0:0:0:0 and AUTO:/x:or:0:0:0:0:0"},
			{"a host path at the destination of an AUTO binding", held, []string{"/data0:/x:rw"},
				"invalid_argument: destination /x is mounted twice, by AUTO:/x:rw:1073741824:0:0:0:0 and /data0:/x:rw:0:0:0:0:0"},
			{"a pool volume at the destination of an AUTO binding", held, []string{"POOL:/x:rw:1G"},
				"invalid_argument: destination /x is mounted twice"},
			{"an AUTO binding at the destination of a pool volume", pooled, []string{"AUTO:/p:rw:1G"},
				"invalid_argument: destination /p is mounted twice"},
		}
		for _, c := range reallocRefused {
			t.Run("a realloc adding "+c.name+" is refused", func(t *testing.T) {
				before := env.Dump(t)
				line := env.Fail(t, "storage", "calculate-realloc", realloc(c.workload, c.volumes...))
				require.Contains(t, line, "storage: calculate-realloc: node n1: "+c.want)
				require.Equal(t, before, env.Dump(t), "nothing written")
			})
		}

		t.Run("a realloc growing the binding it holds keeps one mount", func(t *testing.T) {
			var r reallocAnswer
			env.Call(t, "storage", "calculate-realloc", realloc(held, "AUTO:/x:rw:1G"), &r)
			require.Len(t, r.EngineParams.Volumes, 1)
			require.Regexp(t, `^/data[01]:/x:rw:2147483648$`, r.EngineParams.Volumes[0])
			require.False(t, r.EngineParams.VolumeChanged)
		})
		t.Run("a realloc swapping the binding's flags at its destination keeps one mount", func(t *testing.T) {
			var r reallocAnswer
			env.Call(t, "storage", "calculate-realloc", realloc(held, "AUTO:/x:rw:-1G", "AUTO:/x:ro:1G"), &r)
			require.Len(t, r.EngineParams.Volumes, 1)
			require.Regexp(t, `^/data[01]:/x:ro:1073741824$`, r.EngineParams.Volumes[0])
			require.Equal(t, []string{"AUTO:/x:or:1073741824:0:0:0:0"}, decodeWorkload(t, r.WorkloadResource).VolumesRequest)
		})
		t.Run("a deploy with bindings at different destinations is placed", func(t *testing.T) {
			d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/x:rw:1G", "AUTO:/x/y:ro:1G", "POOL:/z:rw:1G"}})
			require.Len(t, d.EnginesParams[0].Volumes, 3)
		})
	})
}

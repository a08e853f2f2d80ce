package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// The storage plugin exactly as eru core and eru-cli drive it (issue 10),
// its arithmetic and device names (issue 18 §4), work bounded by the call
// (§6) and refusals a person can act on: each rule through the built
// binary, on etcd and on the embedded store.

// storeUnchanged runs f and checks that the store holds the same keys and
// values after it.
func storeUnchanged(t *testing.T, env *testenv.Env, f func()) {
	t.Helper()
	before := env.Dump(t)
	f()
	require.Equal(t, before, env.Dump(t), "the store changed")
}

func TestConversionOpensTheDeviceThatHoldsTheNormalBinding(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/d0:10G", "/d1:100G"}, "storage": "1T"})
		req := obj{"volumes": []string{"AUTO:/n:rw:50G", "AUTO:/m:mrw:5G"}}
		require.Equal(t, 1, capacity(t, env, []string{"n1"}, req).Nodes["n1"].Capacity,
			"/d1 is opened for the normal binding, /d0 (too small for it) stays whole for the group")
		d := deploy(t, env, "n1", 1, req)
		require.Equal(t, map[string]map[string]int64{
			"AUTO:/n:rw:53687091200:0:0:0:0": {"/d1": 50 * gib},
			"AUTO:/m:mrw:5368709120:0:0:0:0": {"/d0": 10 * gib},
		}, decodeWorkload(t, d.WorkloadsResource[0]).VolumePlanRequest)
	})
}

func TestADeviceHostingAnUnlimitedBindingIsNotGivenToAMonopolyGroup(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:1T", "/data1:1T"}, "storage": "1T"})
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/u:rw:0"}})
		require.Equal(t, []string{"/data0:/u:rw:0"}, d.EnginesParams[0].Volumes)
		commit(t, env, "n1", d.WorkloadsResource, true)

		var rec struct {
			Usage struct {
				Volumes  map[string]int64 `json:"volumes"`
				ZeroByte map[string]int64 `json:"zero_byte_bindings"`
			} `json:"usage"`
		}
		require.True(t, env.Record(t, "/resource/storage/n1", &rec))
		require.Equal(t, map[string]int64{"/data0": 0, "/data1": 0}, rec.Usage.Volumes, "charged no bytes")
		require.Equal(t, map[string]int64{"/data0": 1}, rec.Usage.ZeroByte, "but recorded as hosting a binding")
		require.Empty(t, info(t, env, "n1", d.WorkloadsResource...).Diffs)

		mono := obj{"volumes": []string{"AUTO:/m:mrw:100G"}}
		require.Equal(t, 1, capacity(t, env, []string{"n1"}, mono).Nodes["n1"].Capacity, "only /data1 is unused")
		line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 2, "workload_resource_request": mono})
		require.Equal(t, "storage: calculate-deploy: node n1: resource_exhausted: need 2 plans, have 1: plan 2: volume AUTO:/m:mrw:107374182400:0:0:0:0 (100 GiB): "+
			"its monopoly group needs an unused volume of 100 GiB: the node has 1 (a volume hosting any binding is not unused), taken by the plans before it", line)
		m := deploy(t, env, "n1", 1, mono)
		require.Equal(t, []string{"/data1:/m:rw:1099511627776"}, m.EnginesParams[0].Volumes)

		t.Run("removing the workload frees the device", func(t *testing.T) {
			commit(t, env, "n1", d.WorkloadsResource, false)
			var raw map[string]map[string]json.RawMessage
			require.True(t, env.Record(t, "/resource/storage/n1", &raw))
			require.NotContains(t, raw["usage"], "zero_byte_bindings", "a record with none is written as before")
			require.Equal(t, 2, capacity(t, env, []string{"n1"}, mono).Nodes["n1"].Capacity)
		})
	})
}

func TestGrowingABindingOnTheWorkloadsMonopolyDeviceReSplitsIt(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:100G"}, "storage": "1T"})
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/m:mrw:10G", "AUTO:/u:rw:0"}})
		commit(t, env, "n1", d.WorkloadsResource, true)

		var r reallocAnswer
		env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": d.WorkloadsResource[0],
			"workload_resource_request": obj{"volumes": []string{"AUTO:/u:rw:20G"}}}, &r)
		w := decodeWorkload(t, r.WorkloadResource)
		require.Equal(t, map[string]map[string]int64{
			"AUTO:/m:mrw:10737418240:0:0:0:0": {"/data0": 80 * gib},
			"AUTO:/u:rw:21474836480:0:0:0:0":  {"/data0": 20 * gib},
		}, w.VolumePlanRequest)
		require.ElementsMatch(t, []string{"/data0:/m:rw:85899345920", "/data0:/u:rw:21474836480"}, r.EngineParams.Volumes)
		require.False(t, r.EngineParams.VolumeChanged)

		commit(t, env, "n1", []json.RawMessage{r.DeltaResource}, true)
		got := info(t, env, "n1", r.WorkloadResource)
		require.Equal(t, []string{}, got.Diffs, "the delta leaves usage equal to the new workload")
		require.Equal(t, map[string]int64{"/data0": 100 * gib}, got.Usage.Volumes)
	})
}

func TestVolumeChangedIsTrueOnlyWhenAVolumeIsAddedRemovedOrMoved(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/data:rw:100G", "/var/log:/log:rw:0:10:10:0:0"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		for _, c := range []struct {
			name    string
			request obj
			changed bool
		}{
			{"a size grown", obj{"volumes": []string{"AUTO:/data:rw:10G"}}, false},
			{"a size shrunk", obj{"volumes": []string{"AUTO:/data:rw:-10G"}}, false},
			{"an IO quota raised", obj{"volumes": []string{"/var/log:/log:rw:0:5:5:0:0"}}, false},
			{"the storage budget", obj{"storage": "1G"}, false},
			{"a binding added", obj{"volumes": []string{"AUTO:/more:rw:1G"}}, true},
			{"a binding removed", obj{"volumes": []string{"AUTO:/data:rw:-100G"}}, true},
			{"a mount added", obj{"volumes": []string{"/etc/app:/app"}}, true},
		} {
			t.Run(c.name+fmt.Sprintf(" answers volume_changed %t", c.changed), func(t *testing.T) {
				var r reallocAnswer
				env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": d.WorkloadsResource[0], "workload_resource_request": c.request}, &r)
				require.Equal(t, c.changed, r.EngineParams.VolumeChanged)
			})
		}
	})
}

func TestNodeSetDeltaWithNegativeValuesShrinksTheNode(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{
			"volumes": []string{"/data0:1T", "/data1:1T"},
			"disks":   []string{"/dev/sda:/data0:1000:1000:1G:1G"},
			"storage": "2T",
		})
		// what core sends for eru-cli node set --delta --volume /data0:-100G
		// --storage -10G --disk /dev/sda:/data0:-100:0:0:0: incr is always true.
		var ba beforeAfter
		env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": true, "incr": true,
			"resource_request": obj{"volumes": []string{"/data0:-100G"}, "storage": "-10G", "disks": []string{"/dev/sda:/data0:-100:0:0:0"}}}, &ba)
		var after nodeResource
		require.NoError(t, json.Unmarshal(ba.After, &after))
		require.Equal(t, map[string]int64{"/data0": tib - 100*gib, "/data1": tib}, after.Volumes)
		require.Equal(t, 4*tib-110*gib, after.Storage, "the budget shrinks by 10G and by the volume's 100G")
		require.Equal(t, []disk{{Device: "/dev/sda", Mounts: []string{"/data0"}, ReadIOPS: 900, WriteIOPS: 1000, ReadBPS: gib, WriteBPS: gib}}, after.Disks)

		t.Run("core's rollback of it restores the node", func(t *testing.T) {
			env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": false, "resource_request": ba.Before}, nil)
			require.Equal(t, map[string]int64{"/data0": tib, "/data1": tib}, info(t, env, "n1").Capacity.Volumes)
		})

		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/data:rw:950G"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		used := decodeWorkload(t, d.WorkloadsResource[0]).VolumePlanRequest["AUTO:/data:rw:1020054732800:0:0:0:0"]
		require.Len(t, used, 1)
		var dev string
		for dev = range used {
		}
		for _, c := range []struct {
			name    string
			request obj
			want    string
		}{
			{"a volume below its usage", obj{"volumes": []string{dev + ":-100G"}},
				"failed_precondition: volume " + dev + ": capacity 1 TiB (1099511627776 bytes) - 107374182400 would be 924 GiB, below its usage 950 GiB (1020054732800 bytes)"},
			{"a volume below zero", obj{"volumes": []string{"/data1:-2T"}},
				"failed_precondition: volume /data1: capacity 1 TiB (1099511627776 bytes) - 2199023255552 would be below zero"},
			{"storage below its usage", obj{"storage": "-3.5T"},
				"failed_precondition: storage: capacity 4 TiB (4398046511104 bytes) - 3848290697216 would be 512 GiB, below its usage 950 GiB (1020054732800 bytes)"},
			{"a disk quota below zero", obj{"disks": []string{"/dev/sda:/data0:-2000:0:0:0"}},
				"failed_precondition: disk /dev/sda: read_IOPS 1000 - 2000 would be below zero"},
		} {
			t.Run(c.name+" is refused naming the device and the amounts, and nothing is written", func(t *testing.T) {
				storeUnchanged(t, env, func() {
					line := env.Fail(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": true, "incr": true, "resource_request": c.request})
					require.Equal(t, "storage: set-node-resource-capacity: node n1: "+c.want, line)
				})
			})
		}
		t.Run("a negative value in absolute mode is refused", func(t *testing.T) {
			line := env.Fail(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": false, "resource_request": obj{"volumes": []string{"/data1:-1G"}}})
			require.Contains(t, line, `invalid_argument: volume "/data1:-1G": size "-1G" is negative`)
		})
	})
}

func TestADeltaTakingADisksQuotasToZeroKeepsTheDisk(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{
			"volumes": []string{"/data0:1T"},
			"disks":   []string{"/dev/root:/:1000:1000:0:0", "/dev/sda:/data0:100:100:0:0"},
			"storage": "1T",
		})
		env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": true, "incr": false,
			"resource_request": obj{"disks": []string{"/dev/sda:/data0:100:100:0:0"}}}, nil)
		require.Equal(t, []disk{
			{Device: "/dev/root", Mounts: []string{"/"}, ReadIOPS: 1000, WriteIOPS: 1000},
			{Device: "/dev/sda", Mounts: []string{"/data0"}},
		}, info(t, env, "n1").Capacity.Disks)
		// a mount under /data0 still draws on /dev/sda, not on /dev/root.
		req := obj{"volumes": []string{"/data0/x:/x:rw:0:1:0:0:0"}}
		require.NotContains(t, capacity(t, env, []string{"n1"}, req).Nodes, "n1")
		line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": req})
		require.Contains(t, line, "disk /dev/sda has 0:0:0:0 (asked 1:0:0:0) of IO quota left")

		t.Run("rm-disks removes it", func(t *testing.T) {
			env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": false, "resource_request": obj{"rm-disks": "/dev/sda"}}, nil)
			require.Len(t, info(t, env, "n1").Capacity.Disks, 1)
		})
	})
}

func TestWorkloadSumsThatWouldWrapAreRefused(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:1T"}, "disks": []string{"/dev/vda:/:1000:1000:0:0"}, "storage": "1T"})
		// 2,048 workloads of 2^53 read IOPS and one of 5: 2^64 + 5, which
		// int64 arithmetic wraps to 5.
		big := json.RawMessage(`{"disks_request":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":9007199254740992}]}`)
		small := json.RawMessage(`{"disks_request":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":5}]}`)
		workloads := make([]json.RawMessage, 0, 2049)
		for range 2048 {
			workloads = append(workloads, big)
		}
		workloads = append(workloads, small)
		const want = "invalid_argument: workloads hold more than 2^53 of read_IOPS on disk /dev/vda"
		storeUnchanged(t, env, func() {
			for _, delta := range []bool{true, false} {
				line := env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": workloads, "delta": delta, "incr": true})
				require.Equal(t, "storage: set-node-resource-usage: node n1: "+want, line)
			}
			for _, verb := range []string{"get-node-resource-info", "fix-node-resource"} {
				line := env.Fail(t, "storage", verb, obj{"nodename": "n1", "workloads_resource": workloads})
				require.Equal(t, "storage: "+verb+": node n1: "+want, line)
			}
		})
	})
}

func TestDeviceNamesAreCheckedPaths(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		for _, c := range []struct {
			name, volume, want string
		}{
			{"a device holding a colon", "/a:b:1G", `volume device "/a:b" holds ':', which separates the parts of a volume or disk`},
			{"a relative device", "data0:1G", `volume device "data0" is not an absolute path`},
			{"a device holding a NUL", "/data\x000:1G", `volume device "/data\x000" holds a control character`},
			{"a device that is not clean", "/data0/../etc:1G", `volume device "/data0/../etc" is not a clean path (it would be /etc)`},
			{"AUTO", "AUTO:1G", `volume device "AUTO": AUTO is what a binding asks the scheduler for, not a device`},
		} {
			t.Run(c.name+" is refused in add-node and set-node-resource-capacity, one line, nothing written", func(t *testing.T) {
				storeUnchanged(t, env, func() {
					line := env.Fail(t, "storage", "add-node", obj{"nodename": "n2", "resource": obj{"volumes": []string{c.volume}}})
					require.Contains(t, line, "storage: add-node: node n2: invalid_argument: ")
					require.Contains(t, line, c.want)
					line = env.Fail(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": true, "incr": true, "resource_request": obj{"volumes": []string{c.volume}}})
					require.Contains(t, line, c.want)
				})
			})
		}
		for _, c := range []struct{ name, disk, want string }{
			{"a relative disk device", "vda:/:1:1:1:1", `disk device "vda" is not an absolute path`},
			{"a mount that is not clean", "/dev/vda:/data/../x:1:1:1:1", `mount "/data/../x" is not a clean path`},
		} {
			t.Run(c.name+" is refused", func(t *testing.T) {
				storeUnchanged(t, env, func() {
					line := env.Fail(t, "storage", "add-node", obj{"nodename": "n2", "resource": obj{"disks": []string{c.disk}}})
					require.Contains(t, line, c.want)
				})
			})
		}
	})
}

func TestPlacementVerbsStopAtTheirDeadline(t *testing.T) {
	t.Parallel()
	// 4,000 normal bindings of one byte and max_deploy_count 10,000: a
	// search of 40 million placements, far past a one-second call budget.
	bindings := make([]string, 4000)
	for i := range bindings {
		bindings[i] = fmt.Sprintf("AUTO:/v%04d:rw:1", i)
	}
	heavy := obj{"volumes": bindings}
	run := func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:1T"}, "storage": "1T"})
		storeUnchanged(t, env, func() {
			line := env.Fail(t, "storage", "get-nodes-deploy-capacity", obj{"nodenames": []string{"n1"}, "workload_resource": heavy})
			require.True(t, strings.HasPrefix(line, "storage: get-nodes-deploy-capacity: deadline_exceeded: "), line)
			line = env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 10000, "workload_resource_request": heavy})
			require.True(t, strings.HasPrefix(line, "storage: calculate-deploy: node n1: deadline_exceeded: the plan search stopped at the call's deadline"), line)
		})
	}
	pick := testenv.ShortStore(t)
	t.Run("etcd", func(t *testing.T) {
		testenv.SkipUnlessShortStore(t, pick, "etcd")
		run(t, testenv.NewEtcd(t, testenv.WithConfig("  call_timeout: 1s")))
	})
	t.Run("embedded", func(t *testing.T) {
		testenv.SkipUnlessShortStore(t, pick, "embedded")
		run(t, testenv.NewEmbedded(t, testenv.WithConfig("etcd:\n  call_timeout: 1s")))
	})
}

func TestRefusalsNameWhatStoppedThem(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		// a 50 GiB volume and a budget that makes 1.5 TiB in all
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:50G"}, "storage": 1649267441664 - 53687091200})
		for _, c := range []struct {
			name    string
			request obj
			count   int
			want    string
		}{
			{"the storage budget", obj{"storage": "1T"}, 2,
				"storage budget: 2 TiB asked (2 workloads of 1 TiB), 1.5 TiB left (1649267441664 bytes)"},
			{"a volume too small", obj{"volumes": []string{"AUTO:/data:rw:100G"}}, 1,
				"need 1 plans, have 0: plan 1: volume AUTO:/data:rw:107374182400:0:0:0:0 (100 GiB): no volume has 100 GiB free: the most is 50 GiB on /data0 (53687091200 bytes)"},
		} {
			t.Run(c.name, func(t *testing.T) {
				line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": c.count, "workload_resource_request": c.request})
				require.Equal(t, "storage: calculate-deploy: node n1: resource_exhausted: "+c.want, line)
			})
		}
		t.Run("a node storage has never seen", func(t *testing.T) {
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "ghost", "deploy_count": 1, "workload_resource_request": obj{"volumes": []string{"AUTO:/d:rw:1G"}}})
			require.Equal(t, "storage: calculate-deploy: node ghost: resource_exhausted: no storage record for this node: add it (add-node) or set its capacity first", line)
			line = env.Fail(t, "storage", "calculate-realloc", obj{"nodename": "ghost", "workload_resource": nil, "workload_resource_request": obj{"volumes": []string{"AUTO:/d:rw:1G"}}})
			require.Equal(t, "storage: calculate-realloc: node ghost: resource_exhausted: no storage record for this node: add it (add-node) or set its capacity first", line)
		})
	})
}

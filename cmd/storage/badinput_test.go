package main_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestBadInputIsRefusedAndWritesNothing: every malformed request is one line
// naming what is wrong, exit 128, and the store exactly as it was.
func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	deployReq := func(volumes ...string) obj {
		return obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumes": volumes}}
	}
	capacityReq := func(r obj) obj {
		return obj{"nodename": "n1", "resource_request": r, "delta": false}
	}
	cases := []struct {
		name, verb string
		stdin      any
		want       string // the error line contains this
	}{
		{"malformed JSON", "add-node", `{"nodename": "n1",`, "invalid_argument: request: malformed JSON"},
		{"empty stdin", "add-node", ``, "invalid_argument: stdin is empty"},
		{"a JSON array where an object is expected", "set-node-resource-usage", `[{"nodename":"n1"}]`, "invalid_argument: stdin is not a JSON object"},
		{"invalid UTF-8", "add-node", "{\"nodename\": \"n\xff\"}", "invalid_argument: stdin is not valid UTF-8"},
		{"two JSON values", "add-node", `{"nodename":"n2"} {"nodename":"n3"}`, "more than one JSON value"},
		{"a wrongly typed key", "calculate-deploy", `{"nodename":"n1","deploy_count":"two"}`, "invalid_argument: request: deploy_count: want int"},
		{"a missing nodename", "add-node", obj{"resource": standardNode}, "add-node: invalid_argument: nodename is missing"},
		{"a binding with 9 parts", "calculate-deploy", deployReq("AUTO:/d:rw:1G:0:0:0:0:0"), "has 9 parts"},
		{"a binding with 5 parts", "calculate-deploy", deployReq("AUTO:/d:rw:1G:0"), "has 5 parts"},
		{"a binding without destination", "calculate-deploy", deployReq("AUTO::rw:1G"), "has no destination"},
		{"a negative size", "calculate-deploy", deployReq("AUTO:/d:rw:-1G"), `size "-1G" is negative`},
		{"a negative quota", "calculate-deploy", deployReq("AUTO:/d:rw:1G:-5:0:0:0"), "is negative"},
		{"an unknown size unit", "calculate-deploy", deployReq("AUTO:/d:rw:1Q"), "not a number of bytes or a human size"},
		{"a size past 8 PiB", "calculate-deploy", deployReq("AUTO:/d:rw:99999999999P"), "too large"},
		{"sizes adding up past 8 PiB", "calculate-deploy", deployReq("AUTO:/a:rw:5P", "AUTO:/b:rw:5P"), "more than 8 PiB"},
		{"a monopoly binding of size 0", "calculate-deploy", deployReq("AUTO:/d:mrw:0"), "a monopoly binding needs a size or an IO quota"},
		{"an unknown flag letter", "calculate-deploy", deployReq("AUTO:/d:rwx:1G"), "is not one of r, w, o, m"},
		{"a request and a limit that differ", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumes-request": []string{"AUTO:/a:rw:1G"}, "volumes": []string{"AUTO:/b:rw:1G"}}}, "has no matching binding in volumes"},
		{"request and limit lists of different lengths", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumes-request": []string{"AUTO:/a:rw:1G"}, "volumes": []string{"AUTO:/a:rw:1G", "AUTO:/b:rw:1G"}}}, "volumes-request has 1 bindings but volumes has 2"},
		{"an unknown workload key", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumez": []string{"AUTO:/a:rw:1G"}}}, `unknown key "volumez"`},
		{"a deploy count of zero", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 0, "workload_resource_request": obj{}}, "deploy_count 0: want at least 1"},
		{"a disks entry with 5 parts", "set-node-resource-capacity", capacityReq(obj{"disks": []string{"/dev/vdb:/x:1:1:1"}}), "has 5 parts"},
		{"a negative disk quota", "set-node-resource-capacity", capacityReq(obj{"disks": []string{"/dev/vdb:/x:-1:1:1:1"}}), "negative"},
		{"a negative volume size", "set-node-resource-capacity", capacityReq(obj{"volumes": []string{"/data2:-1T"}}), "negative"},
		{"rm-disks in delta mode", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"rm-disks": "/dev/vda"}, "delta": true, "incr": false}, "rm-disks is only valid in absolute mode"},
		{"removing a disk the node lacks", "set-node-resource-capacity", capacityReq(obj{"rm-disks": "/dev/vdz"}), "failed_precondition: rm-disks: the node has no disk /dev/vdz"},
		{"shrinking a volume below zero", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data0:2T"}}, "delta": true, "incr": false}, "volume /data0: capacity 1 TiB (1099511627776 bytes) - 2199023255552 would be below zero"},
		{"an unknown node request key", "set-node-resource-capacity", capacityReq(obj{"volume": []string{"/data2:1T"}}), `unknown key "volume"`},
		{"a usage write above capacity", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data0:2T"}}, "delta": true, "incr": true}, "above its capacity"},
		{"usage on a device the node lacks", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data9:1G"}}, "delta": true, "incr": true}, "the node has no such volume"},
		{"usage driven negative", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"storage": "1G"}, "delta": true, "incr": false}, "out of range"},
		{"a disk quota usage above capacity", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"disks": []string{"/dev/vda:/:5000:0:0:0"}}, "delta": true, "incr": true}, "above its capacity"},
		{"a restored usage above capacity", "set-node-resource-info", obj{"nodename": "n1", "capacity": obj{"volumes": obj{"/data0": 1}, "disks": []obj{}, "storage": 1}, "usage": obj{"volumes": obj{"/data0": 2}, "disks": []obj{}, "storage": 0}}, "above its capacity"},
		{"a stored capacity with a misspelt key", "set-node-resource-capacity", obj{"nodename": "n1", "resource": obj{"volume": []string{"/data0:1T"}}, "delta": false}, `unknown key "volume"`},
		{"a stored capacity missing a key it would wipe", "set-node-resource-capacity", obj{"nodename": "n1", "resource": obj{"storage": 5}, "delta": false}, `needs "volumes"`},
		{"a stored usage of another plugin's shape", "set-node-resource-usage", obj{"nodename": "n1", "resource": obj{"cpu": 1}, "delta": false}, `unknown key "cpu"`},
		{"a restored capacity of another plugin's shape", "set-node-resource-info", obj{"nodename": "n1", "capacity": obj{"cpu_millis": 4000, "memory_bytes": 1}, "usage": obj{"cpu_millis": 0, "memory_bytes": 0}}, `unknown key "cpu_millis"`},
		{"a workload resource that is not an object", "calculate-realloc", obj{"nodename": "n1", "workload_resource": []int{1}, "workload_resource_request": obj{}}, "invalid_argument: workload resource"},
		{"workloads that are not a list", "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": obj{"a": 1}}, "workloads_resource: want a list"},
	}
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		for _, c := range cases {
			t.Run(c.name+" is refused", func(t *testing.T) {
				before := env.Dump(t)
				line := env.Fail(t, "storage", c.verb, c.stdin)
				require.Contains(t, line, c.want)
				require.NotContains(t, line, "goroutine", "no stack trace")
				require.Equal(t, before, env.Dump(t), "nothing written")
			})
		}
	})
}

func TestUncoveredMountWithIOQuotaIsAClearError(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	addNode(t, env, "n1", obj{"volumes": []string{"/data0:1T"}, "disks": []string{"/dev/vdb:/data:100:100:0:0"}})
	before := env.Dump(t)
	line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumes": []string{"/srv/x:/x:rw:0:10:0:0:0"}}})
	require.Contains(t, line, "node n1: invalid_argument: volume /srv/x:/x:rw:0:10:0:0:0 asks for IO quota but no disk's mounts cover /srv/x")
	require.Equal(t, before, env.Dump(t))
	t.Run("the capacity query leaves such a node out instead of failing", func(t *testing.T) {
		got := capacity(t, env, []string{"n1"}, obj{"volumes": []string{"/srv/x:/x:rw:0:10:0:0:0"}})
		require.Empty(t, got.Nodes)
	})
}

// TestUncoveredMountWithIOLimitIsAClearError: a mount binding whose IO
// quota is in its limit only is refused on a node no disk of which covers
// its source, as it is with the quota in its request; the engine would
// otherwise be given no limit at all (iops_options {}), silently.
func TestUncoveredMountWithIOLimitIsAClearError(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	addNode(t, env, "n1", obj{"volumes": []string{"/data0:1T"}, "disks": []string{"/dev/vdb:/data:100:100:0:0"}})
	const want = "node n1: invalid_argument: volume /srv/x:/x:rw:0:10:0:0:0 asks for IO quota but no disk's mounts cover /srv/x"
	for _, c := range []struct {
		name    string
		request obj
	}{
		{"quota in the request and the limit", obj{"volumes": []string{"/srv/x:/x:rw:0:10:0:0:0"}}},
		{"quota in the limit only", obj{"volumes-request": []string{"/srv/x:/x:rw:0"}, "volumes": []string{"/srv/x:/x:rw:0:10:0:0:0"}}},
		{"quota in the limit only, beside a scheduled volume", obj{"volumes-request": []string{"AUTO:/a:rw:1G", "/srv/x:/x:rw:0"}, "volumes": []string{"AUTO:/a:rw:1G", "/srv/x:/x:rw:0:10:0:0:0"}}},
	} {
		t.Run(c.name+": deploy refuses, the capacity query leaves the node out", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": c.request})
			require.Contains(t, line, want)
			require.Equal(t, before, env.Dump(t))
			require.Empty(t, capacity(t, env, []string{"n1"}, c.request).Nodes)
		})
	}
	t.Run("a realloc setting such a limit is refused", func(t *testing.T) {
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"/srv/x:/x:rw:0"}})
		line := env.Fail(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": d.WorkloadsResource[0],
			"workload_resource_request": obj{"volumes-request": []string{"/srv/x:/x:rw:0"}, "volumes": []string{"/srv/x:/x:rw:0:10:0:0:0"}}})
		require.Contains(t, line, want)
	})
}

func TestUsageErrorsOfTheCommandLine(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown verb", []string{"bogus"}, `storage: invalid_argument: unknown command "bogus"`},
		{"an unknown global flag", []string{"--bogus", "name"}, "storage: invalid_argument: flag provided but not defined: -bogus"},
		{"an argument after a verb", []string{"add-node", "n1"}, "storage: add-node: invalid_argument: unexpected argument"},
		{"a config file that does not exist", []string{"--config", "/nonexistent/storage.yaml", "get-node-resource-info"}, "invalid_argument: config: open /nonexistent/storage.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name+" is one line and a non-zero exit", func(t *testing.T) {
			res := env.Exec(t, "storage", []byte(`{"nodename":"n1"}`), c.args...)
			require.NotEqual(t, 0, res.Code)
			require.Empty(t, res.Stdout)
			require.Contains(t, res.Stderr, c.want)
			require.Equal(t, 1, strings.Count(res.Stderr, "\n"))
		})
	}
}

func TestMalformedConfigNamesTheFileAndKey(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t, testenv.WithConfig("etcd:\n  dial_timeout: soon"))
	line := env.Fail(t, "storage", "get-node-resource-info", obj{"nodename": "n1"})
	require.Contains(t, line, "invalid_argument: config "+env.Dir+"/storage.yaml: etcd.dial_timeout: \"soon\" is not a positive duration")
}

// TestASessionTTLTheHeartbeatWouldRefuseIsAConfigError: nodes.session_ttl
// above what a heartbeat's session may live is refused where the config is
// read, naming the file, the key, the line and the limit, by every verb and
// command, before a heartbeat could run on it.
func TestASessionTTLTheHeartbeatWouldRefuseIsAConfigError(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t, testenv.WithConfig("nodes:\n  session_ttl: 11m"))
	want := "invalid_argument: config " + env.Dir + `/storage.yaml: nodes.session_ttl: "11m" is longer than a heartbeat's session may live: want at most 10m0s (line 4)`
	t.Run("a plugin verb fails with exit 128 naming the file, the line and the limit", func(t *testing.T) {
		line := env.Fail(t, "storage", "add-node", obj{"nodename": "n1", "resource": standardNode})
		require.Contains(t, line, want)
		_, err := os.Stat(env.DB)
		require.True(t, os.IsNotExist(err), "no store created")
	})
	for _, args := range [][]string{{"nodes", "list"}, {"nodes", "heartbeat", "n1", "--register"}} {
		t.Run("the operator command "+strings.Join(args, " ")+" fails with exit 2 and the same line", func(t *testing.T) {
			res := env.Op(t, "storage", args...)
			require.Equal(t, 2, res.Code, res.Stderr)
			require.Empty(t, res.Stdout)
			require.Contains(t, res.Stderr, want)
			require.Equal(t, 1, strings.Count(res.Stderr, "\n"), "one line")
		})
	}
}

// TestReallocBelowZeroNamesTheAmounts: a realloc whose deltas would take
// the workload's flat storage or a binding's IO quota below zero is refused
// naming what the workload holds and what the request takes away, and
// writes nothing.
func TestReallocBelowZeroNamesTheAmounts(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	addNode(t, env, "n1", standardNode)
	d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:10G:5:5:5:5"}, "storage": "1G"})
	for _, c := range []struct {
		name    string
		request obj
		want    string
	}{
		{"taking more flat storage than the workload holds", obj{"storage": "-2G"},
			"node n1: invalid_argument: storage request would go below zero: the workload holds 1 GiB (1073741824 bytes) besides its volumes, the request takes 2 GiB (2147483648 bytes)"},
		{"taking more IO quota than the binding holds", obj{"volumes": []string{"AUTO:/d:rw:0:-6:0:0:0"}},
			"node n1: invalid_argument: volume AUTO:/d read_IOPS would go below zero: 5 - 6"},
	} {
		t.Run(c.name+" is refused naming both amounts", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": d.WorkloadsResource[0], "workload_resource_request": c.request})
			require.Contains(t, line, c.want)
			require.Equal(t, before, env.Dump(t), "nothing written")
		})
	}
}

// TestAMisspeltDiskKeyIsRefused: a disk written as an object with a key
// that is none of device, mounts, read_IOPS, write_IOPS, read_bps and
// write_bps is refused, naming the disk and the key, and nothing is written:
// read as it was, the key would be dropped and its quota set to 0, wiping
// the quota the disk had. The keys are matched without regard to case.
func TestAMisspeltDiskKeyIsRefused(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	addNode(t, env, "n1", standardNode)
	misspelt := obj{"device": "/dev/vda", "mounts": []string{"/", "/data0"}, "read_IOPS": 1000, "write_IOPS": 1000, "read_bps": gib, "writeBPS": gib}
	stored := obj{"volumes": obj{"/data0": tib, "/data1": tib}, "disks": []obj{misspelt}, "storage": 4 * tib}
	for _, c := range []struct {
		name, verb string
		request    obj
		want       string
	}{
		{"a request replacing a disk", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"disks": []obj{misspelt}}, "delta": false},
			`invalid_argument: disks: disk /dev/vda: unknown key "writeBPS"`},
		{"a request adding to a disk", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"disks": []obj{misspelt}}, "delta": true, "incr": true},
			`invalid_argument: disks: disk /dev/vda: unknown key "writeBPS"`},
		{"a rollback snapshot of the capacity", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": stored, "delta": false},
			`invalid_argument: resource_request (stored form): disk /dev/vda: unknown key "writeBPS"`},
		{"a stored capacity", "set-node-resource-capacity", obj{"nodename": "n1", "resource": stored, "delta": false},
			`invalid_argument: resource (stored form): disk /dev/vda: unknown key "writeBPS"`},
		{"a restored capacity", "set-node-resource-info", obj{"nodename": "n1", "capacity": stored, "usage": nil},
			`invalid_argument: capacity (stored form): disk /dev/vda: unknown key "writeBPS"`},
	} {
		t.Run(c.name+" with a misspelt disk key is refused and writes nothing", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", c.verb, c.request)
			require.Contains(t, line, "node n1: "+c.want)
			require.Equal(t, before, env.Dump(t), "nothing written")
		})
	}
	t.Run("a disk key in another case is read as the key it matches", func(t *testing.T) {
		var out beforeAfter
		env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"disks": []obj{
			{"device": "/dev/vda", "mounts": []string{"/", "/data0"}, "read_iops": 1, "WRITE_IOPS": 2, "Read_BPS": 3, "write_bps": 4}}}, "delta": false}, &out)
		var after nodeResource
		require.NoError(t, json.Unmarshal(out.After, &after))
		require.Equal(t, []disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 1, WriteIOPS: 2, ReadBPS: 3, WriteBPS: 4}}, after.Disks)
	})
}

package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// registration is `nodes get`'s answer.
type registration struct {
	NodeID              string `json:"node_id"`
	Admission           string `json:"admission"`
	Status              string `json:"status"`
	Drain               bool   `json:"drain"`
	Isolated            bool   `json:"isolated"`
	IsolatedIncarnation int64  `json:"isolated_incarnation"`
	Incarnation         int64  `json:"incarnation"`
	BootID              string `json:"boot_id"`
	Version             int64  `json:"registration_version"`
	Session             struct {
		Live      bool    `json:"live"`
		Ever      bool    `json:"ever"`
		ExpiresAt *string `json:"expires_at"`
	} `json:"session"`
	Observation *struct {
		Version int64 `json:"observation_version"`
		Clock   struct {
			Synchronization  string `json:"synchronization"`
			MaxErrorMs       *int64 `json:"max_error_ms"`
			ExceedsTolerance bool   `json:"exceeds_tolerance"`
		} `json:"clock"`
		HostUsage struct {
			MemoryAvailable *int64 `json:"memory_available_bytes"`
			CPUPressure     *int64 `json:"cpu_pressure_bp"`
			MemoryPressure  *int64 `json:"memory_pressure_bp"`
		} `json:"host_usage"`
		MemoryTight *struct {
			Since string `json:"since"`
		} `json:"memory_tight"`
	} `json:"observation"`
	Released  map[string]json.RawMessage `json:"released"`
	Resources map[string]struct {
		Capacity json.RawMessage `json:"capacity"`
		Usage    json.RawMessage `json:"usage"`
	} `json:"resources"`
}

func nodeGet(t *testing.T, env *testenv.Env, node string) registration {
	t.Helper()
	var r registration
	env.OpOK(t, "storage", &r, "nodes", "get", node)
	return r
}

func nodeOp(t *testing.T, env *testenv.Env, args ...string) registration {
	t.Helper()
	var r registration
	env.OpOK(t, "storage", &r, append([]string{"nodes"}, args...)...)
	return r
}

// opFails runs an operator command that must fail with this exit status
// and write nothing; it returns the error line.
func opFails(t *testing.T, env *testenv.Env, code int, args ...string) string {
	t.Helper()
	before := env.Dump(t)
	res := env.Op(t, "storage", args...)
	require.Equal(t, code, res.Code, "storage %v: %s%s", args, res.Stdout, res.Stderr)
	require.Empty(t, res.Stdout)
	require.Equal(t, 1, strings.Count(res.Stderr, "\n"), "one line: %q", res.Stderr)
	require.Equal(t, before, env.Dump(t), "nothing written")
	return strings.TrimSpace(res.Stderr)
}

// procRoot is a fake /proc for heartbeats.
func procRoot(t *testing.T, bootID string, memAvailableKB int64) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"sys/kernel/random/boot_id": bootID + "\n",
		"meminfo":                   "MemTotal:       16000000 kB\nMemAvailable:   " + strconv.FormatInt(memAvailableKB, 10) + " kB\n",
		"pressure/cpu":              "some avg10=1.00 avg60=0.40 avg300=0.10 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"pressure/memory":           "some avg10=0.00 avg60=12.34 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

// heartbeat sends a heartbeat of a synchronised clock, unless extra gives
// the clock flags itself (a flag is given once).
func heartbeat(t *testing.T, env *testenv.Env, node, proc string, extra ...string) registration {
	t.Helper()
	args := []string{"heartbeat", node, "--proc-root", proc}
	for _, flag := range []struct{ name, value string }{{"--clock-sync", "SYNCHRONIZED"}, {"--clock-max-error", "10ms"}} {
		if !slices.Contains(extra, flag.name) {
			args = append(args, flag.name, flag.value)
		}
	}
	return nodeOp(t, env, append(args, extra...)...)
}

// placeable reports whether the capacity query keeps the node.
func placeable(t *testing.T, env *testenv.Env, node string) bool {
	t.Helper()
	_, ok := capacity(t, env, []string{node}, obj{"volumes": []string{"AUTO:/d:rw:1G"}}).Nodes[node]
	return ok
}

var smallReq = obj{"volumes": []string{"AUTO:/d:rw:1G"}}

func TestDrainAndRetire(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		d := deploy(t, env, "n1", 2, smallReq)
		commit(t, env, "n1", d.WorkloadsResource, true)

		t.Run("a READY node cannot be retired", func(t *testing.T) {
			line := opFails(t, env, 4, "nodes", "retire", "n1")
			require.Equal(t, "storage: nodes retire: failed_precondition: node n1 is READY: only a drained node with no usage, or an isolated one, can be retired", line)
		})
		t.Run("draining a node with usage makes it DRAINING and stops placement", func(t *testing.T) {
			r := nodeOp(t, env, "drain", "n1")
			require.Equal(t, "DRAINING", r.Status)
			require.True(t, r.Drain)
			require.Equal(t, int64(2), r.Version)
			require.False(t, placeable(t, env, "n1"))
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": smallReq})
			require.Equal(t, "storage: calculate-deploy: node n1: failed_precondition: node is draining", line)
			line = env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{}})
			require.Contains(t, line, "failed_precondition: node is draining", "a drained node takes no new work of any kind")
		})
		t.Run("a draining node can still shrink workloads but not grow them", func(t *testing.T) {
			env.Call(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": d.WorkloadsResource[0], "workload_resource_request": obj{"volumes": []string{"AUTO:/d:rw:-512M"}}}, nil)
			line := env.Fail(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": d.WorkloadsResource[0], "workload_resource_request": obj{"volumes": []string{"AUTO:/d:rw:1G"}}})
			require.Contains(t, line, "failed_precondition: node is draining")
		})
		t.Run("retiring a draining node that still holds usage is refused", func(t *testing.T) {
			line := opFails(t, env, 4, "nodes", "retire", "n1")
			require.Contains(t, line, "node n1 is DRAINING: it still holds usage")
		})
		t.Run("the node becomes DRAINED by itself once its workloads are removed", func(t *testing.T) {
			commit(t, env, "n1", d.WorkloadsResource, false)
			r := nodeGet(t, env, "n1")
			require.Equal(t, "DRAINED", r.Status)
			require.Equal(t, int64(2), r.Version, "no call was needed to get there")
		})
		t.Run("cancel-drain makes it READY and placeable again", func(t *testing.T) {
			r := nodeOp(t, env, "cancel-drain", "n1")
			require.Equal(t, "READY", r.Status)
			require.True(t, placeable(t, env, "n1"))
			nodeOp(t, env, "drain", "n1")
		})
		t.Run("a DRAINED node is retired, for ever", func(t *testing.T) {
			r := nodeOp(t, env, "retire", "n1")
			require.Equal(t, "RETIRED", r.Status)
			require.Equal(t, "RETIRED", r.Admission)
			again := nodeOp(t, env, "retire", "n1")
			require.Equal(t, r, again, "retiring a retired node answers the tombstone")
			line := opFails(t, env, 4, "nodes", "drain", "n1")
			require.Contains(t, line, "node n1 is RETIRED")
			opFails(t, env, 4, "nodes", "isolate", "n1")
			opFails(t, env, 4, "nodes", "admit", "n1")
			opFails(t, env, 4, "nodes", "heartbeat", "n1", "--proc-root", t.TempDir())
		})
		t.Run("the tombstone outlives the record and the name cannot be added again", func(t *testing.T) {
			env.Call(t, "storage", "remove-node", obj{"nodename": "n1"}, nil)
			require.Equal(t, "RETIRED", nodeGet(t, env, "n1").Status)
			before := env.Dump(t)
			line := env.Fail(t, "storage", "add-node", obj{"nodename": "n1", "resource": standardNode})
			require.Contains(t, line, "node n1: failed_precondition: node is RETIRED")
			require.Equal(t, before, env.Dump(t))
		})
	})
}

func TestIsolation(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		env.Call(t, "compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 8, "memory": "16G"}}, nil)
		d := deploy(t, env, "n1", 3, obj{"volumes": []string{"AUTO:/d:rw:10G"}, "storage": "1G"})
		commit(t, env, "n1", d.WorkloadsResource, true)
		env.Call(t, "compute", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"cpu": 2, "memory": "1G"}, "delta": true, "incr": true}, nil)
		proc := procRoot(t, "boot-1", 8<<20)

		t.Run("isolation is refused while the node's session is live", func(t *testing.T) {
			r := heartbeat(t, env, "n1", proc, "--ttl", "1s")
			require.True(t, r.Session.Live)
			require.Equal(t, int64(1), r.Incarnation)
			require.Equal(t, "boot-1", r.BootID)
			line := opFails(t, env, 4, "nodes", "isolate", "n1")
			require.Contains(t, line, "node n1 is READY: its session is live until")
		})
		t.Run("once the session expires the node is UNAVAILABLE and isolation releases all its usage", func(t *testing.T) {
			require.Eventually(t, func() bool { return nodeGet(t, env, "n1").Status == "UNAVAILABLE" }, 10*time.Second, 200*time.Millisecond)
			require.False(t, placeable(t, env, "n1"))
			var out struct {
				Node                 registration `json:"node"`
				ReleasedVolumes      int64        `json:"released_volumes"`
				ReleasedStorageBytes int64        `json:"released_storage_bytes"`
				ReleasedCPUMillis    int64        `json:"released_cpu_millis"`
				ReleasedMemoryBytes  int64        `json:"released_memory_bytes"`
			}
			env.OpOK(t, "storage", &out, "nodes", "isolate", "n1")
			require.Equal(t, int64(1), out.ReleasedVolumes, "all three workloads sit on /data0")
			require.Equal(t, 33*gib, out.ReleasedStorageBytes)
			require.Equal(t, int64(2000), out.ReleasedCPUMillis)
			require.Equal(t, gib, out.ReleasedMemoryBytes)
			require.True(t, out.Node.Isolated)
			require.Equal(t, int64(1), out.Node.IsolatedIncarnation)
			require.JSONEq(t, `{"volumes": {"/data0": 32212254720}, "storage": 35433480192}`, string(out.Node.Released["storage"]))
			require.JSONEq(t, `{"cpu_millis": 2000, "memory_bytes": 1073741824}`, string(out.Node.Released["compute"]))
			u := info(t, env, "n1")
			require.Equal(t, int64(0), u.Usage.Storage)
			require.Equal(t, map[string]int64{"/data0": 0, "/data1": 0}, u.Usage.Volumes)
		})
		t.Run("isolating an isolated node releases nothing", func(t *testing.T) {
			before := env.Dump(t)
			var out struct {
				ReleasedVolumes      int64 `json:"released_volumes"`
				ReleasedStorageBytes int64 `json:"released_storage_bytes"`
			}
			env.OpOK(t, "storage", &out, "nodes", "isolate", "n1")
			require.Zero(t, out.ReleasedVolumes)
			require.Zero(t, out.ReleasedStorageBytes)
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("adding usage on an isolated node is refused", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"storage": "1G"}, "delta": true, "incr": true})
			require.Contains(t, line, "node n1: failed_precondition: node is isolated: the write would add 1073741824 to storage")
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("fix on an isolated node reports and writes nothing", func(t *testing.T) {
			before := env.Dump(t)
			var got nodeInfo
			env.Call(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": []json.RawMessage{}}, &got)
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("core removing the dead host's workloads is absorbed by the ledger", func(t *testing.T) {
			version := nodeGet(t, env, "n1").Version
			commit(t, env, "n1", d.WorkloadsResource[:2], false)
			r := nodeGet(t, env, "n1")
			require.Equal(t, version+1, r.Version, "the ledger changed: the registration has a new version")
			require.JSONEq(t, `{"volumes": {"/data0": 10737418240}, "storage": 11811160064}`, string(r.Released["storage"]))
			u := info(t, env, "n1")
			require.Equal(t, int64(0), u.Usage.Storage, "nothing went negative")
		})
		t.Run("a new boot id is a new incarnation that clears isolation; the ledger stays", func(t *testing.T) {
			r := heartbeat(t, env, "n1", procRoot(t, "boot-2", 8<<20))
			require.False(t, r.Isolated)
			require.Equal(t, int64(2), r.Incarnation)
			require.Equal(t, "READY", r.Status)
			require.Contains(t, r.Released, "storage")
			require.True(t, placeable(t, env, "n1"))
		})
		t.Run("core's verbatim rollback of a usage write is exact and leaves the ledger alone", func(t *testing.T) {
			var ba beforeAfter
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data1:5G"}}, "delta": true, "incr": true}, &ba)
			ledger := nodeGet(t, env, "n1").Released["storage"]
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource": ba.Before, "delta": false}, nil)
			var restored nodeResource
			require.NoError(t, json.Unmarshal(ba.Before, &restored))
			require.Equal(t, restored, info(t, env, "n1").Usage)
			require.JSONEq(t, string(ledger), string(nodeGet(t, env, "n1").Released["storage"]))
		})
		t.Run("work placed after the node came back is not eaten by the old incarnation's cleanup", func(t *testing.T) {
			fresh := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:10G"}, "storage": "1G"})
			commit(t, env, "n1", fresh.WorkloadsResource, true)
			commit(t, env, "n1", d.WorkloadsResource[2:], false) // the last dead workload goes
			r := nodeGet(t, env, "n1")
			require.NotContains(t, r.Released, "storage", "the storage ledger is used up")
			require.Contains(t, r.Released, "compute", "the compute workloads were not removed yet")
			u := info(t, env, "n1", fresh.WorkloadsResource...)
			require.Equal(t, []string{}, u.Diffs, "live usage is exactly the new workload")
			require.Equal(t, 11*gib, u.Usage.Storage)
		})
	})
}

func TestHeartbeatObservations(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		t.Run("a heartbeat reports what the host measures", func(t *testing.T) {
			r := heartbeat(t, env, "n1", procRoot(t, "boot-a", 4<<20))
			require.NotNil(t, r.Observation)
			require.Equal(t, int64(1), r.Observation.Version)
			require.Equal(t, "SYNCHRONIZED", r.Observation.Clock.Synchronization)
			require.Equal(t, int64(10), *r.Observation.Clock.MaxErrorMs)
			require.False(t, r.Observation.Clock.ExceedsTolerance)
			require.Equal(t, int64(4<<30), *r.Observation.HostUsage.MemoryAvailable)
			require.Equal(t, int64(40), *r.Observation.HostUsage.CPUPressure)
			require.Equal(t, int64(1234), *r.Observation.HostUsage.MemoryPressure)
			require.Nil(t, r.Observation.MemoryTight)
			require.Equal(t, int64(2), r.Version, "the first boot id is a new incarnation")
			r = heartbeat(t, env, "n1", procRoot(t, "boot-a", 4<<20))
			require.Equal(t, int64(2), r.Observation.Version)
			require.Equal(t, int64(2), r.Version, "heartbeats do not move the registration version")
		})
		t.Run("a measurement the host cannot read is absent, not zero", func(t *testing.T) {
			r := nodeOp(t, env, "heartbeat", "n1", "--proc-root", t.TempDir(), "--clock-sync", "SYNCHRONIZED")
			require.Nil(t, r.Observation.HostUsage.MemoryAvailable)
			require.Nil(t, r.Observation.HostUsage.CPUPressure)
			require.Equal(t, "boot-a", r.BootID, "no boot id read is no new incarnation")
		})
		t.Run("an unsynchronised clock blocks placement", func(t *testing.T) {
			r := nodeOp(t, env, "heartbeat", "n1", "--proc-root", procRoot(t, "boot-a", 4<<20), "--clock-sync", "UNSYNCHRONIZED")
			require.True(t, r.Observation.Clock.ExceedsTolerance)
			require.False(t, placeable(t, env, "n1"))
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": smallReq})
			require.Contains(t, line, "failed_precondition: node clock exceeds tolerance")
		})
		t.Run("a clock error beyond the tolerance blocks placement", func(t *testing.T) {
			r := heartbeat(t, env, "n1", procRoot(t, "boot-a", 4<<20), "--clock-max-error", "2s")
			require.True(t, r.Observation.Clock.ExceedsTolerance)
			require.False(t, placeable(t, env, "n1"))
		})
		t.Run("a clock error beyond the tolerance by less than a millisecond blocks placement", func(t *testing.T) {
			r := heartbeat(t, env, "n1", procRoot(t, "boot-a", 4<<20), "--clock-max-error", "500.9ms")
			require.True(t, r.Observation.Clock.ExceedsTolerance, "500.9ms > 500ms")
			require.False(t, placeable(t, env, "n1"))
			r = heartbeat(t, env, "n1", procRoot(t, "boot-a", 4<<20), "--clock-max-error", "500ms")
			require.False(t, r.Observation.Clock.ExceedsTolerance, "500ms is within 500ms")
		})
		t.Run("a host short of memory blocks placement", func(t *testing.T) {
			r := heartbeat(t, env, "n1", procRoot(t, "boot-a", 100<<10))
			require.NotNil(t, r.Observation.MemoryTight)
			since := r.Observation.MemoryTight.Since
			require.False(t, placeable(t, env, "n1"))
			line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": smallReq})
			require.Contains(t, line, "failed_precondition: node memory is tight")
			r = heartbeat(t, env, "n1", procRoot(t, "boot-a", 100<<10))
			require.Equal(t, since, r.Observation.MemoryTight.Since, "since is when it began")
		})
		t.Run("a healthy heartbeat makes it placeable again", func(t *testing.T) {
			heartbeat(t, env, "n1", procRoot(t, "boot-a", 4<<20))
			require.True(t, placeable(t, env, "n1"))
		})
	})
}

// A pressure file that does not hold a share of 0 to 100 is a reading the
// heartbeat could not take: absent, never a number made of it.
func TestAPressureThatIsNotAShareIsAbsent(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		for _, c := range []struct{ name, avg60 string }{
			{"a pressure that is not a number is absent", "NaN"},
			{"a pressure written as lower-case nan is absent", "nan"},
			{"a negative pressure is absent", "-1.00"},
			{"a pressure above 100 percent is absent", "100.01"},
			{"an infinite pressure is absent", "+Inf"},
		} {
			t.Run(c.name, func(t *testing.T) {
				proc := procRoot(t, "boot-a", 4<<20)
				for _, f := range []string{"pressure/cpu", "pressure/memory"} {
					require.NoError(t, os.WriteFile(filepath.Join(proc, f), []byte("some avg10=0.00 avg60="+c.avg60+" avg300=0.00 total=0\n"), 0o644))
				}
				r := heartbeat(t, env, "n1", proc)
				require.NotNil(t, r.Observation)
				require.Nil(t, r.Observation.HostUsage.CPUPressure)
				require.Nil(t, r.Observation.HostUsage.MemoryPressure)
				require.Equal(t, int64(4<<30), *r.Observation.HostUsage.MemoryAvailable, "what the host could read is still reported")
			})
		}
	})
}

// The largest clock errors a heartbeat can be told of are beyond the
// tolerance like any other: rounding one up to whole milliseconds must not
// overflow into a negative error that passes the clock check.
func TestTheLargestClockErrorsExceedTheTolerance(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		for _, c := range []struct {
			name, maxError string
			ms             int64
		}{
			{"the largest duration there is blocks placement", "2562047h47m16.854775807s", 9223372036854},
			{"the largest duration of whole milliseconds blocks placement", "2562047h47m16.854s", 9223372036854},
			{"a duration just short of it blocks placement", "2562047h47m16.853000001s", 9223372036854},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := heartbeat(t, env, "n1", procRoot(t, "boot-a", 4<<20), "--clock-max-error", c.maxError)
				require.Equal(t, c.ms, *r.Observation.Clock.MaxErrorMs)
				require.True(t, r.Observation.Clock.ExceedsTolerance)
				require.False(t, placeable(t, env, "n1"))
				line := env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": smallReq})
				require.Contains(t, line, "failed_precondition: node clock exceeds tolerance: SYNCHRONIZED, max error 2562047h47m16.854s > 500ms")
			})
		}
	})
}

// TestStatusPrecedence sets up one node per row of the status table.
func TestStatusPrecedence(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		for _, n := range []string{"ready", "draining", "drained", "isolated", "lost", "revoked", "retired"} {
			addNode(t, env, n, standardNode)
		}
		d := deploy(t, env, "draining", 1, smallReq)
		commit(t, env, "draining", d.WorkloadsResource, true)
		nodeOp(t, env, "drain", "draining")
		nodeOp(t, env, "drain", "drained")
		nodeOp(t, env, "drain", "isolated")
		nodeOp(t, env, "isolate", "isolated")
		nodeOp(t, env, "heartbeat", "lost", "--ttl", "1s", "--proc-root", t.TempDir())
		nodeOp(t, env, "drain", "revoked")
		nodeOp(t, env, "revoke", "revoked")
		nodeOp(t, env, "drain", "retired")
		nodeOp(t, env, "isolate", "retired")
		nodeOp(t, env, "retire", "retired")
		// the lost node's session expires (etcd leases last at least 2s)
		require.Eventually(t, func() bool { return nodeGet(t, env, "lost").Status == "UNAVAILABLE" }, 10*time.Second, 200*time.Millisecond)

		want := map[string]string{
			"ready": "READY", "draining": "DRAINING", "drained": "DRAINED", "isolated": "UNAVAILABLE",
			"lost": "UNAVAILABLE", "revoked": "REVOKED", "retired": "RETIRED",
		}
		for node, status := range want {
			t.Run(node+" reads "+status, func(t *testing.T) {
				require.Equal(t, status, nodeGet(t, env, node).Status)
				require.Equal(t, status == "READY", placeable(t, env, node))
			})
		}
		t.Run("list filters by status and orders by name", func(t *testing.T) {
			var all struct {
				Nodes []registration `json:"nodes"`
			}
			env.OpOK(t, "storage", &all, "nodes", "list")
			var names []string
			for _, r := range all.Nodes {
				names = append(names, r.NodeID)
			}
			require.Equal(t, []string{"drained", "draining", "isolated", "lost", "ready", "retired", "revoked"}, names)
			var unavailable struct {
				Nodes []registration `json:"nodes"`
			}
			env.OpOK(t, "storage", &unavailable, "nodes", "list", "--status", "unavailable")
			require.Len(t, unavailable.Nodes, 2)
		})
	})
}

func TestSyncingNodesWaitForTheirFirstHeartbeat(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		require.Equal(t, "SYNCING", nodeGet(t, env, "n1").Status)
		require.False(t, placeable(t, env, "n1"))
		heartbeat(t, env, "n1", procRoot(t, "boot", 4<<20))
		require.Equal(t, "READY", nodeGet(t, env, "n1").Status)
		require.True(t, placeable(t, env, "n1"))
	}, testenv.WithConfig("nodes:\n  require_session: true"))
}

func TestOperatorCommandConventions(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		t.Run("a replay with the same command id answers the first answer and writes nothing", func(t *testing.T) {
			first := env.OpOK(t, "storage", nil, "nodes", "drain", "n1", "--command-id", "c1")
			nodeOp(t, env, "cancel-drain", "n1")
			before := env.Dump(t)
			res := env.Op(t, "storage", "nodes", "drain", "--command-id", "c1", "n1")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.JSONEq(t, string(first), res.Stdout)
			require.Regexp(t, `^storage: nodes drain: replay of command c1: the answer given at \S+Z, nothing written\n$`, res.Stderr, "stderr says it is a replay")
			require.Equal(t, before, env.Dump(t))
			require.False(t, nodeGet(t, env, "n1").Drain, "the replay did not drain again")
		})
		t.Run("the same command id with other arguments is already_exists", func(t *testing.T) {
			line := opFails(t, env, 6, "nodes", "cancel-drain", "n1", "--command-id", "c1")
			require.Contains(t, line, "already_exists: command id c1 was used for")
		})
		t.Run("a stale --if-version is aborted", func(t *testing.T) {
			v := nodeGet(t, env, "n1").Version
			line := opFails(t, env, 5, "nodes", "drain", "n1", "--if-version", strconv.FormatInt(v-1, 10))
			require.Contains(t, line, "aborted: node n1 registration is at version")
			r := nodeOp(t, env, "drain", "n1", "--if-version", strconv.FormatInt(v, 10))
			require.Equal(t, v+1, r.Version)
		})
		t.Run("the if-version is part of what a command id replays", func(t *testing.T) {
			v := nodeGet(t, env, "n1").Version
			nodeOp(t, env, "cancel-drain", "n1", "--command-id", "c2", "--if-version", strconv.FormatInt(v, 10))
			line := opFails(t, env, 6, "nodes", "cancel-drain", "n1", "--command-id", "c2", "--if-version", "12345")
			require.Contains(t, line, "already_exists")
		})
		t.Run("a revoked node refuses heartbeats until it is admitted again", func(t *testing.T) {
			r := nodeOp(t, env, "revoke", "n1")
			require.Equal(t, "REVOKED", r.Status)
			require.False(t, placeable(t, env, "n1"))
			line := opFails(t, env, 4, "nodes", "heartbeat", "n1", "--proc-root", t.TempDir())
			require.Contains(t, line, "node n1 is REVOKED: its admission is revoked; admit it first")
			r = nodeOp(t, env, "admit", "n1")
			require.Equal(t, "ADMITTED", r.Admission)
			require.Equal(t, "READY", r.Status)
			require.True(t, placeable(t, env, "n1"))
		})
		t.Run("an unknown node is not_found", func(t *testing.T) {
			for _, cmd := range []string{"get", "drain", "cancel-drain", "isolate", "retire", "revoke", "admit"} {
				line := opFails(t, env, 3, "nodes", cmd, "ghost")
				require.Contains(t, line, "not_found: node ghost is not registered")
			}
		})
		t.Run("malformed command lines exit 2", func(t *testing.T) {
			cases := [][]string{
				{"nodes", "drain"},
				{"nodes", "drain", "n1", "n2"},
				{"nodes", "drain", "n1", "--bogus"},
				{"nodes", "drain", "n1", "--if-version", "x"},
				{"nodes", "list", "--status", "SLEEPY"},
				{"nodes", "get", "n1", "-o", "xml"},
				{"nodes", "heartbeat", "n1", "--clock-sync", "MAYBE"},
			}
			for _, args := range cases {
				line := opFails(t, env, 2, args...)
				require.Contains(t, line, "invalid_argument")
			}
		})
		t.Run("a flag is never read wrong: none is given twice, and each value flag has its own value", func(t *testing.T) {
			addNode(t, env, "k1", standardNode)
			cases := []struct {
				args []string
				says string
			}{
				// Read as written, --command-id would take n1 as its
				// value and drain k1.
				{[]string{"nodes", "drain", "n1", "k1", "--command-id"}, "invalid_argument: --command-id needs a value"},
				{[]string{"nodes", "drain", "n1", "--if-version"}, "invalid_argument: --if-version needs a value"},
				{[]string{"nodes", "drain", "n1", "--command-id", "--wait"}, "invalid_argument: --command-id needs a value, not the flag --wait"},
				{[]string{"nodes", "drain", "n1", "--command-id", "a", "--command-id", "b"}, "invalid_argument: --command-id is given twice: give it once"},
				{[]string{"nodes", "drain", "n1", "-o", "json", "--output=yaml"}, "invalid_argument: --output is given twice: give it once"},
				{[]string{"nodes", "drain", "n1", "--wait", "--wait"}, "invalid_argument: --wait is given twice: give it once"},
				// A version is never negative: no record can be at -1.
				{[]string{"nodes", "drain", "n1", "--if-version", "-1"}, "invalid_argument: --if-version -1: a record's version is 0 or more"},
			}
			for _, c := range cases {
				line := opFails(t, env, 2, c.args...)
				require.Equal(t, "storage: nodes drain: "+c.says, line, "%v", c.args)
			}
			line := opFails(t, env, 128, "get-node-resource-info", "--help", "--help")
			require.Equal(t, "storage: get-node-resource-info: invalid_argument: --help is given twice: give it once", line,
				"a plugin verb's flag error names the verb and exits as the verb fails")
			require.False(t, nodeGet(t, env, "k1").Drain, "k1 is not drained")
			r := nodeOp(t, env, "drain", "k1", "--command-id=k1-once")
			require.True(t, r.Drain, "a flag with its value inline still works")
		})
		t.Run("table output is for people", func(t *testing.T) {
			status := nodeGet(t, env, "n1").Status
			res := env.Op(t, "storage", "nodes", "get", "n1", "-o", "table")
			require.Equal(t, 0, res.Code)
			require.Regexp(t, `(?m)^STATUS +`+status+`(,Unschedulable)?$`, res.Stdout)
			res = env.Op(t, "storage", "nodes", "list", "-o", "table")
			require.Equal(t, 0, res.Code)
			require.Contains(t, res.Stdout, "NODE")
		})
	})
	t.Run("operator commands never create the embedded store", func(t *testing.T) {
		env := testenv.NewEmbedded(t)
		res := env.Op(t, "storage", "nodes", "drain", "n1")
		require.Equal(t, 4, res.Code)
		require.Contains(t, res.Stderr, "embedded store "+env.DB)
		_, err := os.Stat(env.DB)
		require.True(t, os.IsNotExist(err))
	})
}

func TestNodesGetPrintsTheRecord(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	addNode(t, env, "n1", standardNode)
	env.Call(t, "compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 4, "memory": "8G"}}, nil)
	raw := env.OpOK(t, "storage", nil, "nodes", "get", "n1")
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{"node_id", "admission", "status", "schedulable", "unschedulable_reasons", "drain", "isolated", "isolated_incarnation", "incarnation",
		"boot_id", "registration_version", "created_at", "updated_at", "session", "released", "resources"}, keys,
		"observation is shown only while the session is live")
	require.JSONEq(t, `{"ever": false}`, string(m["session"]), "live, since and expires_at only while the session is live")
	var resources map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(m["resources"], &resources))
	require.JSONEq(t, `{"capacity": {"cpu_millis": 4000, "memory_bytes": 8589934592, "cpu_ratio": 1000, "memory_ratio": 1000,
		"schedulable_cpu_millis": 4000, "schedulable_memory_bytes": 8589934592, "cpu_ratio_source": "DEFAULT", "memory_ratio_source": "DEFAULT", "overcommit_version": 0}, "usage": {"cpu_millis": 0, "memory_bytes": 0}}`, string(resources["compute"]))
	created, err := time.Parse(time.RFC3339, strings.Trim(string(m["created_at"]), `"`))
	require.NoError(t, err)
	require.Equal(t, time.UTC, created.Location())
}

// TestDrainRacingUsageWrites: operator commands and usage writes on the same
// node from many processes lose nothing.
func TestDrainRacingUsageWrites(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		const writers, each = 4, 10
		var wg sync.WaitGroup
		errs := make(chan string, writers*each+20)
		for range writers {
			wg.Go(func() {
				for range each {
					res := env.Verb(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true})
					if res.Code != 0 {
						errs <- res.Stderr
					}
				}
			})
		}
		wg.Go(func() {
			for i := range 10 {
				cmd := "drain"
				if i%2 == 1 {
					cmd = "cancel-drain"
				}
				if res := env.Op(t, "storage", "nodes", cmd, "n1"); res.Code != 0 {
					errs <- res.Stderr
				}
			}
		})
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("a call failed: %s", e)
		}
		u := info(t, env, "n1")
		require.Equal(t, int64(writers*each)*gib, u.Usage.Volumes["/data0"])
		require.Equal(t, int64(writers*each)*gib, u.Usage.Storage)
		r := nodeGet(t, env, "n1")
		require.Equal(t, int64(11), r.Version, "registered, then ten transitions")
		require.False(t, r.Drain)
	})
}

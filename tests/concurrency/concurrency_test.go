package concurrency_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

const gib int64 = 1 << 30

type obj = map[string]any

type resource struct {
	Volumes map[string]int64 `json:"volumes"`
	Storage int64            `json:"storage"`
}

type storageInfo struct {
	Capacity resource `json:"capacity"`
	Usage    resource `json:"usage"`
	Diffs    []string `json:"diffs"`
}

type computeInfo struct {
	Capacity struct {
		CPUMillis int64 `json:"cpu_millis"`
	} `json:"capacity"`
	Usage struct {
		CPUMillis   int64 `json:"cpu_millis"`
		MemoryBytes int64 `json:"memory_bytes"`
	} `json:"usage"`
}

// write is one kind of call the load mixes, and what it changes when it
// lands.
type write struct {
	bin, verb string
	req       obj
	usage     int64 // storage usage of /data0 (and the storage total) it adds
	capacity  int64 // capacity of /data1 it adds
	cpu       int64 // compute millicores it adds
}

func writes(node string) []write {
	usage := func(incr bool) write {
		w := write{bin: "storage", verb: "set-node-resource-usage", req: obj{"nodename": node, "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": incr}, usage: gib}
		if !incr {
			w.usage = -gib
		}
		return w
	}
	capacity := func(incr bool) write {
		w := write{bin: "storage", verb: "set-node-resource-capacity", req: obj{"nodename": node, "resource_request": obj{"volumes": []string{"/data1:1G"}}, "delta": true, "incr": incr}, capacity: gib}
		if !incr {
			w.capacity = -gib
		}
		return w
	}
	cpu := func(incr bool) write {
		w := write{bin: "compute", verb: "set-node-resource-usage", req: obj{"nodename": node, "resource_request": obj{"cpu": 1}, "delta": true, "incr": incr}, cpu: 1000}
		if !incr {
			w.cpu = -1000
		}
		return w
	}
	return []write{usage(true), usage(false), usage(true), usage(false), capacity(true), capacity(false), cpu(true), cpu(false)}
}

// setup gives the node room: usage and capacity start far enough from zero
// that no interleaving of the load can drive them negative.
func setup(t *testing.T, env *testenv.Env, node string) {
	env.Call(t, "storage", "add-node", obj{"nodename": node, "resource": obj{"volumes": []string{"/data0:10T", "/data1:2T"}, "storage": "0"}}, nil)
	env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": node, "resource_request": obj{"volumes": []string{"/data0:1T"}}, "delta": true, "incr": true}, nil)
	env.Call(t, "compute", "add-node", obj{"nodename": node, "resource": obj{"cpu": 64, "memory": "64G"}}, nil)
	env.Call(t, "compute", "set-node-resource-usage", obj{"nodename": node, "resource_request": obj{"cpu": 1000}, "delta": true, "incr": true}, nil)
}

func read(t *testing.T, env *testenv.Env, node string) (storageInfo, computeInfo) {
	var s storageInfo
	var c computeInfo
	env.Call(t, "storage", "get-node-resource-info", obj{"nodename": node}, &s)
	env.Call(t, "compute", "get-node-resource-info", obj{"nodename": node}, &c)
	return s, c
}

// TestConcurrentWritersLoseNothing: 16 processes make 1000 usage and
// capacity writes to one node; the final record is exactly the initial one
// plus every call that exited 0, and at least 99% of the calls exit 0. The
// calls get a 10 s budget: the suite runs beside others on two CPUs, and
// what it measures is that nothing is lost, not how fast contention clears.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	skipUnderShort(t)
	testenv.BackendsInTurn(t, func(t *testing.T, env *testenv.Env) {
		const processes, total = 16, 1000
		setup(t, env, "n1")
		s0, c0 := read(t, env, "n1")
		kinds := writes("n1")

		var landed, failed atomic.Int64
		var usage, capacity, cpu atomic.Int64
		failures := make(chan string, total)
		var wg sync.WaitGroup
		start := time.Now()
		for p := range processes {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(p), 7))
				for i := p; i < total; i += processes {
					w := kinds[rng.IntN(len(kinds))]
					res := env.Verb(t, w.bin, w.verb, w.req)
					if res.Code != 0 {
						failed.Add(1)
						failures <- res.Stderr
						continue
					}
					landed.Add(1)
					usage.Add(w.usage)
					capacity.Add(w.capacity)
					cpu.Add(w.cpu)
				}
			})
		}
		wg.Wait()
		close(failures)
		took := time.Since(start)
		for f := range failures {
			t.Logf("a call failed: %s", strings.TrimSpace(f))
		}

		s1, c1 := read(t, env, "n1")
		lost := (s0.Usage.Storage + usage.Load()) - s1.Usage.Storage
		t.Logf("%s: %d writes attempted by %d processes in %s, %d landed, %d refused, %d bytes lost",
			env.Kind, total, processes, took.Round(time.Millisecond), landed.Load(), failed.Load(), lost)
		require.GreaterOrEqual(t, landed.Load(), int64(total*99/100), "at least 99%% of the calls land")
		require.Equal(t, s0.Usage.Volumes["/data0"]+usage.Load(), s1.Usage.Volumes["/data0"], "volume usage")
		require.Equal(t, s0.Usage.Storage+usage.Load(), s1.Usage.Storage, "storage usage")
		require.Equal(t, s0.Capacity.Volumes["/data1"]+capacity.Load(), s1.Capacity.Volumes["/data1"], "volume capacity")
		require.Equal(t, s0.Capacity.Storage+capacity.Load(), s1.Capacity.Storage, "storage capacity moves with the volume")
		require.Equal(t, c0.Usage.CPUMillis+cpu.Load(), c1.Usage.CPUMillis, "compute usage")
	}, testenv.WithBudget(10*time.Second))
}

// TestKilledWritersLeaveAValidRecord kills plugin processes with SIGKILL at
// random points of a write load. Each write adds 1 GiB to a volume and to
// the storage total in one record, so a half-applied write would show as
// the two disagreeing.
func TestKilledWritersLeaveAValidRecord(t *testing.T) {
	skipUnderShort(t)
	testenv.BackendsInTurn(t, func(t *testing.T, env *testenv.Env) {
		setup(t, env, "n1")
		s0, _ := read(t, env, "n1")
		req, err := json.Marshal(obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true})
		require.NoError(t, err)

		const processes, each = 8, 25
		var ok, killed atomic.Int64
		var wg sync.WaitGroup
		for p := range processes {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(p), 11))
				for range each {
					cmd := exec.Command(testenv.Bin(t, "storage"), "set-node-resource-usage")
					cmd.Dir = env.Dir
					cmd.Stdin = strings.NewReader(string(req))
					require.NoError(t, cmd.Start())
					kill := rng.IntN(3) == 0
					if kill {
						time.Sleep(time.Duration(rng.IntN(15000)) * time.Microsecond)
						_ = cmd.Process.Signal(syscall.SIGKILL)
					}
					err := cmd.Wait()
					switch {
					case err == nil:
						ok.Add(1)
					case kill:
						killed.Add(1)
					default:
						t.Errorf("a write that was not killed failed: %v", err)
					}
				}
			})
		}
		wg.Wait()

		s1, _ := read(t, env, "n1") // the record still parses and validates
		added := s1.Usage.Storage - s0.Usage.Storage
		require.Equal(t, added, s1.Usage.Volumes["/data0"]-s0.Usage.Volumes["/data0"], "no write is half applied")
		require.Zero(t, added%gib)
		n := added / gib
		t.Logf("%s: %d writes exited 0, %d were killed, %d landed", env.Kind, ok.Load(), killed.Load(), n)
		require.GreaterOrEqual(t, n, ok.Load(), "every write that exited 0 is there")
		require.LessOrEqual(t, n, ok.Load()+killed.Load(), "a killed write lands at most once")

		t.Run("the record still takes writes", func(t *testing.T) {
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true}, nil)
		})
	})
}

// TestAddNodeKilledMidCallWritesBothKeysOrNeither: add-node writes the
// registration and the record in one transaction.
func TestAddNodeKilledMidCallWritesBothKeysOrNeither(t *testing.T) {
	skipUnderShort(t)
	testenv.BackendsInTurn(t, func(t *testing.T, env *testenv.Env) {
		const nodes = 40
		rng := rand.New(rand.NewPCG(3, 5))
		var wg sync.WaitGroup
		for i := range nodes {
			delay := time.Duration(rng.IntN(40000)) * time.Microsecond
			wg.Go(func() {
				req := fmt.Sprintf(`{"nodename":"k%d","resource":{"volumes":["/data0:1T"]}}`, i)
				cmd := exec.Command(testenv.Bin(t, "storage"), "add-node")
				cmd.Dir = env.Dir
				cmd.Stdin = strings.NewReader(req)
				require.NoError(t, cmd.Start())
				time.Sleep(delay)
				_ = cmd.Process.Signal(syscall.SIGKILL)
				_ = cmd.Wait()
			})
		}
		wg.Wait()
		dump := env.Dump(t)
		both := 0
		for i := range nodes {
			_, record := dump[fmt.Sprintf("/resource/storage/k%d", i)]
			_, reg := dump[fmt.Sprintf("/nodes/k%d", i)]
			require.Equal(t, record, reg, "node k%d: record %v, registration %v", i, record, reg)
			if record {
				both++
			}
		}
		t.Logf("%s: %d of %d killed add-node calls had landed whole, the others not at all", env.Kind, both, nodes)
	})
}

// TestFixRacingWritersLosesNothing: fix-node-resource rewrites usage from
// the workloads while capacity writes and operator commands hit the same
// node. The end state's usage is the recomputation from the committed
// workloads and its capacity has every capacity write that landed.
func TestFixRacingWritersLosesNothing(t *testing.T) {
	skipUnderShort(t)
	testenv.BackendsInTurn(t, func(t *testing.T, env *testenv.Env) {
		env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": []string{"/data0:10T", "/data1:2T"}}}, nil)
		var dep struct {
			Workloads []json.RawMessage `json:"workloads_resource"`
		}
		env.Call(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 5, "workload_resource_request": obj{"volumes": []string{"AUTO:/d:rw:100G"}}}, &dep)
		env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": dep.Workloads, "delta": true, "incr": true}, nil)
		// Usage drifts from the workloads: fix must bring it back.
		env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data1:7G"}}, "delta": true, "incr": true}, nil)
		s0, _ := read(t, env, "n1")

		var capacity atomic.Int64
		var fixes, aborted atomic.Int64
		var wg sync.WaitGroup
		for p := range 6 {
			wg.Go(func() {
				for i := range 15 {
					incr := (p+i)%3 != 0
					res := env.Verb(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data1:1G"}}, "delta": true, "incr": incr})
					if res.Code == 0 {
						if incr {
							capacity.Add(gib)
						} else {
							capacity.Add(-gib)
						}
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
				env.Op(t, "storage", "nodes", cmd, "n1")
			}
		})
		for range 2 {
			wg.Go(func() {
				for range 10 {
					res := env.Verb(t, "storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": dep.Workloads})
					switch {
					case res.Code == 0:
						fixes.Add(1)
					case strings.Contains(res.Stderr, "aborted"):
						aborted.Add(1)
					default:
						t.Errorf("fix failed: %s", res.Stderr)
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%s: %d fixes landed, %d aborted, capacity moved by %d", env.Kind, fixes.Load(), aborted.Load(), capacity.Load())
		require.Positive(t, fixes.Load())

		var got storageInfo
		env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": dep.Workloads}, &got)
		require.Equal(t, []string{}, got.Diffs, "usage is the workloads' sum")
		require.Equal(t, 500*gib, got.Usage.Storage)
		require.Equal(t, s0.Capacity.Volumes["/data1"]+capacity.Load(), got.Capacity.Volumes["/data1"], "no capacity write was lost to a fix")
	})
}

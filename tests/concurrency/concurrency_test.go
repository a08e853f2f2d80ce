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

// kind is one kind of write the load mixes: which dimension of the node it
// moves and in which direction.
type kind struct {
	bin, verb string
	dim       string // "usage" (/data0 and the storage total), "capacity" (/data1 and the capacity total), "cpu"
	sign      int64
}

func kinds() []kind {
	return []kind{
		{"storage", "set-node-resource-usage", "usage", 1}, {"storage", "set-node-resource-usage", "usage", -1},
		{"storage", "set-node-resource-usage", "usage", 1}, {"storage", "set-node-resource-usage", "usage", -1},
		{"storage", "set-node-resource-capacity", "capacity", 1}, {"storage", "set-node-resource-capacity", "capacity", -1},
		{"compute", "set-node-resource-usage", "cpu", 1}, {"compute", "set-node-resource-usage", "cpu", -1},
	}
}

// call is the write of kind k to node with tag tag (from 1 to 999): 1 GiB
// and tag bytes of a volume, or 1 core and tag millicores.
func (k kind) call(node string, tag int64) (req obj, m move) {
	m = move{sign: k.sign, unit: gib, tag: tag}
	var rr obj
	switch k.dim {
	case "usage":
		rr = obj{"volumes": []string{fmt.Sprintf("/data0:%d", gib+tag)}}
	case "capacity":
		rr = obj{"volumes": []string{fmt.Sprintf("/data1:%d", gib+tag)}}
	case "cpu":
		m.unit = 1000
		rr = obj{"cpu": float64(1000+tag) / 1000}
	}
	return obj{"nodename": node, "resource_request": rr, "delta": true, "incr": k.sign > 0}, m
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
// plus every call that exited 0, and at least 99% of the calls exit 0 or
// die with the daemon. Each storage write (usage or capacity, up or down by
// 1 GiB) moves a volume of its own on the one record, so every such write
// is checked by itself: exactly once if it exited 0, at most once if its
// outcome is unknown (ERU_TEST_SERVE=kill: the daemon died holding it),
// never if it was refused; a sum over the calls whose outcome is unknown
// could hide a lost or doubled write among them. The compute writes (one
// number, cpu) are checked by the ledger: the landed ones plus a subset of
// the unknown ones. Under ERU_TEST_SERVE=kill some calls must die with the
// daemon: the load must have gone through it. The calls get a 10 s budget:
// the suite runs beside others on two CPUs, and what it measures is that
// nothing is lost, not how fast contention clears.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	skipUnderShort(t)
	testenv.BackendsInTurn(t, func(t *testing.T, env *testenv.Env) {
		const processes, total = 16, 1000
		table := kinds()
		// Each process draws its writes' kinds from its own seed: drawn
		// here first, so that the node holds a volume for each storage
		// write.
		plan := make([]kind, total)
		for p := range processes {
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			for i := p; i < total; i += processes {
				plan[i] = table[rng.IntN(len(table))]
			}
		}
		volume := func(i int) string { return fmt.Sprintf("/w%d", i) }
		var volumes, used []string
		for i, k := range plan {
			if k.bin == "storage" {
				volumes = append(volumes, volume(i)+":10G")
				if k.dim == "usage" {
					used = append(used, volume(i)+":2G") // room for a decrease
				}
			}
		}
		env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": volumes, "storage": "0"}}, nil)
		env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": used}, "delta": true, "incr": true}, nil)
		env.Call(t, "compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 64, "memory": "64G"}}, nil)
		env.Call(t, "compute", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"cpu": 1000}, "delta": true, "incr": true}, nil)
		s0, c0 := read(t, env, "n1")

		l := newLedger()
		told := make([]testenv.Result, total)
		var wg sync.WaitGroup
		start := time.Now()
		chaos := env.Chaos(t)
		for p := range processes {
			wg.Go(func() {
				for i := p; i < total; i += processes {
					k := plan[i]
					req, m := k.call("n1", int64(i%999+1))
					if k.bin == "storage" {
						req["resource_request"] = obj{"volumes": []string{volume(i) + ":1G"}}
						m.tag = 0
					}
					told[i] = env.Verb(t, k.bin, k.verb, req)
					l.record(told[i], k.dim, m)
				}
			})
		}
		wg.Wait()
		kills := chaos()
		took := time.Since(start)
		for _, f := range l.refusals {
			t.Logf("a call failed: %s", f)
		}

		s1, c1 := read(t, env, "n1")
		t.Logf("%s: %d writes attempted by %d processes in %s (%d daemon kills), %d landed, %d outcome unknown, %d refused",
			env.Kind, total, processes, took.Round(time.Millisecond), kills, l.counts[0], l.counts[1], l.counts[2])
		require.GreaterOrEqual(t, l.counts[0]+l.counts[1], total*99/100, "at least 99%% of the calls land or die with the daemon")
		if testenv.Killing() {
			require.Positive(t, kills, "the daemon died during the load")
			// With 16 writers busy, every kill catches calls the daemon
			// holds (tens in a run): none would mean the load never went
			// through the daemon, and the kill mode proved nothing.
			require.Positive(t, l.counts[1], "some calls died with the daemon")
		} else {
			require.Zero(t, l.counts[1], "no outcome is unknown while the daemon lives")
		}
		t.Run("each storage write moved its own volume once if it exited 0, at most once if its outcome is unknown, never if refused", func(t *testing.T) {
			landedUnknown := 0
			for i, k := range plan {
				if k.bin != "storage" {
					continue
				}
				before, after := s0.Usage.Volumes[volume(i)], s1.Usage.Volumes[volume(i)]
				if k.dim == "capacity" {
					before, after = s0.Capacity.Volumes[volume(i)], s1.Capacity.Volumes[volume(i)]
				}
				moved, once := after-before, k.sign*gib
				switch res := told[i]; {
				case res.Code == 0:
					require.Equal(t, once, moved, "%s %s of %s exited 0: it landed exactly once", k.verb, k.dim, volume(i))
				case testenv.OutcomeUnknown(res):
					require.Contains(t, []int64{0, once}, moved, "%s %s of %s died with the daemon: it landed at most once", k.verb, k.dim, volume(i))
					if moved != 0 {
						landedUnknown++
					}
				default:
					require.Zero(t, moved, "%s %s of %s was refused (%s): it did not land", k.verb, k.dim, volume(i), strings.TrimSpace(res.Stderr))
				}
			}
			t.Logf("%s: %d storage writes whose outcome was unknown had landed", env.Kind, landedUnknown)
		})
		t.Run("the storage totals move with the volumes", func(t *testing.T) {
			sum := func(m map[string]int64) (n int64) {
				for _, v := range m {
					n += v
				}
				return n
			}
			require.Equal(t, sum(s1.Usage.Volumes)-sum(s0.Usage.Volumes), s1.Usage.Storage-s0.Usage.Storage, "storage usage")
			require.Equal(t, sum(s1.Capacity.Volumes)-sum(s0.Capacity.Volumes), s1.Capacity.Storage-s0.Capacity.Storage, "storage capacity")
		})
		t.Run("the compute usage is the landed writes and some of the unknown ones, each once", func(t *testing.T) {
			l.requireExact(t, "cpu", c0.Usage.CPUMillis, c1.Usage.CPUMillis, "compute usage")
		})
	}, testenv.WithBudget(10*time.Second))
}

// TestKilledWritersLeaveAValidRecord kills plugin processes with SIGKILL at
// random points of a write load. Each write adds 1 GiB to a volume of its
// own and to the storage total in one record, so a half-applied write
// would show as the two disagreeing, and each volume tells how many times
// its write landed: once for a write that exited 0, at most once for one
// that was killed (or died with the daemon), never for the others.
func TestKilledWritersLeaveAValidRecord(t *testing.T) {
	skipUnderShort(t)
	testenv.BackendsInTurn(t, func(t *testing.T, env *testenv.Env) {
		const processes, each = 8, 25
		volume := func(p, i int) string { return fmt.Sprintf("/w%d", p*each+i) }
		var volumes []string
		for p := range processes {
			for i := range each {
				volumes = append(volumes, volume(p, i)+":10G")
			}
		}
		env.Call(t, "storage", "add-node", obj{"nodename": "n1", "resource": obj{"volumes": volumes, "storage": "0"}}, nil)
		s0, _ := read(t, env, "n1")

		var ok, killed, unknown atomic.Int64
		var mu sync.Mutex
		told := map[string]string{} // volume -> "ok", "killed", "unknown" or "failed"
		var wg sync.WaitGroup
		chaos := env.Chaos(t)
		for p := range processes {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(p), 11))
				for i := range each {
					vol := volume(p, i)
					req, err := json.Marshal(obj{"nodename": "n1", "resource_request": obj{"volumes": []string{vol + ":1G"}}, "delta": true, "incr": true})
					require.NoError(t, err)
					cmd := exec.Command(testenv.Bin(t, "storage"), "set-node-resource-usage")
					cmd.Dir = env.Dir
					cmd.Stdin = strings.NewReader(string(req))
					var stderr strings.Builder
					cmd.Stderr = &stderr
					require.NoError(t, cmd.Start())
					kill := rng.IntN(3) == 0
					if kill {
						time.Sleep(time.Duration(rng.IntN(15000)) * time.Microsecond)
						_ = cmd.Process.Signal(syscall.SIGKILL)
					}
					err = cmd.Wait()
					outcome := "failed"
					switch {
					case err == nil:
						ok.Add(1)
						outcome = "ok"
					case kill:
						killed.Add(1)
						outcome = "killed"
					case testenv.OutcomeUnknown(testenv.Result{Code: cmd.ProcessState.ExitCode(), Stderr: stderr.String()}):
						unknown.Add(1) // the serve daemon died holding it (ERU_TEST_SERVE=kill)
						outcome = "unknown"
					default:
						t.Errorf("a write that was not killed failed: %v: %s", err, stderr.String())
					}
					mu.Lock()
					told[vol] = outcome
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		chaos()

		s1, _ := read(t, env, "n1") // the record still parses and validates
		added := s1.Usage.Storage - s0.Usage.Storage
		var sum int64
		for _, u := range s1.Usage.Volumes {
			sum += u
		}
		require.Equal(t, added, sum, "no write is half applied")
		landedKilled := 0
		for vol, outcome := range told {
			n := s1.Usage.Volumes[vol]
			switch outcome {
			case "ok":
				require.Equal(t, gib, n, "%s: a write that exited 0 landed once", vol)
			case "killed", "unknown":
				require.Contains(t, []int64{0, gib}, n, "%s: a write whose process died landed at most once", vol)
				if n == gib {
					landedKilled++
				}
			default:
				require.Zero(t, n, "%s: a write that failed did not land", vol)
			}
		}
		t.Logf("%s: %d writes exited 0, %d were killed, %d died with the daemon, %d landed (%d of those whose process died)",
			env.Kind, ok.Load(), killed.Load(), unknown.Load(), added/gib, landedKilled)

		t.Run("the record still takes writes", func(t *testing.T) {
			env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{volume(0, 0) + ":1G"}}, "delta": true, "incr": true}, nil)
		})
	}, testenv.WithBudget(10*time.Second))
}

// TestAddNodeKilledMidCallWritesBothKeysOrNeither: add-node writes the
// registration and the record in one transaction, so a process killed at
// any moment leaves both keys or neither. The kills must fall on both
// sides of the write for that to be tested: a fixed delay is all before it
// on a busy machine and all after it on an idle one. So the kills come in
// rounds, spread over a span that starts at the time of one whole add-node
// and grows after a round where less than a quarter landed (shrinks after
// one where more than three quarters did), at least four rounds and until
// both outcomes have been seen.
func TestAddNodeKilledMidCallWritesBothKeysOrNeither(t *testing.T) {
	skipUnderShort(t)
	testenv.BackendsInTurn(t, func(t *testing.T, env *testenv.Env) {
		const perRound, parallel, least, most = 30, 4, 4, 10
		bin := testenv.Bin(t, "storage")
		start := func(name string) (*exec.Cmd, error) {
			cmd := exec.Command(bin, "add-node")
			cmd.Dir = env.Dir
			cmd.Stdin = strings.NewReader(fmt.Sprintf(`{"nodename":%q,"resource":{"volumes":["/data0:1T"]}}`, name))
			return cmd, cmd.Start()
		}
		began := time.Now()
		first, err := start("c0")
		require.NoError(t, err)
		require.NoError(t, first.Wait())
		span := time.Since(began)

		rng := rand.New(rand.NewPCG(3, 5))
		chaos := env.Chaos(t)
		landed, lost := 0, 0
		for round := 0; round < most && (round < least || landed == 0 || lost == 0); round++ {
			slots := make(chan struct{}, parallel)
			errs := make(chan error, perRound)
			var wg sync.WaitGroup
			for i := range perRound {
				delay := time.Duration(rng.Int64N(int64(span)))
				wg.Go(func() {
					slots <- struct{}{}
					defer func() { <-slots }()
					cmd, err := start(fmt.Sprintf("k%d-%d", round, i))
					if err != nil {
						errs <- err
						return
					}
					time.Sleep(delay)
					_ = cmd.Process.Signal(syscall.SIGKILL)
					_ = cmd.Wait()
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			dump := env.Dump(t)
			here := 0
			for i := range perRound {
				name := fmt.Sprintf("k%d-%d", round, i)
				_, record := dump["/resource/storage/"+name]
				_, reg := dump["/nodes/"+name]
				require.Equal(t, record, reg, "node %s: record %v, registration %v", name, record, reg)
				if record {
					here++
				}
			}
			t.Logf("%s: round %d, kills within %s: %d of %d add-node calls had landed whole, the others not at all", env.Kind, round, span.Round(time.Millisecond), here, perRound)
			landed, lost = landed+here, lost+perRound-here
			switch { // aim the next round at about half landed
			case here*4 < perRound:
				span = span * 3 / 2
			case here*4 > 3*perRound:
				span = span * 2 / 3
			}
		}
		chaos()
		require.Positive(t, landed, "no kill came after the write")
		require.Positive(t, lost, "no kill came before the write")
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

		l := newLedger()
		var fixes, aborted atomic.Int64
		var wg sync.WaitGroup
		chaos := env.Chaos(t)
		for p := range 6 {
			wg.Go(func() {
				for i := range 15 {
					k := kind{"storage", "set-node-resource-capacity", "capacity", 1}
					if (p+i)%3 == 0 {
						k.sign = -1
					}
					req, m := k.call("n1", int64(p*15+i+1))
					l.record(env.Verb(t, k.bin, k.verb, req), k.dim, m)
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
					case strings.Contains(res.Stderr, "aborted"), testenv.OutcomeUnknown(res):
						aborted.Add(1) // a fix recomputes usage from the workloads: landing or not, it cannot skew it
					default:
						t.Errorf("fix failed: %s", res.Stderr)
					}
				}
			})
		}
		wg.Wait()
		chaos()
		t.Logf("%s: %d fixes landed, %d aborted or died with the daemon; capacity writes: %d landed, %d outcome unknown, %d refused", env.Kind, fixes.Load(), aborted.Load(), l.counts[0], l.counts[1], l.counts[2])
		require.Positive(t, fixes.Load())

		var got storageInfo
		env.Call(t, "storage", "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": dep.Workloads}, &got)
		require.Equal(t, []string{}, got.Diffs, "usage is the workloads' sum")
		require.Equal(t, 500*gib, got.Usage.Storage)
		l.requireExact(t, "capacity", s0.Capacity.Volumes["/data1"], got.Capacity.Volumes["/data1"], "no capacity write was lost to a fix")
	})
}

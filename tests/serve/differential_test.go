package serve_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// The variables that replay or lengthen TestRandomCallsThroughTheDaemonAnswerAsTheBinary.
const (
	envDiffSeed  = "ERU_TEST_DIFF_SEED"  // the seed to replay (printed by every run)
	envDiffSteps = "ERU_TEST_DIFF_STEPS" // steps per store (default 120 under -short, 400 otherwise)
)

// poolObject is a pool object's name, random in every plan: two plans of
// the same request on the same state differ in it alone.
var poolObject = regexp.MustCompile(`\bv-[0-9a-f]{16}\b`)

// unnamed is an answer with its pool objects' names left out.
func unnamed(s string) string { return poolObject.ReplaceAllString(s, "v-*") }

// diffCall is one call of a random sequence: a core verb (JSON on stdin)
// or an operator command (args only).
type diffCall struct {
	bin   string
	args  []string
	stdin string
	write bool // changes the store: its answer is compared with the mirror's
	op    bool // an operator command: its output holds times, only its status is compared
}

func (c diffCall) String() string {
	return fmt.Sprintf("%s %s %s", c.bin, strings.Join(c.args, " "), c.stdin)
}

// diffModel is what the generator knows of the store, to make calls that
// mostly succeed: which nodes each plugin holds and the workloads placed.
type diffModel struct {
	rng      *rand.Rand
	held     map[string]map[string]bool              // plugin -> node -> recorded
	placed   map[string]map[string][]json.RawMessage // plugin -> node -> workloads
	pending  []diffCall                              // calls to make next, in order
	lastRead *diffCall                               // the last read, asked again after a write
	names    []string
	requests map[string][]string
}

func newDiffModel(seed uint64) *diffModel {
	return &diffModel{
		rng:    rand.New(rand.NewPCG(seed, 0x5eed)),
		held:   map[string]map[string]bool{"storage": {}, "compute": {}},
		placed: map[string]map[string][]json.RawMessage{"storage": {}, "compute": {}},
		names:  []string{"n1", "n2", "n3", "n4", "n5"},
		// Few distinct requests, so that the same one is asked again and
		// the daemon's remembered answers are what it answers.
		requests: map[string][]string{
			"storage": {
				`{"volumes":["AUTO:/data:rw:10G"],"storage":"1G"}`,
				`{"volumes":["AUTO:/data:rw:300G"]}`,
				`{"storage":"100G"}`,
				`{"volumes":["POOL@ceph-a:/data:rw:100G"]}`,
				`{}`,
			},
			"compute": {
				`{"cpu":1,"memory":"1G"}`,
				`{"cpu":0.5,"memory":"512M"}`,
				`{"cpu":4,"memory":"6G"}`,
				`{"memory":"2G"}`,
			},
		},
	}
}

func (m *diffModel) pick(xs []string) string { return xs[m.rng.IntN(len(xs))] }

func (m *diffModel) plugin() string {
	if m.rng.IntN(2) == 0 {
		return "storage"
	}
	return "compute"
}

// node is mostly a node the plugin holds, sometimes any name.
func (m *diffModel) node(p string) string {
	var held []string
	for _, n := range m.names {
		if m.held[p][n] {
			held = append(held, n)
		}
	}
	if len(held) > 0 && m.rng.IntN(5) > 0 {
		return m.pick(held)
	}
	return m.pick(m.names)
}

func (m *diffModel) some() []string {
	out := []string{}
	for _, n := range m.names {
		if m.rng.IntN(3) > 0 {
			out = append(out, n)
		}
	}
	if m.rng.IntN(6) == 0 {
		out = append(out, "absent")
	}
	return out
}

func js(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// addNode is a node's resource as add-node takes it.
func (m *diffModel) addNode(p string) string {
	if p == "compute" {
		return m.pick([]string{`{"cpu":8,"memory":"16G"}`, `{"cpu":2,"memory":"4G"}`, `{"cpu":32,"memory":"64G"}`})
	}
	return m.pick([]string{
		`{"volumes":["/data0:1T","/data1:500G"],"storage":"2T"}`,
		`{"volumes":["/data0:200G"],"storage":"200G"}`,
		`{"storage":"1T","pools":["ceph-a:/mnt/ceph-a"]}`,
		`{"volumes":["/data0:1T"],"storage":"1T","pools":["ceph-a:/mnt/ceph-a"]}`,
	})
}

// amount is a request for a change of capacity or usage.
func (m *diffModel) amount(p string) string {
	if p == "compute" {
		return m.pick([]string{`{"cpu":1}`, `{"memory":"1G"}`, `{"cpu":2,"memory":"2G"}`, `{"cpu":0.5}`})
	}
	return m.pick([]string{`{"storage":"10G"}`, `{"volumes":["/data0:50G"]}`, `{"volumes":["/data1:100G"],"storage":"100G"}`, `{"volumes":["/data0:10G"],"storage":"1G"}`})
}

// absolute is a whole capacity or usage, as delta:false sets it.
func (m *diffModel) absolute(p string, capacity bool) string {
	if p == "compute" {
		if capacity {
			return m.pick([]string{`{"cpu_millis":16000,"memory_bytes":34359738368}`, `{"cpu_millis":1000,"memory_bytes":1073741824}`})
		}
		return m.pick([]string{`{"cpu_millis":0,"memory_bytes":0}`, `{"cpu_millis":3000,"memory_bytes":3221225472}`})
	}
	if capacity {
		return m.pick([]string{`{"volumes":{"/data0":1099511627776},"disks":[],"storage":1099511627776}`, `{"volumes":{"/data0":107374182400,"/data1":107374182400},"disks":[],"storage":322122547200}`})
	}
	return m.pick([]string{`{"volumes":{"/data0":0},"disks":[],"storage":0}`, `{"volumes":{"/data0":21474836480},"disks":[],"storage":21474836480}`})
}

// next is the next call of the sequence.
func (m *diffModel) next() diffCall {
	if len(m.pending) > 0 {
		c := m.pending[0]
		m.pending = m.pending[1:]
		return c
	}
	c := m.fresh()
	switch {
	case !c.write:
		m.lastRead = &c
	case m.lastRead != nil && m.rng.IntN(2) == 0:
		// The same read again right after a write: what the daemon
		// remembered of it must not outlive what the write changed.
		m.pending = append(m.pending, *m.lastRead)
	}
	return c
}

// fresh is a new random call.
func (m *diffModel) fresh() diffCall {
	p := m.plugin()
	verb := func(v string, req any, write bool) diffCall {
		return diffCall{bin: p, args: []string{v}, stdin: js(req), write: write}
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	switch r := m.rng.IntN(100); {
	case r < 4:
		// Requests core would not send: each verb refuses them alike.
		v := m.pick([]string{"get-nodes-deploy-capacity", "calculate-deploy", "calculate-realloc", "get-most-idle-node", "get-metrics", "set-node-resource-usage", "set-node-resource-capacity", "add-node", "remove-node"})
		write := strings.HasPrefix(v, "set-") || strings.HasSuffix(v, "-node") && v != "get-most-idle-node"
		in := m.pick([]string{
			``, `not json`, `[]`, `{}`, `{"nodename":"bad/name"}`, `{"nodename":"n1"} {"nodename":"n2"}`,
			`{"nodenames":[],"workload_resource":{}}`, `{"nodenames":["n1","n1","n2"],"workload_resource":` + m.pick(m.requests[p]) + `}`,
			`{"nodenames":"n1"}`, `{"nodename":"n1","deploy_count":0,"workload_resource_request":` + m.pick(m.requests[p]) + `}`,
			`{"nodename":"n1","deploy_count":100000,"workload_resource_request":` + m.pick(m.requests[p]) + `}`,
			`{"nodename":"n1","deploy_count":-1,"workload_resource_request":{}}`,
			`{"nodename":"n1","workload_resource_request":{"cpu":"lots","volumes":"x"}}`,
			`{"nodename":"n1","resource_request":{"cpu":1,"storage":"1G"},"delta":true,"incr":true,"unknown":1}`,
			`{"nodes":[{"podname":"p","nodename":"n1"},{"podname":"q","nodename":"n1"},{"nodename":"absent"}]}`,
		})
		return diffCall{bin: p, args: []string{v}, stdin: in, write: write}
	case r < 8:
		return verb("add-node", map[string]any{"nodename": m.pick(m.names), "resource": raw(m.addNode(p))}, true)
	case r < 14:
		return verb("set-node-resource-capacity", map[string]any{"nodename": m.node(p), "resource_request": raw(m.amount(p)), "delta": true, "incr": m.rng.IntN(3) > 0}, true)
	case r < 16:
		return verb("set-node-resource-capacity", map[string]any{"nodename": m.node(p), "resource": raw(m.absolute(p, true)), "delta": false}, true)
	case r < 21:
		return verb("set-node-resource-usage", map[string]any{"nodename": m.node(p), "resource_request": raw(m.amount(p)), "delta": true, "incr": m.rng.IntN(3) > 0}, true)
	case r < 23:
		return verb("set-node-resource-usage", map[string]any{"nodename": m.node(p), "resource": raw(m.absolute(p, false)), "delta": false}, true)
	case r < 26:
		n := m.node(p)
		ws := m.placed[p][n]
		if len(ws) == 0 {
			return verb("set-node-resource-usage", map[string]any{"nodename": n, "resource_request": raw(m.amount(p)), "delta": true, "incr": false}, true)
		}
		i := m.rng.IntN(len(ws))
		w := ws[i]
		m.placed[p][n] = append(ws[:i:i], ws[i+1:]...)
		return verb("set-node-resource-usage", map[string]any{"nodename": n, "workloads_resource": []json.RawMessage{w}, "delta": true, "incr": false}, true)
	case r < 28:
		if p == "compute" {
			return verb("set-node-resource-info", map[string]any{"nodename": m.node(p),
				"capacity": raw(`{"cpu_millis":4000,"memory_bytes":8589934592}`), "usage": raw(`{"cpu_millis":1000,"memory_bytes":1073741824}`)}, true)
		}
		return verb("set-node-resource-info", map[string]any{"nodename": m.node(p),
			"capacity": raw(`{"volumes":{"/data0":536870912000},"disks":[],"storage":536870912000}`), "usage": raw(`{"volumes":{"/data0":10737418240},"disks":[],"storage":0}`)}, true)
	case r < 30:
		return verb("remove-node", map[string]any{"nodename": m.node(p)}, true)
	case r < 50:
		return verb("get-nodes-deploy-capacity", map[string]any{"nodenames": m.some(), "workload_resource": raw(m.pick(m.requests[p]))}, false)
	case r < 62:
		return verb("calculate-deploy", map[string]any{"nodename": m.node(p), "deploy_count": 1 + m.rng.IntN(3), "workload_resource_request": raw(m.pick(m.requests[p]))}, false)
	case r < 67:
		n := m.node(p)
		w := raw(`{}`)
		if ws := m.placed[p][n]; len(ws) > 0 {
			w = ws[m.rng.IntN(len(ws))]
		}
		return verb("calculate-realloc", map[string]any{"nodename": n, "workload_resource": w, "workload_resource_request": raw(m.amount(p))}, false)
	case r < 73:
		return verb("get-most-idle-node", map[string]any{"nodenames": m.some()}, false)
	case r < 80:
		if m.rng.IntN(2) == 0 {
			return verb("get-metrics", map[string]any{"podname": "p", "nodename": m.node(p)}, false)
		}
		var refs []map[string]string
		for _, n := range m.some() {
			refs = append(refs, map[string]string{"podname": "p", "nodename": n})
		}
		return verb("get-metrics", map[string]any{"nodes": refs}, false)
	case r < 82:
		return verb("get-node-resource-info", map[string]any{"nodename": m.node(p)}, false)
	case r < 86:
		return diffCall{bin: "storage", args: []string{"nodes", m.pick([]string{"drain", "cancel-drain", "cancel-drain", "revoke", "admit", "admit"}), m.node(p)}, write: true, op: true}
	case r < 87 && m.rng.IntN(4) == 0: // rare: an isolated node takes no work again
		return diffCall{bin: "storage", args: []string{"nodes", "isolate", m.node(p)}, write: true, op: true}
	case r < 87:
		return verb("get-nodes-deploy-capacity", map[string]any{"nodenames": m.names, "workload_resource": raw(m.requests[p][0])}, false)
	case r < 93:
		args := []string{"overcommit", "set-node", m.node("compute")}
		if m.rng.IntN(3) > 0 {
			args = append(args, "--cpu", strconv.Itoa(500+500*m.rng.IntN(6)))
		}
		if m.rng.IntN(2) > 0 {
			args = append(args, "--memory", strconv.Itoa(1000+250*m.rng.IntN(4)))
		}
		return diffCall{bin: "compute", args: args, write: true, op: true}
	default:
		return diffCall{bin: "compute", args: []string{"overcommit", "set-defaults", "--cpu", strconv.Itoa(1000 + 500*m.rng.IntN(4)), "--memory", strconv.Itoa(1000 + 250*m.rng.IntN(3))}, write: true, op: true}
	}
}

// learn updates the model with a call's answer: the nodes each plugin
// holds, and (sometimes) a plan's workloads placed as core would.
func (m *diffModel) learn(c diffCall, res testenv.Result) {
	if res.Code != 0 || c.op {
		return
	}
	var req struct {
		Nodename string `json:"nodename"`
	}
	_ = json.Unmarshal([]byte(c.stdin), &req)
	switch c.args[0] {
	case "add-node":
		m.held[c.bin][req.Nodename] = true
	case "remove-node":
		delete(m.held[c.bin], req.Nodename)
		delete(m.placed[c.bin], req.Nodename)
	case "calculate-deploy":
		var plan struct {
			Workloads []json.RawMessage `json:"workloads_resource"`
		}
		if json.Unmarshal([]byte(res.Stdout), &plan) != nil || len(plan.Workloads) == 0 || m.rng.IntN(3) == 0 {
			return
		}
		m.placed[c.bin][req.Nodename] = append(m.placed[c.bin][req.Nodename], plan.Workloads...)
		m.pending = append(m.pending, diffCall{bin: c.bin, args: []string{"set-node-resource-usage"}, write: true,
			stdin: js(map[string]any{"nodename": req.Nodename, "workloads_resource": plan.Workloads, "delta": true, "incr": true})})
	}
}

// diffSeed is the seed of this run: $ERU_TEST_DIFF_SEED to replay one.
func diffSeed(t *testing.T) uint64 {
	if s := os.Getenv(envDiffSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, envDiffSeed)
		return seed
	}
	return uint64(time.Now().UnixNano())
}

func diffSteps(t *testing.T) int {
	if s := os.Getenv(envDiffSteps); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, envDiffSteps)
		return n
	}
	if testing.Short() {
		return 120
	}
	return 400
}

// TestRandomCallsThroughTheDaemonAnswerAsTheBinary runs a seeded random
// sequence of core verbs and operator commands of both plugins — nodes
// added, resized, used, released and removed, plans and capacity queries
// asked again and again (the daemon remembers their answers), drains,
// revocations, isolations and overcommit ratios changed — and checks that
// every read answered through the daemon is the answer of the binary run
// without one on the same store, and that every write answers what the
// same write answers in a mirror store no daemon serves. Some writes go
// around the daemon (the binary run alone, as an operator's are), so the
// daemon must see what it did not write. The seed is logged; set
// ERU_TEST_DIFF_SEED to replay it (and ERU_TEST_DIFF_STEPS for length).
func TestRandomCallsThroughTheDaemonAnswerAsTheBinary(t *testing.T) {
	t.Parallel() // its own stores and daemon
	seed, steps := diffSeed(t), diffSteps(t)
	// The daemon answers from its watch cache, and remembers answers, on
	// etcd only: -short runs etcd, the full run the embedded store too.
	for _, kind := range []string{"etcd", "embedded"} {
		t.Run(kind, func(t *testing.T) {
			if testing.Short() && kind != "etcd" {
				t.Skip("-short runs the etcd store only, where the daemon's cache and memos are")
			}
			t.Parallel()
			if kind == "etcd" {
				differential(t, testenv.NewEtcd(t), testenv.NewEtcd(t), seed, steps)
			} else {
				differential(t, testenv.NewEmbedded(t), testenv.NewEmbedded(t), seed, steps)
			}
		})
	}
}

// differential runs the sequence of seed on served, through a daemon, and
// mirror, without one.
func differential(t *testing.T, served, mirror *testenv.Env, seed uint64, steps int) {
	t.Logf("replay with %s=%d %s=%d", envDiffSeed, seed, envDiffSteps, steps)
	for _, env := range []*testenv.Env{served, mirror} {
		if d := env.Daemon(); d != nil { // ERU_TEST_SERVE=1 started one
			d.Stop(t)
		}
	}
	addr := testenv.FreeAddr(t)
	withServe(t, served, "http: "+addr)
	// Each plugin's file its own limit: the daemon serves both files
	// from one cache, and must answer each with its own.
	for _, env := range []*testenv.Env{served, mirror} {
		for file, limit := range map[string]int{"storage.yaml": 40, "compute.yaml": 25} {
			path := filepath.Join(env.Dir, file)
			cfg, err := os.ReadFile(path)
			require.NoError(t, err)
			cfg = append(cfg, fmt.Sprintf("scheduler:\n  max_deploy_count: %d\n", limit)...)
			require.NoError(t, os.WriteFile(path, cfg, 0o644))
		}
	}
	d := served.Serve(t, addr)
	d.WaitHTTP(t)
	// A node of the shared pool every POOL@ceph-a request draws on,
	// and the pool's capacity.
	for _, env := range []*testenv.Env{served, mirror} {
		res := env.ExecLocal(t, "storage", []byte(`{"nodename":"n1","resource":{"storage":"1T","pools":["ceph-a:/mnt/ceph-a"]}}`), "add-node")
		require.Equal(t, 0, res.Code, describe(res))
		res = env.ExecLocal(t, "storage", nil, "pools", "set-capacity", "ceph-a", "500G", "--if-version", "0")
		require.Equal(t, 0, res.Code, describe(res))
	}
	same := func(want, got testenv.Result, from *testenv.Env) testenv.Result {
		// The embedded store's path and the etcd prefix differ between
		// the two folders; nothing else may.
		want.Stderr = strings.ReplaceAll(strings.ReplaceAll(want.Stderr, from.Dir, served.Dir), from.Prefix, served.Prefix)
		return want
	}
	m := newDiffModel(seed)
	m.held["storage"]["n1"] = true
	// A few nodes to begin with, added as the sequence adds them.
	for _, add := range []struct{ bin, node, resource string }{
		{"storage", "n2", `{"volumes":["/data0:1T","/data1:500G"],"storage":"2T"}`},
		{"compute", "n1", `{"cpu":8,"memory":"16G"}`},
		{"compute", "n2", `{"cpu":32,"memory":"64G"}`},
	} {
		m.pending = append(m.pending, diffCall{bin: add.bin, args: []string{"add-node"}, write: true,
			stdin: js(map[string]any{"nodename": add.node, "resource": json.RawMessage(add.resource)})})
	}
	forwarded, around, placeable := 0, 0, 0
	answered := map[string][2]int{} // verb -> calls, successes
	count := func(c diffCall, res testenv.Result) {
		k := c.bin + " " + c.args[0]
		if c.op {
			k = c.bin + " " + c.args[0] + " " + c.args[1]
		}
		n := answered[k]
		n[0]++
		if res.Code == 0 {
			n[1]++
		}
		answered[k] = n
	}
	for i := range steps {
		c := m.next()
		where := fmt.Sprintf("seed %d step %d: %s", seed, i, c)
		if c.write {
			// Most writes through the daemon, some around it.
			var got testenv.Result
			if c.op || m.rng.IntN(4) == 0 {
				got = served.ExecLocal(t, c.bin, []byte(c.stdin), c.args...)
				around++
			} else {
				got = served.Exec(t, c.bin, []byte(c.stdin), c.args...)
				forwarded++
			}
			want := same(mirror.ExecLocal(t, c.bin, []byte(c.stdin), c.args...), got, mirror)
			require.Equal(t, want.Code, got.Code, "%s\nmirror: %s\nserved: %s", where, describe(want), describe(got))
			if !c.op {
				require.Equal(t, unnamed(want.Stdout), unnamed(got.Stdout), where)
				require.Equal(t, unnamed(want.Stderr), unnamed(got.Stderr), where)
			}
			m.learn(c, got)
			count(c, got)
			continue
		}
		if m.rng.IntN(4) == 0 {
			// The other plugin's file, with its own limit: the daemon
			// serves it too, from the same cache.
			other := map[string]string{"storage": "compute.yaml", "compute": "storage.yaml"}[c.bin]
			c.args = append(c.args, "--config", other)
			where += " --config " + other
		}
		got := served.Exec(t, c.bin, []byte(c.stdin), c.args...)
		forwarded++
		want := served.ExecLocal(t, c.bin, []byte(c.stdin), c.args...)
		require.Equal(t, want.Code, got.Code, "%s\nbinary: %s\ndaemon: %s", where, describe(want), describe(got))
		require.Equal(t, unnamed(want.Stdout), unnamed(got.Stdout), where)
		require.Equal(t, unnamed(want.Stderr), unnamed(got.Stderr), where)
		m.learn(c, got)
		count(c, got)
		if c.args[0] == "get-nodes-deploy-capacity" && strings.Contains(got.Stdout, `"capacity":`) {
			placeable++
		}
	}
	require.Equal(t, forwarded, d.Forwarded(t), "every call meant for the daemon went through it")
	if served.Kind == "etcd" {
		require.Positive(t, sumMetric(t, d, `eru_serve_cache_reads_total{source="cache"}`), "the daemon answered reads from its cache")
	}
	require.Positive(t, placeable, "some capacity query found room: the sequence is not all refusals")
	t.Logf("%d steps: %d calls through the daemon, %d writes around it; calls (succeeded) by verb: %v", steps, forwarded, around, answered)
}

package main_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// What the pool races (pools_races*_test.go) share: processes started
// concurrently the way core starts them, and the exact accounting every
// race ends with.

// racer runs plugin processes from many goroutines. It never touches a
// testing.T off the test's goroutine: what goes wrong is collected and
// reported by done.
type racer struct {
	env  *testenv.Env
	bin  string
	mu   sync.Mutex
	errs []string
	wg   sync.WaitGroup
}

func newRacer(t *testing.T, env *testenv.Env) *racer {
	t.Helper()
	return &racer{env: env, bin: testenv.Bin(t, "storage")}
}

// goes runs f on a goroutine of its own.
func (r *racer) goes(f func()) { r.wg.Go(f) }

// failf records something that went wrong.
func (r *racer) failf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// locked runs f under the racer's lock, for the goroutines' shared tallies.
func (r *racer) locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// done waits for every goroutine and fails the test with what they found.
func (r *racer) done(t *testing.T) {
	t.Helper()
	r.wg.Wait()
	require.Empty(t, r.errs)
}

// verb runs `storage verb` with req on stdin, as core does.
func (r *racer) verb(verb string, req any) testenv.Result {
	in, err := json.Marshal(req)
	if err != nil {
		r.failf("%s: encoding the request: %v", verb, err)
		return testenv.Result{Code: -1}
	}
	res, err := testenv.Run(r.bin, r.env.Dir, in, verb)
	if err != nil {
		r.failf("%s: %v", verb, err)
		return testenv.Result{Code: -1}
	}
	return res
}

// op runs an operator command.
func (r *racer) op(args ...string) testenv.Result {
	res, err := testenv.Run(r.bin, r.env.Dir, nil, args...)
	if err != nil {
		r.failf("%v: %v", args, err)
		return testenv.Result{Code: -1}
	}
	return res
}

// ok reports whether a verb succeeded as core needs it: exit 0, nothing on
// stderr, one JSON value on stdout decoded into out (when not nil).
func (r *racer) ok(what string, res testenv.Result, out any) bool {
	if res.Code != 0 {
		return false
	}
	if res.Stderr != "" {
		r.failf("%s succeeded but wrote to stderr: %s", what, res.Stderr)
		return false
	}
	if out != nil {
		if err := json.Unmarshal([]byte(res.Stdout), out); err != nil {
			r.failf("%s printed %q: %v", what, res.Stdout, err)
			return false
		}
	}
	return true
}

// refused checks that a verb failed as a plugin verb does (exit 128,
// nothing on stdout, one line on stderr) with one of the expected
// reasons; anything else is recorded as a failure.
func (r *racer) refused(what string, res testenv.Result, reasons ...string) bool {
	line := strings.TrimSuffix(res.Stderr, "\n")
	switch {
	case res.Code != 128 || res.Stdout != "" || strings.Contains(line, "\n"):
		r.failf("%s: want a one-line refusal (exit 128), got exit %d, stdout %q, stderr %q", what, res.Code, res.Stdout, res.Stderr)
		return false
	case !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(line, s) }):
		r.failf("%s: refused for another reason than %q: %s", what, reasons, line)
		return false
	}
	return true
}

// planDeploy is calculate-deploy of one workload on node: its resource
// and object ids (by binding), or ok false when refused for one of the
// expected reasons.
func (r *racer) planDeploy(node string, request any, reasons ...string) (json.RawMessage, bool) {
	res := r.verb("calculate-deploy", obj{"nodename": node, "deploy_count": 1, "workload_resource_request": request})
	var d deployAnswer
	if r.ok("calculate-deploy on "+node, res, &d) {
		if len(d.WorkloadsResource) != 1 {
			r.failf("calculate-deploy on %s answered %d workloads", node, len(d.WorkloadsResource))
			return nil, false
		}
		return d.WorkloadsResource[0], true
	}
	r.refused("calculate-deploy on "+node, res, reasons...)
	return nil, false
}

// write is core's usage write of workloads on node (delta), its answer's
// before when it landed.
func (r *racer) write(node string, incr bool, workloads []json.RawMessage, reasons ...string) (json.RawMessage, bool) {
	res := r.verb("set-node-resource-usage", obj{"nodename": node, "workloads_resource": workloads, "delta": true, "incr": incr})
	var ba beforeAfter
	if r.ok("set-node-resource-usage on "+node, res, &ba) {
		return ba.Before, true
	}
	r.refused("set-node-resource-usage on "+node, res, reasons...)
	return nil, false
}

// planObjects are the object ids of a workload's pool plans.
func planObjects(raw json.RawMessage) []string {
	var w struct {
		Request map[string]poolPlan `json:"pool_plan_request"`
	}
	_ = json.Unmarshal(raw, &w)
	var out []string
	for _, p := range w.Request {
		out = append(out, p.Object)
	}
	slices.Sort(out)
	return out
}

// storedObject is one object as every node record keeps it.
type storedObject struct {
	Node     string
	Pool     string `json:"pool"`
	Bytes    int64  `json:"bytes"`
	Held     bool   `json:"held"`
	MovingTo string `json:"moving_to"`
}

// allObjects reads every storage node record in one read and lists the
// pool objects they keep, by object id; an id kept by two records fails
// the test.
func allObjects(t *testing.T, env *testenv.Env) map[string]storedObject {
	t.Helper()
	return objectsIn(t, env.Dump(t))
}

// objectsIn lists the pool objects the storage node records of a dump
// keep, by object id; an id kept by two records fails the test.
func objectsIn(t *testing.T, dump map[string]string) map[string]storedObject {
	t.Helper()
	out := map[string]storedObject{}
	for key, value := range dump {
		node, ok := strings.CutPrefix(key, "/resource/storage/")
		if !ok || strings.Contains(node, "/") {
			continue
		}
		var rec struct {
			Usage struct {
				Objects map[string]storedObject `json:"pool_objects"`
			} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal([]byte(value), &rec))
		for id, o := range rec.Usage.Objects {
			prev, twice := out[id]
			require.False(t, twice, "object %s is kept by %s and %s", id, prev.Node, node)
			o.Node = node
			out[id] = o
		}
	}
	return out
}

// exactPool asserts a pool's counters against every node record, all read
// apart from the plugin in one snapshot (a write a killed process sent may
// still land): reserved_bytes is the sum of the objects living in it plus
// those moving in, object_count their number; it returns the objects
// living in it. `pools check` must agree.
func exactPool(t *testing.T, env *testenv.Env, id string) map[string]storedObject {
	t.Helper()
	dump := env.Dump(t)
	var rec poolRecord
	require.Contains(t, dump, "/pools/"+id)
	require.NoError(t, json.Unmarshal([]byte(dump["/pools/"+id]), &rec))
	living := map[string]storedObject{}
	var sum int64
	for oid, o := range objectsIn(t, dump) {
		if o.Pool == id {
			living[oid] = o
			sum += o.Bytes
		}
		if o.MovingTo == id {
			sum += o.Bytes
		}
	}
	if rec.LostAt != nil {
		require.Zero(t, rec.Reserved, "a lost pool reserves nothing")
	} else {
		require.Equal(t, sum, rec.Reserved, "pool %s: reserved_bytes against the objects %v", id, slices.Sorted(maps.Keys(living)))
		require.Equal(t, int64(len(living)), rec.Objects, "pool %s: object_count", id)
	}
	noDrift(t, env)
	return living
}

// raceBudget gives every call of a race more than the production budget:
// the races check outcomes under contention on a machine that may be
// loaded, not latency.
var raceBudget = testenv.WithBudget(20 * time.Second)

// races runs a race on a real etcd and on the embedded store (under -short
// on one of them: testenv.ShortStore).
func races(t *testing.T, run func(t *testing.T, env *testenv.Env)) {
	pick := testenv.ShortStore(t)
	t.Run("on etcd", func(t *testing.T) {
		testenv.SkipUnlessShortStore(t, pick, "etcd")
		run(t, testenv.NewEtcd(t, raceBudget))
	})
	t.Run("on the embedded store", func(t *testing.T) {
		testenv.SkipUnlessShortStore(t, pick, "embedded")
		run(t, testenv.NewEmbedded(t, raceBudget))
	})
}

// sizes returns n when the test runs in full, small under -short.
func sizes(n, small int) int {
	if testing.Short() {
		return small
	}
	return n
}

package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// Engine serves the verbs of one resource.
type Engine[N any, W any] struct {
	Res Resource[N, W]
	// Open opens the store; write says whether the verb writes. It is
	// called at most once per verb, and only by verbs that need the store.
	Open func(ctx context.Context, write bool) (store.Store, error)
	// Plugins are every resource plugin of the cluster (this one
	// included), for remove-node's "last record" rule.
	Plugins   []nodes.Plugin
	Policy    nodes.Policy
	MaxDeploy int
	Now       func() time.Time
}

// pointReadLimit is the most nodes a capacity query reads key by key; more
// are read as whole prefixes, still in one consistent read.
const pointReadLimit = 40

func (e *Engine[N, W]) recordKey(node string) string { return nodes.RecordPrefix(e.Res.Name()) + node }

func (e *Engine[N, W]) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Verbs lists the protocol's verbs in order.
var Verbs = []string{
	"name", "add-node", "remove-node", "get-nodes-deploy-capacity", "set-node-resource-capacity",
	"get-node-resource-info", "set-node-resource-info", "set-node-resource-usage", "get-most-idle-node",
	"fix-node-resource", "calculate-deploy", "calculate-realloc", "calculate-remap",
	"get-metrics-description", "get-metrics",
}

// nodeVerbs are the verbs about one node, which need a nodename.
var nodeVerbs = []string{
	"add-node", "remove-node", "set-node-resource-capacity", "get-node-resource-info", "set-node-resource-info",
	"set-node-resource-usage", "fix-node-resource", "calculate-deploy", "calculate-realloc", "calculate-remap",
}

// Call runs one verb and returns its answer, ready to be encoded.
func (e *Engine[N, W]) Call(ctx context.Context, verb string, req *types.Request) (any, error) {
	if slices.Contains(nodeVerbs, verb) {
		if req.Nodename == "" {
			return nil, types.Invalid("nodename is missing")
		}
		if err := nodes.ValidName(req.Nodename); err != nil {
			return nil, err
		}
	}
	for _, n := range req.Nodenames {
		if err := nodes.ValidName(n); err != nil {
			return nil, types.Wrap(types.InvalidArgument, err, "nodenames")
		}
	}
	for _, r := range req.Nodes {
		if err := nodes.ValidName(r.Nodename); err != nil {
			return nil, types.Wrap(types.InvalidArgument, err, "nodes")
		}
	}
	switch verb {
	case "name":
		return e.Res.Name(), nil
	case "add-node":
		return e.addNode(ctx, req)
	case "remove-node":
		return e.removeNode(ctx, req)
	case "get-nodes-deploy-capacity":
		return e.deployCapacity(ctx, req)
	case "set-node-resource-capacity":
		return e.setCapacity(ctx, req)
	case "get-node-resource-info":
		return e.info(ctx, req, false)
	case "fix-node-resource":
		return e.info(ctx, req, true)
	case "set-node-resource-info":
		return e.setInfo(ctx, req)
	case "set-node-resource-usage":
		return e.setUsage(ctx, req)
	case "get-most-idle-node":
		return e.mostIdle(ctx, req)
	case "calculate-deploy":
		return e.deploy(ctx, req)
	case "calculate-realloc":
		return e.realloc(ctx, req)
	case "calculate-remap":
		return e.Res.Remap(e.Res.Empty(), req.WorkloadsResource, Env{MaxDeployCount: e.MaxDeploy})
	case "get-metrics-description":
		return e.Res.MetricsDescription(), nil
	case "get-metrics":
		return e.metrics(ctx, req)
	}
	return nil, types.Invalid("unknown verb %q", verb)
}

// nodeView is one node as read: its record (Empty when unknown), its
// registration (nil when the registry never saw it) and whether its
// session is live.
type nodeView[N any] struct {
	name  string
	rec   N
	known bool
	reg   *nodes.Registration
	live  bool
}

// env collects what the resource's decisions read besides the record, and
// refuses shared values the resource cannot read (a corrupt cluster
// setting must not quietly read as its default).
func (e *Engine[N, W]) env(get func(string) ([]byte, bool)) (Env, error) {
	env := Env{MaxDeployCount: e.MaxDeploy, Shared: map[string][]byte{}}
	for _, k := range e.Res.SharedKeys() {
		if v, ok := get(k); ok {
			env.Shared[k] = v
		}
	}
	return env, e.Res.CheckShared(env.Shared)
}

func (e *Engine[N, W]) view(node string, get func(string) ([]byte, bool)) (*nodeView[N], error) {
	v := &nodeView[N]{name: node, rec: e.Res.Empty()}
	if data, ok := get(e.recordKey(node)); ok {
		rec, err := e.Res.Decode(data)
		if err != nil {
			return nil, types.Wrap(types.Internal, err, "stored record")
		}
		v.rec, v.known = rec, true
	}
	if data, ok := get(nodes.RegistrationKey(node)); ok {
		reg := &nodes.Registration{}
		if err := json.Unmarshal(data, reg); err != nil {
			return nil, types.Wrap(types.Internal, err, "stored registration")
		}
		v.reg = reg
	}
	_, v.live = get(nodes.SessionKey(node))
	return v, nil
}

func (e *Engine[N, W]) nodeKeys(node string) []string {
	return append([]string{e.recordKey(node), nodes.RegistrationKey(node), nodes.SessionKey(node)}, e.Res.SharedKeys()...)
}

// readNode reads one node for a verb that does not write.
func (e *Engine[N, W]) readNode(ctx context.Context, node string) (*nodeView[N], Env, error) {
	s, err := e.Open(ctx, false)
	if err != nil {
		return nil, Env{}, err
	}
	snap, err := s.Read(ctx, e.nodeKeys(node), nil)
	if err != nil {
		return nil, Env{}, err
	}
	v, err := e.view(node, snap.Get)
	if err != nil {
		return nil, Env{}, err
	}
	env, err := e.env(snap.Get)
	return v, env, err
}

// write runs fn on one node in a compare-and-swap transaction. fn returns
// the record to store (or the current one to store nothing) and the answer;
// it may change the registration, which is created on the node's first
// write and stored with the record.
func (e *Engine[N, W]) write(ctx context.Context, node string, fn func(v *nodeView[N], env Env) (N, any, error)) (any, error) {
	s, err := e.Open(ctx, true)
	if err != nil {
		return nil, err
	}
	var answer any
	err = store.Update(ctx, s, e.nodeKeys(node), func(tx *store.Tx) error {
		v, err := e.view(node, tx.Get)
		if err != nil {
			return err
		}
		regBefore, _ := json.Marshal(v.reg)
		recBefore, _ := tx.Get(e.recordKey(node))
		if v.reg == nil {
			v.reg = nodes.NewRegistration(node, e.now())
		}
		env, err := e.env(tx.Get)
		if err != nil {
			return err
		}
		next, out, err := fn(v, env)
		if err != nil {
			return err
		}
		answer = out
		data, err := e.Res.Encode(next)
		if err != nil {
			return err
		}
		if !bytes.Equal(data, recBefore) {
			tx.Put(e.recordKey(node), data)
		}
		regAfter, err := json.Marshal(v.reg)
		if err != nil {
			return err
		}
		if !bytes.Equal(regAfter, regBefore) {
			if string(regBefore) != "null" { // changed, not created: a new version
				v.reg.Touch(e.now())
				if regAfter, err = json.Marshal(v.reg); err != nil {
					return err
				}
			}
			tx.Put(nodes.RegistrationKey(node), regAfter)
		}
		return nil
	})
	return answer, err
}

func (e *Engine[N, W]) addNode(ctx context.Context, req *types.Request) (any, error) {
	rec, err := e.Res.AddNode(req.Resource, req.Info)
	if err != nil {
		return nil, err
	}
	return e.write(ctx, req.Nodename, func(v *nodeView[N], env Env) (N, any, error) {
		if v.known {
			return v.rec, nil, types.Errorf(types.AlreadyExists, "node exists")
		}
		if v.reg.Admission == nodes.Retired {
			return v.rec, nil, types.Errorf(types.FailedPrecondition, "node is RETIRED: a retired node name can never be added again")
		}
		capacity, usage := e.Res.View(rec, env)
		return rec, types.NodeResource{Capacity: capacity, Usage: usage}, nil
	})
}

func (e *Engine[N, W]) removeNode(ctx context.Context, req *types.Request) (any, error) {
	var others []string
	for _, p := range e.Plugins {
		if p.Name() != e.Res.Name() {
			others = append(others, p.RecordPrefix()+req.Nodename)
		}
	}
	s, err := e.Open(ctx, true)
	if err != nil {
		return nil, err
	}
	node := req.Nodename
	err = store.Update(ctx, s, append(e.nodeKeys(node), others...), func(tx *store.Tx) error {
		v, err := e.view(node, tx.Get)
		if err != nil || !v.known {
			return err
		}
		tx.Delete(e.recordKey(node))
		if v.reg == nil {
			return nil
		}
		last := true
		for _, k := range others {
			if _, ok := tx.Get(k); ok {
				last = false
			}
		}
		if last && v.reg.Admission != nodes.Retired {
			tx.Delete(nodes.RegistrationKey(node))
			tx.Delete(nodes.SessionKey(node))
			return nil
		}
		if len(v.reg.Ledger(e.Res.Name())) > 0 {
			v.reg.Forget(e.Res.Name())
			v.reg.Touch(e.now())
			data, err := json.Marshal(v.reg)
			if err != nil {
				return err
			}
			tx.Put(nodes.RegistrationKey(node), data)
		}
		return nil
	})
	return struct{}{}, err
}

func (e *Engine[N, W]) setCapacity(ctx context.Context, req *types.Request) (any, error) {
	return e.write(ctx, req.Nodename, func(v *nodeView[N], env Env) (N, any, error) {
		next, err := e.Res.SetCapacity(v.rec, req.Resource, req.ResourceRequest, req.Delta, req.Incr)
		if err != nil {
			return v.rec, nil, err
		}
		before, _ := e.Res.View(v.rec, env)
		after, _ := e.Res.View(next, env)
		return next, types.BeforeAfter{Before: before, After: after}, nil
	})
}

func (e *Engine[N, W]) setInfo(ctx context.Context, req *types.Request) (any, error) {
	return e.write(ctx, req.Nodename, func(v *nodeView[N], _ Env) (N, any, error) {
		rec, err := e.Res.Restore(req.Capacity, req.Usage)
		if err != nil {
			return v.rec, nil, err
		}
		// Written verbatim: the ledger is not drawn on, but an isolated node
		// still takes no growth.
		if err := v.reg.RefuseGrowth(e.Res.Held(v.rec), e.Res.Held(rec)); err != nil {
			return v.rec, nil, err
		}
		return rec, struct{}{}, nil
	})
}

func (e *Engine[N, W]) setUsage(ctx context.Context, req *types.Request) (any, error) {
	return e.write(ctx, req.Nodename, func(v *nodeView[N], env Env) (N, any, error) {
		next, err := e.Res.NextUsage(v.rec, req.Resource, req.ResourceRequest, req.WorkloadsResource, req.Delta, req.Incr)
		if err != nil {
			return v.rec, nil, err
		}
		// A delta is core adding or removing workloads: decreases draw on
		// the isolation ledger first. An absolute write (core replaying a
		// before, a reset) lands verbatim; either way an isolated node
		// takes no growth.
		if req.Delta {
			held, _, err := v.reg.Absorb(e.Res.Name(), e.Res.Held(v.rec), e.Res.Held(next))
			if err != nil {
				return v.rec, nil, err
			}
			next = e.Res.WithHeld(next, held)
		} else if err := v.reg.RefuseGrowth(e.Res.Held(v.rec), e.Res.Held(next)); err != nil {
			return v.rec, nil, err
		}
		if next, err = e.Res.Settle(next); err != nil {
			return v.rec, nil, err
		}
		_, before := e.Res.View(v.rec, env)
		_, after := e.Res.View(next, env)
		return next, types.BeforeAfter{Before: before, After: after}, nil
	})
}

func (e *Engine[N, W]) info(ctx context.Context, req *types.Request, fix bool) (any, error) {
	if !fix {
		v, env, err := e.readNode(ctx, req.Nodename)
		if err != nil {
			return nil, err
		}
		if !v.known {
			return nil, nil // core reads null as "no such node here"
		}
		_, diffs, err := e.Res.Recompute(v.rec, req.WorkloadsResource, v.reg.Ledger(e.Res.Name()))
		if err != nil {
			return nil, err
		}
		capacity, usage := e.Res.View(v.rec, env)
		return types.NodeResourceInfo{Capacity: capacity, Usage: usage, Diffs: diffs}, nil
	}
	// The workloads are the caller's view of the node. A retry after a
	// conflict may go ahead when only capacity or the registration moved;
	// when the usage itself moved, someone placed or removed work since the
	// fix began, and writing the caller's sum would erase it.
	var seen types.Amounts
	return e.write(ctx, req.Nodename, func(v *nodeView[N], env Env) (N, any, error) {
		if !v.known {
			return v.rec, nil, types.Errorf(types.NotFound, "the %s plugin has no record of this node", e.Res.Name())
		}
		held := e.Res.Held(v.rec)
		if seen == nil {
			seen = held
		} else if !maps.Equal(seen, held) {
			return v.rec, nil, types.Errorf(types.Aborted, "the node's usage changed while it was being fixed; list its workloads again and retry")
		}
		fixed, diffs, err := e.Res.Recompute(v.rec, req.WorkloadsResource, v.reg.Ledger(e.Res.Name()))
		if err != nil {
			return v.rec, nil, err
		}
		next := v.rec
		if len(diffs) > 0 && !v.reg.Isolated {
			if next, err = e.Res.Settle(fixed); err != nil {
				return v.rec, nil, types.Wrap(types.FailedPrecondition, err, "the workloads' usage cannot be written")
			}
		}
		capacity, usage := e.Res.View(next, env)
		return next, types.NodeResourceInfo{Capacity: capacity, Usage: usage, Diffs: diffs}, nil
	})
}

func (e *Engine[N, W]) refusal(v *nodeView[N]) error {
	if why := v.reg.Refusal(v.live, e.Policy); why != "" {
		return types.Errorf(types.FailedPrecondition, "%s", why)
	}
	return nil
}

func (e *Engine[N, W]) deploy(ctx context.Context, req *types.Request) (any, error) {
	w, err := e.Res.ParseRequest(req.WorkloadResourceRequest)
	if err != nil {
		return nil, err
	}
	v, env, err := e.readNode(ctx, req.Nodename)
	if err != nil {
		return nil, err
	}
	if err := e.refusal(v); err != nil {
		return nil, err
	}
	env.Ctx = ctx
	return e.Res.Deploy(v.rec, w, req.DeployCount, env)
}

func (e *Engine[N, W]) realloc(ctx context.Context, req *types.Request) (any, error) {
	v, env, err := e.readNode(ctx, req.Nodename)
	if err != nil {
		return nil, err
	}
	env.Ctx = ctx
	resp, grows, err := e.Res.Realloc(v.rec, req.WorkloadResource, req.WorkloadResourceRequest, env)
	if err != nil {
		return nil, err
	}
	if grows {
		if err := e.refusal(v); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

func (e *Engine[N, W]) mostIdle(ctx context.Context, req *types.Request) (any, error) {
	if len(req.Nodenames) == 0 {
		return nil, types.Invalid("nodenames is empty")
	}
	return e.Res.MostIdle(req.Nodenames, func() (map[string]N, Env, error) {
		names := dedupe(req.Nodenames)
		get, err := e.readNodes(ctx, names)
		if err != nil {
			return nil, Env{}, err
		}
		out := map[string]N{}
		var mu sync.Mutex
		err = e.each(names, get, func(_ int, v *nodeView[N]) {
			if v.known {
				mu.Lock()
				out[v.name] = v.rec
				mu.Unlock()
			}
		})
		if err != nil {
			return nil, Env{}, err
		}
		env, err := e.env(get)
		return out, env, err
	})
}

// readNodes reads many nodes in one consistent read: key by key for a few,
// whole prefixes for many. Records are decoded later, one at a time, by
// whoever needs them (see each).
func (e *Engine[N, W]) readNodes(ctx context.Context, names []string) (func(string) ([]byte, bool), error) {
	s, err := e.Open(ctx, false)
	if err != nil {
		return nil, err
	}
	var snap *store.Snapshot
	if len(names) <= pointReadLimit {
		keys := append([]string(nil), e.Res.SharedKeys()...)
		for _, n := range names {
			keys = append(keys, e.recordKey(n), nodes.RegistrationKey(n), nodes.SessionKey(n))
		}
		snap, err = s.Read(ctx, keys, nil)
	} else {
		// A many-node read holds every record at once; collect garbage
		// sooner than Go's default (heap twice the live data) so that the
		// process's peak stays a small multiple of the records, at a few
		// percent of time (see BENCHMARKS.md).
		debug.SetGCPercent(50)
		snap, err = s.Read(ctx, e.Res.SharedKeys(), []string{nodes.RecordPrefix(e.Res.Name()), nodes.RegistrationPrefix, nodes.SessionPrefix})
	}
	if err != nil {
		return nil, err
	}
	return snap.Get, nil
}

// each calls fn for every name, decoding each node just before fn sees it
// and dropping it after, spread over the CPUs when there are many: a query
// over 10,000 nodes never holds 10,000 decoded records at once.
func (e *Engine[N, W]) each(names []string, get func(string) ([]byte, bool), fn func(i int, v *nodeView[N])) error {
	var mu sync.Mutex
	var first error
	visit := func(i int) {
		v, err := e.view(names[i], get)
		if err != nil {
			mu.Lock()
			if first == nil {
				first = types.Wrap(types.Internal, err, "node "+names[i])
			}
			mu.Unlock()
			return
		}
		fn(i, v)
	}
	workers := min(runtime.GOMAXPROCS(0), len(names)/64)
	if workers <= 1 {
		for i := range names {
			visit(i)
		}
		return first
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names); i = int(next.Add(1) - 1) {
				visit(i)
			}
		})
	}
	wg.Wait()
	return first
}

func dedupe(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func (e *Engine[N, W]) deployCapacity(ctx context.Context, req *types.Request) (any, error) {
	w, err := e.Res.ParseRequest(req.WorkloadResource)
	if err != nil {
		return nil, err
	}
	answer := types.DeployCapacity{Nodes: map[string]types.NodeCapacity{}}
	names := dedupe(req.Nodenames)
	if len(names) == 0 {
		return answer, nil
	}
	get, err := e.readNodes(ctx, names)
	if err != nil {
		return nil, err
	}
	env, err := e.env(get)
	if err != nil {
		return nil, err
	}
	caps := make([]types.NodeCapacity, len(names))
	env.Ctx = ctx
	err = e.each(names, get, func(i int, v *nodeView[N]) {
		if v.reg.Refusal(v.live, e.Policy) == "" && ctx.Err() == nil {
			caps[i] = e.Res.DeployCapacity(v.rec, w, env)
		}
	})
	if err != nil {
		return nil, err
	}
	// A search cut short by the deadline answers no capacity: the whole
	// answer would be wrong, so the verb fails.
	if err := ctx.Err(); err != nil {
		return nil, types.Errorf(types.DeadlineExceeded, "the capacity query ran past the call's deadline (%v)", err)
	}
	for i, n := range names {
		if caps[i].Capacity <= 0 {
			continue
		}
		answer.Nodes[n] = caps[i]
		if answer.Total > math.MaxInt-caps[i].Capacity {
			answer.Total = math.MaxInt
		} else {
			answer.Total += caps[i].Capacity
		}
	}
	return answer, nil
}

func (e *Engine[N, W]) metrics(ctx context.Context, req *types.Request) (any, error) {
	refs := req.Nodes
	if req.Nodename != "" {
		refs = append([]types.NodeRef{{Podname: req.Podname, Nodename: req.Nodename}}, refs...)
	}
	if len(refs) == 0 {
		return []types.Metric{}, nil
	}
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Nodename
	}
	get, err := e.readNodes(ctx, dedupe(names))
	if err != nil {
		return nil, err
	}
	env, err := e.env(get)
	if err != nil {
		return nil, err
	}
	samples := make([][]types.Metric, len(refs))
	err = e.each(names, get, func(i int, v *nodeView[N]) {
		if v.known {
			samples[i] = e.Res.Metrics(refs[i].Podname, refs[i].Nodename, v.rec, env)
		}
	})
	if err != nil {
		return nil, err
	}
	out := []types.Metric{}
	for _, m := range samples {
		out = append(out, m...)
	}
	return out, nil
}

package engine

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"

	"github.com/eru-extend/resources/types"
)

// The verbs that plan workloads or report on nodes; none of them writes.

// refusal is the registry's refusal of new work on the node, as an error.
func (e *Engine[N, W]) refusal(v *nodeView[N]) error {
	if why := v.reg.Refusal(e.Policy); why != "" {
		return types.Errorf(types.FailedPrecondition, "%s", why)
	}
	return nil
}

// DeployCapacity answers how many workloads of the request fit on each
// node; nodes that take none, or no new work at all, are left out.
func (e *Engine[N, W]) DeployCapacity(ctx context.Context, req *types.Request) (any, error) {
	w, err := e.Res.ParseRequest(req.WorkloadResource)
	if err != nil {
		return nil, err
	}
	answer := types.DeployCapacity{Nodes: map[string]types.NodeCapacity{}}
	names := dedupe(req.Nodenames)
	if len(names) == 0 {
		return answer, nil
	}
	caps := make([]types.NodeCapacity, len(names))
	why := make([]string, len(names))
	ap, apportions := any(e.Res).(Apportioner[N, W])
	var draws [][]string
	var keys, prefixes []string
	if apportions {
		// The records the shared room is dealt from (storage's pools), at
		// the revision of the nodes.
		keys, prefixes = ap.PlacementReads(w)
		draws = make([][]string, len(names))
	}
	var env Env
	err = e.readMany(ctx, names, keys, prefixes, func(snap *store.Snapshot) error {
		var err error
		if env, err = e.env(snap.Get); err != nil {
			return err
		}
		env.Ctx = ctx
		share(env.Shared, snap, keys, prefixes)
		return nil
	}, func(idx []int, read *manyRead[N]) error {
		memo := ""
		if read.snap != nil {
			memo = capacityKey(req.WorkloadResource, env)
		}
		return e.eachOf(names, idx, read, func(i int, v *nodeView[N]) {
			if why[i] = v.reg.Refusal(e.Policy); why[i] != "" || ctx.Err() != nil {
				return
			}
			if apportions {
				draws[i] = ap.Draws(v.rec, w, v.reg)
			}
			// A node the plugin never saw is Empty: it takes whatever asks
			// for nothing of this resource.
			if caps[i] = e.capacity(read, v, w, env, memo); caps[i].Capacity > 0 {
				return
			}
			why[i] = "the node has no room for one workload of the request"
			if !v.known {
				why[i] = "the " + e.Res.Name() + " plugin has no record of the node"
			}
		})
	})
	if err != nil {
		return nil, err
	}
	// A search cut short by the deadline answers no capacity: the whole
	// answer would be wrong, so the verb fails.
	if err := ctx.Err(); err != nil {
		return nil, types.Errorf(types.DeadlineExceeded, "the capacity query ran past the call's deadline (%v)", err)
	}
	if apportions {
		limits := make([]int, len(names))
		for i := range names {
			if why[i] == "" {
				limits[i] = caps[i].Capacity
			}
		}
		for i, c := range ap.Apportion(w, names, draws, limits, env) {
			if why[i] == "" && c <= 0 && caps[i].Capacity > 0 {
				why[i] = "the shared storage the request draws on has no room left for this node"
			}
			caps[i].Capacity = c
		}
	}
	e.logLeftOut("get-nodes-deploy-capacity", names, why)
	order := make([]string, 0, len(names))
	for i, n := range names {
		if why[i] != "" {
			continue
		}
		if caps[i].Capacity <= 0 {
			continue
		}
		answer.Nodes[n] = caps[i]
		order = append(order, n)
		if answer.Total > math.MaxInt-caps[i].Capacity {
			answer.Total = math.MaxInt
		} else {
			answer.Total += caps[i].Capacity
		}
	}
	return answer.InOrder(order), nil
}

// maxLeftOutLines bounds the lines one query logs about nodes it left out;
// past it one line counts the rest.
const maxLeftOutLines = 1000

// logLeftOut logs, for every node a query left out (why[i] != ""), the
// reason, as Nomad's FilterNode metrics do.
func (e *Engine[N, W]) logLeftOut(verb string, names, why []string) {
	log := e.log()
	logged, more := 0, 0
	for i, n := range names {
		switch {
		case why[i] == "":
		case logged < maxLeftOutLines:
			log.Info("node left out", "verb", verb, "node", n, "reason", why[i])
			logged++
		default:
			more++
		}
	}
	if more > 0 {
		log.Info("more nodes left out", "verb", verb, "count", more)
	}
}

// Deploy plans deploy_count workloads on the node.
func (e *Engine[N, W]) Deploy(ctx context.Context, req *types.Request) (any, error) {
	w, err := e.Res.ParseRequest(req.WorkloadResourceRequest)
	if err != nil {
		return nil, err
	}
	v, env, err := e.readPlacement(ctx, req.Nodename, w)
	if err != nil {
		return nil, err
	}
	if err := e.refusal(v); err != nil {
		return nil, err
	}
	env.Ctx = ctx
	return e.Res.Deploy(v.rec, w, req.DeployCount, env)
}

// Realloc plans a workload's resize; a node that takes no new work refuses
// growth only.
func (e *Engine[N, W]) Realloc(ctx context.Context, req *types.Request) (any, error) {
	resize, err := e.Res.ParseResize(req.WorkloadResource, req.WorkloadResourceRequest)
	if err != nil {
		return nil, err
	}
	v, env, err := e.readRealloc(ctx, req.Nodename)
	if err != nil {
		return nil, err
	}
	env.Ctx = ctx
	resp, grows, err := resize.Plan(v.rec, env)
	if err != nil {
		// Only growth runs out of room: on a node that takes no new work,
		// why the growth is refused is the node's state, not its room.
		if types.ClassOf(err) == types.ResourceExhausted {
			if rerr := e.refusal(v); rerr != nil {
				return nil, rerr
			}
		}
		return nil, err
	}
	if grows {
		if err := e.refusal(v); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// Remap has nothing to move for any resource of this project: it checks
// the workloads are an object and answers no engine params.
func (e *Engine[N, W]) Remap(_ context.Context, req *types.Request) (any, error) {
	if _, err := types.DecodeObject(req.WorkloadsResource, "workloads_resource"); err != nil {
		return nil, err
	}
	return &types.Remap{EngineParamsMap: map[string]any{}}, nil
}

// MostIdle picks a node to build on among those that may take new work,
// and fails naming why each was skipped when none may.
func (e *Engine[N, W]) MostIdle(ctx context.Context, req *types.Request) (any, error) {
	if len(req.Nodenames) == 0 {
		return nil, types.Invalid("nodenames is empty")
	}
	names := dedupe(req.Nodenames)
	why := make([]string, len(names))
	recs := make([]*nodeView[N], len(names))
	var env Env
	var envErr error // answered by the resource's MostIdle when it asks
	err := e.readMany(ctx, names, nil, nil, func(snap *store.Snapshot) error {
		env, envErr = e.env(snap.Get)
		return nil
	}, func(idx []int, read *manyRead[N]) error {
		return e.eachOf(names, idx, read, func(i int, v *nodeView[N]) {
			if why[i] = v.reg.Refusal(e.Policy); why[i] == "" && v.known {
				recs[i] = v
			}
		})
	})
	if err != nil {
		return nil, err
	}
	var placeable, skipped []string
	out := map[string]N{}
	for i, n := range names {
		if why[i] != "" {
			skipped = append(skipped, n+" ("+why[i]+")")
			continue
		}
		placeable = append(placeable, n)
		if recs[i] != nil {
			out[n] = recs[i].rec
		}
	}
	e.logLeftOut("get-most-idle-node", names, why)
	if len(placeable) == 0 {
		return nil, types.Errorf(types.FailedPrecondition, "no node may take new work: %s", strings.Join(skipped, ", "))
	}
	answer, err := e.Res.MostIdle(placeable, func() (map[string]N, Env, error) {
		return out, env, envErr
	})
	if err == nil && len(skipped) > 0 {
		// core takes the answer of the highest priority, and its cpumem
		// answers with 100 from every node asked, the refused ones too
		answer.Priority += outranksCpumem
	}
	return answer, err
}

// outranksCpumem lifts get-most-idle-node's priority above that of core's
// built-in cpumem (100) when the answer had to leave a node out.
const outranksCpumem = 101

// Metrics samples the named nodes, in the order given.
func (e *Engine[N, W]) Metrics(ctx context.Context, req *types.Request) (any, error) {
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
	// A node named twice is read and decoded once, and sampled at each
	// place it is named.
	uniq := dedupe(names)
	at := make(map[string][]int, len(uniq))
	for i, n := range names {
		at[n] = append(at[n], i)
	}
	samples := make([][]types.Metric, len(refs))
	var env Env
	var shared string
	err := e.readMany(ctx, uniq, nil, nil, func(snap *store.Snapshot) error {
		var err error
		if env, err = e.env(snap.Get); err != nil {
			return err
		}
		shared = sharedKey(env)
		return nil
	}, func(idx []int, read *manyRead[N]) error {
		return e.eachOf(uniq, idx, read, func(u int, v *nodeView[N]) {
			if !v.known {
				return
			}
			for _, i := range at[uniq[u]] {
				samples[i] = e.sampleOf(refs[i], v, env, read, shared)
			}
		})
	})
	if err != nil {
		return nil, err
	}
	total := 0
	for _, m := range samples {
		total += len(m)
	}
	out := make([]types.Metric, 0, total)
	for _, m := range samples {
		out = append(out, m...)
	}
	return out, nil
}

// sample is one node's metrics: the resource's, with the capacity
// placement may still use at 0 when the node may take no new work, and
// node_schedulable.
func (e *Engine[N, W]) sample(ref types.NodeRef, v *nodeView[N], env Env) []types.Metric {
	out := e.Res.Metrics(ref.Podname, ref.Nodename, v.rec, env)
	schedulable := v.reg.Refusal(e.Policy) == ""
	if !schedulable {
		for i := range out {
			if slices.Contains(e.CapacityMetrics, out[i].Name) {
				out[i].Value = "0"
			}
		}
	}
	value := "0"
	if schedulable {
		value = "1"
	}
	return append(out, types.Metric{
		Name:   SchedulableMetric,
		Labels: []string{ref.Podname, ref.Nodename},
		Key:    "core.node." + strings.ReplaceAll(ref.Nodename, ".", "_") + "." + e.Res.Name() + ".schedulable",
		Value:  value,
	})
}

// PlacementReader is implemented by a resource whose plan of a workload
// reads records besides the node's (storage's pool records): keys and
// whole prefixes, read in the same consistent read as the node, handed to
// the decision in env.Shared under their keys.
type PlacementReader[W any] interface {
	PlacementReads(w W) (keys, prefixes []string)
}

// readPlacement reads one node for calculate-deploy, with what the
// resource's PlacementReader names for the request.
func (e *Engine[N, W]) readPlacement(ctx context.Context, node string, w W) (*nodeView[N], Env, error) {
	pr, ok := any(e.Res).(PlacementReader[W])
	if !ok {
		return e.readNode(ctx, node)
	}
	keys, prefixes := pr.PlacementReads(w)
	return e.readWith(ctx, node, keys, prefixes)
}

// readWith reads one node and the given keys and prefixes in one
// consistent read; what they hold, and the node's registration, is handed
// to the decision in env.Shared.
func (e *Engine[N, W]) readWith(ctx context.Context, node string, keys, prefixes []string) (*nodeView[N], Env, error) {
	if len(keys) == 0 && len(prefixes) == 0 {
		return e.readNode(ctx, node)
	}
	s, err := e.Open(ctx, false)
	if err != nil {
		return nil, Env{}, err
	}
	snap, err := s.Read(ctx, dedupe(append(e.nodeKeys(node), keys...)), prefixes)
	if err != nil {
		return nil, Env{}, err
	}
	v, err := e.view(node, snap.Get)
	if err != nil {
		return nil, Env{}, err
	}
	env, err := e.env(snap.Get)
	if err != nil {
		return nil, Env{}, err
	}
	share(env.Shared, snap, append(keys, nodes.RegistrationKey(node)), prefixes)
	return v, env, nil
}

// Apportioner is implemented by a resource whose workloads draw on
// something several nodes share (storage's pools): core sums the per-node
// capacities, so the shared room is dealt among the candidates after each
// node's own limit is known.
type Apportioner[N any, W any] interface {
	PlacementReader[W]
	// Draws names what a workload of w on this node draws on; reg is the
	// node's registration (its last heartbeat's observation says which
	// shared things the node reaches now).
	Draws(n N, w W, reg *nodes.Entry) []string
	// Apportion answers each node's capacity given its own limit (0 for a
	// node left out) and what it draws on; env.Shared holds what
	// PlacementReads named.
	Apportion(w W, names []string, draws [][]string, limits []int, env Env) []int
}

// share hands the keys and everything under the prefixes that snap holds
// to a decision, in shared.
func share(shared map[string][]byte, snap *store.Snapshot, keys, prefixes []string) {
	for _, k := range keys {
		if val, ok := snap.Get(k); ok {
			shared[k] = val
		}
	}
	for _, p := range prefixes {
		for _, it := range snap.Under(p) {
			shared[it.Key] = it.Value
		}
	}
}

// ReallocReader is implemented by a resource whose resize of a workload
// reads records besides the node's (storage's pool records).
type ReallocReader interface {
	ReallocReads() (keys, prefixes []string)
}

// readRealloc reads one node for calculate-realloc, with what the
// resource's ReallocReader names, in one consistent read.
func (e *Engine[N, W]) readRealloc(ctx context.Context, node string) (*nodeView[N], Env, error) {
	rr, ok := any(e.Res).(ReallocReader)
	if !ok {
		return e.readNode(ctx, node)
	}
	keys, prefixes := rr.ReallocReads()
	return e.readWith(ctx, node, keys, prefixes)
}

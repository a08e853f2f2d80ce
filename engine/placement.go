package engine

import (
	"context"
	"math"
	"sync"

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
		if v.reg.Refusal(e.Policy) == "" && ctx.Err() == nil {
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

// Deploy plans deploy_count workloads on the node.
func (e *Engine[N, W]) Deploy(ctx context.Context, req *types.Request) (any, error) {
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

// Realloc plans a workload's resize; a node that takes no new work refuses
// growth only.
func (e *Engine[N, W]) Realloc(ctx context.Context, req *types.Request) (any, error) {
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

// Remap has nothing to move for any resource of this project: it checks
// the workloads are an object and answers no engine params.
func (e *Engine[N, W]) Remap(_ context.Context, req *types.Request) (any, error) {
	if _, err := types.DecodeObject(req.WorkloadsResource, "workloads_resource"); err != nil {
		return nil, err
	}
	return &types.Remap{EngineParamsMap: map[string]any{}}, nil
}

// MostIdle picks a node to build on.
func (e *Engine[N, W]) MostIdle(ctx context.Context, req *types.Request) (any, error) {
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

package engine

import (
	"context"

	"github.com/eru-extend/resources/types"
)

// Verb is one verb of core's plugin protocol: everything known of it, in
// one place. The command line, the engine's dispatch and the docs read it
// from Table; adding a verb is adding a row (and its handler).
type Verb struct {
	Name string
	// Usage is the one-line help, with the request keys it reads.
	Usage string
	// Input says whether the verb reads a request on stdin; a verb without
	// input also needs no configuration and no store.
	Input bool
	// Node says whether the request must name one node (nodename).
	Node bool
	// Writes says whether the verb may change the store: a forwarded
	// write whose connection dies is never run again locally (its outcome
	// is unknown). The forwarding front keeps its own constant copy of
	// this column (internal/forward), held equal to it by a test.
	Writes bool
	// Handle runs the verb on a resource's engine.
	Handle func(h Handlers, ctx context.Context, req *types.Request) (any, error)
}

// Handlers are the verbs' bodies, implemented by every Engine.
type Handlers interface {
	Name(ctx context.Context, req *types.Request) (any, error)
	AddNode(ctx context.Context, req *types.Request) (any, error)
	RemoveNode(ctx context.Context, req *types.Request) (any, error)
	DeployCapacity(ctx context.Context, req *types.Request) (any, error)
	SetCapacity(ctx context.Context, req *types.Request) (any, error)
	GetInfo(ctx context.Context, req *types.Request) (any, error)
	SetInfo(ctx context.Context, req *types.Request) (any, error)
	SetUsage(ctx context.Context, req *types.Request) (any, error)
	MostIdle(ctx context.Context, req *types.Request) (any, error)
	FixNode(ctx context.Context, req *types.Request) (any, error)
	Deploy(ctx context.Context, req *types.Request) (any, error)
	Realloc(ctx context.Context, req *types.Request) (any, error)
	Remap(ctx context.Context, req *types.Request) (any, error)
	MetricsDescription(ctx context.Context, req *types.Request) (any, error)
	Metrics(ctx context.Context, req *types.Request) (any, error)
}

// Table is every verb of the protocol, in the protocol's order.
func Table() []Verb {
	return []Verb{
		{"name", "print the resource's name", false, false, false, Handlers.Name},
		{"add-node", "record a new node's capacity: {nodename, resource, info}", true, true, true, Handlers.AddNode},
		{"remove-node", "forget a node: {nodename}", true, true, true, Handlers.RemoveNode},
		{"get-nodes-deploy-capacity", "how many workloads fit on each node: {nodenames, workload_resource}", true, false, false, Handlers.DeployCapacity},
		{"set-node-resource-capacity", "change a node's capacity: {nodename, resource, resource_request, delta, incr}", true, true, true, Handlers.SetCapacity},
		{"get-node-resource-info", "a node's capacity, usage and diffs: {nodename, workloads_resource}", true, true, false, Handlers.GetInfo},
		{"set-node-resource-info", "restore a node's capacity and usage: {nodename, capacity, usage}", true, true, true, Handlers.SetInfo},
		{"set-node-resource-usage", "change a node's usage: {nodename, resource, resource_request, workloads_resource, delta, incr}", true, true, true, Handlers.SetUsage},
		{"get-most-idle-node", "pick a node to build on: {nodenames}", true, false, false, Handlers.MostIdle},
		{"fix-node-resource", "rewrite a node's usage from its workloads: {nodename, workloads_resource}", true, true, true, Handlers.FixNode},
		{"calculate-deploy", "plan workloads on a node: {nodename, deploy_count, workload_resource_request}", true, true, false, Handlers.Deploy},
		{"calculate-realloc", "plan a workload's resize: {nodename, workload_resource, workload_resource_request}", true, true, false, Handlers.Realloc},
		{"calculate-remap", "remap running workloads (a no-op): {nodename, workloads_resource}", true, true, false, Handlers.Remap},
		{"get-metrics-description", "declare the metrics", false, false, false, Handlers.MetricsDescription},
		{"get-metrics", "a node's metrics: {podname, nodename} or {nodes: [...]}", true, false, false, Handlers.Metrics},
	}
}

// Lookup finds a verb by name.
func Lookup(name string) (Verb, bool) {
	for _, v := range Table() {
		if v.Name == name {
			return v, true
		}
	}
	return Verb{}, false
}

// Call runs one verb on h and returns its answer, ready to be encoded.
func Call(ctx context.Context, h Handlers, verb string, req *types.Request) (any, error) {
	v, ok := Lookup(verb)
	if !ok {
		return nil, types.Invalid("unknown verb %q", verb)
	}
	if err := checkNames(v, req); err != nil {
		return nil, err
	}
	return v.Handle(h, ctx, req)
}

// Names are the verbs' names, in the table's order.
func Names() []string {
	table := Table()
	out := make([]string, len(table))
	for i, v := range table {
		out[i] = v.Name
	}
	return out
}

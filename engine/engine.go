package engine

import (
	"context"
	"log/slog"

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
	// Resources are every resource plugin of the cluster (this one
	// included), for remove-node's "last record" rule.
	Resources []nodes.Resource
	Policy    nodes.Policy
	MaxDeploy int
	Clock     types.Clock
	// Log receives what a verb decides about nodes it leaves out (nil: no
	// log).
	Log *slog.Logger
	// CapacityMetrics are the resource's metrics of what placement may
	// still use; get-metrics reports them 0 for a node that may take no
	// new work.
	CapacityMetrics []string
	// Snapshots, when set, is where the verbs that read many nodes and
	// write nothing (get-nodes-deploy-capacity, get-most-idle-node,
	// get-metrics) read, their records decoded already (snapshot.go): the
	// serve daemon's watch cache. Nil: they read through Open.
	Snapshots SnapshotReader
}

// log is the engine's logger, or one that discards.
func (e *Engine[N, W]) log() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// Call runs one verb and returns its answer, ready to be encoded.
func (e *Engine[N, W]) Call(ctx context.Context, verb string, req *types.Request) (any, error) {
	return Call(ctx, e, verb, req)
}

// checkNames refuses node names that cannot be part of a key before
// anything is read.
func checkNames(v Verb, req *types.Request) error {
	if v.Node && req.Nodename == "" {
		return types.Invalid("nodename is missing")
	}
	if req.Nodename != "" { // also get-metrics' one node
		if err := nodes.ValidName(req.Nodename); err != nil {
			return err
		}
	}
	for _, n := range req.Nodenames {
		if err := nodes.ValidName(n); err != nil {
			return types.Wrap(types.InvalidArgument, err, "nodenames")
		}
	}
	for _, r := range req.Nodes {
		if err := nodes.ValidName(r.Nodename); err != nil {
			return types.Wrap(types.InvalidArgument, err, "nodes")
		}
	}
	return nil
}

// Name answers the resource's name.
func (e *Engine[N, W]) Name(context.Context, *types.Request) (any, error) {
	return types.NameAnswer(e.Res.Name()), nil
}

// SchedulableMetric is the gauge every resource exports per node: 1 when
// the node may take new work, 0 when not. It carries no status label: core
// exports every label set it was ever given, so a label whose value
// changes (READY, then DRAINING) would leave the old series at its old
// value for good; `nodes get` and the serve daemon's eru_node_status say
// the status.
const SchedulableMetric = "node_schedulable"

// MetricsDescription declares the resource's metrics and node_schedulable.
func (e *Engine[N, W]) MetricsDescription(context.Context, *types.Request) (any, error) {
	return append(e.Res.MetricsDescription(), types.MetricDescription{
		Name:   SchedulableMetric,
		Help:   "1 when the node may take new work, 0 when it may not (drained, isolated, retired, clock or memory: see nodes get)",
		Type:   "gauge",
		Labels: []string{"podname", "nodename"},
	}), nil
}

func (e *Engine[N, W]) recordKey(node string) string { return nodes.RecordPrefix(e.Res.Name()) + node }

// nodeKeys are the keys a verb about one node reads: its record, its
// registry keys and the resource's shared keys.
func (e *Engine[N, W]) nodeKeys(node string) []string {
	keys := append([]string{e.recordKey(node)}, nodes.Keys(node)...)
	return append(keys, e.Res.SharedKeys()...)
}

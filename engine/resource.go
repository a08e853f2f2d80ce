// Package engine serves eru core's binary plugin protocol for one resource
// (docs/protocol.md): it reads the node records and registrations a verb
// needs in one consistent read, asks the node registry whether a node may
// take new work, hands the records to the resource's pure decisions, and
// writes the results back in one compare-and-swap transaction, retried on
// conflict.
//
// Every verb is one row of the table in verbs.go; its handler lives in
// nodeverbs.go (verbs that write one node) or placement.go (verbs that plan
// or report). read.go holds the reads, write.go the transaction, snapshot.go
// the reads of records a cache decoded already (the serve daemon's).
//
// A resource (storage, compute) implements Resource; nothing in it knows of
// the store, the registry or JSON on stdin.
package engine

import (
	"encoding/json"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/types"
)

// Env is what a resource's decisions may read besides the node record.
type Env = types.Env

// Codec is how a resource's node records are stored and shown. N is the
// decoded record.
type Codec[N any] interface {
	// Name is the resource's name in core ("storage", "compute").
	Name() string
	// SharedKeys are store keys read with every record (cluster defaults);
	// CheckShared refuses values of them the resource cannot read.
	SharedKeys() []string
	CheckShared(shared map[string][]byte) error
	Decode(data []byte) (N, error)
	Encode(n N) ([]byte, error)
	// Empty is a node the plugin has never seen: it holds nothing.
	Empty() N
	// View is the record's capacity and usage as the verbs answer them.
	View(n N, env Env) (capacity, usage any)
}

// Usage is what the node registry's isolation ledger needs of a record's
// usage.
type Usage[N any] interface {
	// Held flattens the record's usage; WithHeld sets it back.
	Held(n N) types.Amounts
	WithHeld(n N, a types.Amounts) N
	// Settle validates a record after a usage write.
	Settle(n N) (N, error)
	// LedgerView renders released amounts in the resource's usage shape.
	LedgerView(a types.Amounts) any
	// CheckLedgerKey refuses a key Held cannot produce: not the shape of a
	// component of the resource's usage. It does not look at the node: a
	// ledger outlives the devices it counts. The error says what is accepted.
	CheckLedgerKey(key string) error
	// IsolationFigures are this resource's counts in `nodes isolate`'s
	// answer, every one of them, in a fixed order (zero for no amounts).
	IsolationFigures(a types.Amounts) []types.Figure
}

// Records is a resource's node records as the node registry sees them.
type Records[N any] interface {
	Codec[N]
	Usage[N]
}

// Writes are the decisions of the verbs that write one node.
type Writes[N any] interface {
	AddNode(request json.RawMessage, info *types.EngineInfo) (N, error)
	// CapacityChange decodes a capacity change the engine picked by the
	// protocol's precedence rule (types.ChangeOf).
	CapacityChange(change types.Change, delta, incr bool) (Edit[N], error)
	// Restore builds a record from set-node-resource-info: what
	// get-node-resource-info answered, replayed to undo a remove-node.
	Restore(capacity, usage json.RawMessage) (N, error)
	// UsageChange decodes a usage change; its edit computes the usage write
	// without validating it: the registry may still absorb decreases into
	// its ledger, then Settle validates.
	UsageChange(change types.Change, delta, incr bool) (Edit[N], error)
	// Recompute sums the workloads' usage, less what the isolation ledger
	// released: the record with that usage (not validated: reporting diffs
	// must work whatever the workloads hold) and the disagreements with what
	// is stored.
	Recompute(n N, workloads json.RawMessage, released types.Amounts) (N, []string, error)
}

// Edit is a change to one node's record, decoded from the request once,
// before anything is read: a bad request fails with nothing read, and a
// write retried after a conflict applies the same decoded change to the
// record it reads again.
type Edit[N any] interface {
	// Apply answers the record after the change; n is left as it was.
	Apply(n N) (N, error)
}

// AsEdit is a resource's decoded change as the engine takes it: nil (not an
// interface holding a nil pointer) when decoding failed, so that a rules
// method can answer AsEdit[N](DecodeX(…)).
func AsEdit[N any, E Edit[N]](e E, err error) (Edit[N], error) {
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Placement is the decisions of the verbs that plan workloads. W is a parsed
// workload request.
type Placement[N any, W any] interface {
	ParseRequest(raw json.RawMessage) (W, error)
	DeployCapacity(n N, w W, env Env) types.NodeCapacity
	Deploy(n N, w W, count int, env Env) (*types.Deploy, error)
	// ParseResize decodes calculate-realloc's workload (stored form) and
	// request (deltas), once, before anything is read.
	ParseResize(workload, request json.RawMessage) (Resize[N], error)
	// MostIdle picks a node to build on; load reads the nodes' records and
	// is called only by a resource that needs them.
	MostIdle(nodenames []string, load func() (map[string]N, Env, error)) (*types.MostIdle, error)
}

// Resize is a decoded calculate-realloc: a workload and the deltas to
// resize it by.
type Resize[N any] interface {
	// Plan answers calculate-realloc on the node's record and whether the
	// change grows the workload (a node that takes no new work refuses
	// growth only).
	Plan(n N, env Env) (*types.Realloc, bool, error)
}

// Metrics declares and samples a resource's gauges.
type Metrics[N any] interface {
	MetricsDescription() []types.MetricDescription
	Metrics(podname, nodename string, n N, env Env) []types.Metric
}

// Resource is one resource plugin: its records and its decisions for every
// verb.
type Resource[N any, W any] interface {
	Records[N]
	Writes[N]
	Placement[N, W]
	Metrics[N]
}

// registered adapts a resource's records to the node registry's view.
type registered[N any] struct{ r Records[N] }

// Registered is the node registry's view of a resource's records.
func Registered[N any](r Records[N]) nodes.Resource { return registered[N]{r} }

func (p registered[N]) Name() string         { return p.r.Name() }
func (p registered[N]) RecordPrefix() string { return nodes.RecordPrefix(p.r.Name()) }
func (p registered[N]) SharedKeys() []string { return p.r.SharedKeys() }

func (p registered[N]) Summary(data []byte, shared map[string][]byte) (any, any, types.Amounts, error) {
	n, err := p.r.Decode(data)
	if err != nil {
		return nil, nil, nil, err
	}
	capacity, usage := p.r.View(n, Env{Shared: shared})
	return capacity, usage, heldBy(p.r, n), nil
}

// heldBy is what a record holds as the node registry counts it: its
// amounts and, under HeldObjectsKey, the objects it holds (ObjectHolder).
func heldBy[N any](r Records[N], n N) types.Amounts {
	held := r.Held(n)
	if o, ok := r.(ObjectHolder[N]); ok {
		if count := o.HeldObjects(n); count > 0 {
			held = held.Clone()
			held[HeldObjectsKey] = count
		}
	}
	return held
}

// ObjectHolder is a resource whose records hold, beside their amounts,
// objects its workloads use (a storage node's pool objects): to the node
// registry they are usage, so a node holding one is not drained and may
// not be retired. They are not amounts: an isolation releases them by the
// resource's own rule (Usage.Release), not into the ledger.
type ObjectHolder[N any] interface {
	HeldObjects(n N) int64
}

// HeldObjectsKey is the amount under which Summary counts the objects a
// record holds.
const HeldObjectsKey = "objects"

func (p registered[N]) Release(data []byte) ([]byte, types.Amounts, error) {
	n, err := p.r.Decode(data)
	if err != nil {
		return nil, nil, err
	}
	held := p.r.Held(n)
	zero := types.Amounts{}
	for k := range held {
		zero[k] = 0
	}
	n = p.r.WithHeld(n, zero)
	if r, ok := p.r.(Releaser[N]); ok {
		n = r.Release(n)
	}
	out, err := p.r.Encode(n)
	return out, held, err
}

// Releaser is implemented by a resource whose records keep, besides the
// usage the isolation ledger takes, use rights an isolation releases in
// place (storage's pool objects, unheld but still reserving).
type Releaser[N any] interface {
	Release(n N) N
	// ReleasedFigures count what Release released, by the names
	// IsolationFigures lists.
	ReleasedFigures(before, after N) []types.Figure
}

// ReleasedFigures counts what an isolation released in place (Releaser).
func (p registered[N]) ReleasedFigures(before, after []byte) []types.Figure {
	r, ok := p.r.(Releaser[N])
	if !ok {
		return nil
	}
	b, err := p.r.Decode(before)
	if err != nil {
		return nil
	}
	a, err := p.r.Decode(after)
	if err != nil {
		return nil
	}
	return r.ReleasedFigures(b, a)
}

func (p registered[N]) LedgerView(a types.Amounts) any { return p.r.LedgerView(a) }

func (p registered[N]) IsolationFigures(a types.Amounts) []types.Figure {
	return p.r.IsolationFigures(a)
}

// Retirer is implemented by a resource whose records keep something a
// node's retirement ends in the same transaction (storage's pool
// declarations).
type Retirer[N any] interface {
	// Retire answers the record after and whether anything ended.
	Retire(n N) (N, bool)
}

// Retiring ends what the record of a retiring node keeps (Retirer).
func (p registered[N]) Retiring(data []byte) ([]byte, error) {
	r, ok := p.r.(Retirer[N])
	if !ok {
		return data, nil
	}
	n, err := p.r.Decode(data)
	if err != nil {
		return nil, err
	}
	next, changed := r.Retire(n)
	if !changed {
		return data, nil
	}
	return p.r.Encode(next)
}

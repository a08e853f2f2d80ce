package storage

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/types"
)

// Rules are the storage resource's decisions as the engine drives them:
// every verb's decision, on values.
type Rules struct{}

// Name is the resource's name in core.
func (Rules) Name() string { return "storage" }

// SharedKeys: storage reads nothing besides its node records.
func (Rules) SharedKeys() []string { return nil }

// Decode reads a stored record.
func (Rules) Decode(data []byte) (*Node, error) { return DecodeNode(data) }

// Encode writes a record.
func (Rules) Encode(n *Node) ([]byte, error) {
	n.Capacity.normalize()
	n.Usage.normalize()
	return json.Marshal(n)
}

// Empty is a node storage has never seen.
func (Rules) Empty() *Node {
	n := NewNode()
	n.unknown = true
	return n
}

// View is the record's capacity and usage in stored form.
func (Rules) View(n *Node, _ types.Env) (any, any) { return n.Capacity, n.Usage }

// Held flattens the usage.
func (Rules) Held(n *Node) types.Amounts { return n.Held() }

// WithHeld sets the usage from amounts.
func (Rules) WithHeld(n *Node, a types.Amounts) *Node { return n.WithHeld(a) }

// Settle validates a record after a usage write.
func (Rules) Settle(n *Node) (*Node, error) { return n.Settle() }

// LedgerView renders released usage.
func (Rules) LedgerView(a types.Amounts) any { return LedgerView(a) }

// CheckLedgerKey accepts the shapes of the components Held produces.
func (Rules) CheckLedgerKey(key string) error { return CheckLedgerKey(key) }

// IsolationFigures counts the volume devices that held bytes and the
// storage bytes released.
func (Rules) IsolationFigures(a types.Amounts) []types.Figure {
	var vols int64
	for k, v := range a {
		if strings.HasPrefix(k, "volume:") && v > 0 {
			vols++
		}
	}
	return []types.Figure{{Name: "released_volumes", Value: vols}, {Name: "released_storage_bytes", Value: a["storage"]},
		{Name: "released_pool_objects", Value: 0}, {Name: "released_pool_bytes", Value: 0}}
}

// AddNode builds a new node's record.
func (Rules) AddNode(request json.RawMessage, info *types.EngineInfo) (*Node, error) {
	return AddNode(request, info)
}

// Restore builds a record verbatim.
func (Rules) Restore(capacity, usage json.RawMessage) (*Node, error) {
	return Restore(capacity, usage)
}

// Recompute sums the workloads' usage and lists the disagreements; the
// record it returns carries that sum as usage, unvalidated (Settle checks it
// before a fix writes it).
func (Rules) Recompute(n *Node, workloads json.RawMessage, released types.Amounts) (*Node, []string, error) {
	list, err := DecodeWorkloads(workloads)
	if err != nil {
		return nil, nil, err
	}
	computed, diffs, err := n.Recompute(list, released)
	if err != nil {
		return nil, nil, err
	}
	objects, poolDiffs, err := n.recomputeObjects(list)
	if err != nil {
		return nil, nil, err
	}
	diffs = append(diffs, poolDiffs...)
	if len(diffs) == 0 {
		return n, diffs, nil
	}
	fixed := n.Clone()
	computed.PoolObjects = fixed.Usage.PoolObjects
	if len(poolDiffs) > 0 {
		computed.PoolObjects = objects
	}
	fixed.Usage = computed
	return fixed, diffs, nil
}

// ParseRequest reads a workload request.
func (Rules) ParseRequest(raw json.RawMessage) (*WorkloadRequest, error) {
	return ParseWorkloadRequest(raw, false)
}

// DeployCapacity answers the capacity query for one node.
// When the call's context (env.Ctx) is done the search stops and the node
// answers no capacity; the engine then fails the verb with
// deadline_exceeded.
func (Rules) DeployCapacity(n *Node, w *WorkloadRequest, env types.Env) types.NodeCapacity {
	c, err := n.DeployCapacity(env.Ctx, w, env.MaxDeployCount)
	if err != nil {
		return types.NodeCapacity{}
	}
	return c
}

// Deploy plans count workloads.
func (Rules) Deploy(n *Node, w *WorkloadRequest, count int, env types.Env) (*types.Deploy, error) {
	wls, err := n.Deploy(env.Ctx, w, count, env.MaxDeployCount)
	if err != nil {
		return nil, err
	}
	poolVolumes, err := n.deployPools(w, count, env.Shared, wls)
	if err != nil {
		return nil, err
	}
	out := &types.Deploy{EnginesParams: make([]any, 0, len(wls)), WorkloadsResource: make([]any, 0, len(wls))}
	for i, wl := range wls {
		params, err := wl.EngineParams()
		if err != nil {
			return nil, err
		}
		params.Volumes = append(params.Volumes, poolVolumes[i]...)
		out.EnginesParams = append(out.EnginesParams, params)
		out.WorkloadsResource = append(out.WorkloadsResource, wl)
	}
	return out, nil
}

// Resize is a decoded calculate-realloc: a stored workload and a request
// of deltas.
type Resize struct {
	old *Workload
	req *WorkloadRequest
}

// ParseResize decodes calculate-realloc's workload and request.
func (Rules) ParseResize(workload, request json.RawMessage) (engine.Resize[*Node], error) {
	old, err := DecodeWorkload(workload)
	if err != nil {
		return nil, err
	}
	req, err := ParseWorkloadRequest(request, true)
	if err != nil {
		return nil, err
	}
	return &Resize{old: old, req: req}, nil
}

// Plan resizes the workload on n.
func (r *Resize) Plan(n *Node, env types.Env) (*types.Realloc, bool, error) {
	old, req := r.old, r.req
	res, err := n.Realloc(env.Ctx, old, req)
	if err != nil {
		return nil, false, err
	}
	volumes, grows, changed, err := n.reallocPools(old, req, env.Shared, res.Workload, res.Delta)
	if err != nil {
		return nil, false, err
	}
	if err := oneMountPerDestination(res.Workload.VolumesRequest, poolBindingsOf(res.Workload.PoolPlanRequest)); err != nil {
		return nil, false, err
	}
	res.Engine.Volumes = append(res.Engine.Volumes, volumes...)
	res.Engine.VolumeChanged = res.Engine.VolumeChanged || changed
	return &types.Realloc{EngineParams: res.Engine, DeltaResource: res.Delta, WorkloadResource: res.Workload}, res.Grows || grows, nil
}

// MostIdle answers the first node with priority 1: storage has no
// preference where images are built.
func (Rules) MostIdle(nodenames []string, _ func() (map[string]*Node, types.Env, error)) (*types.MostIdle, error) {
	return &types.MostIdle{Nodename: nodenames[0], Priority: 1}, nil
}

// MetricsDescription declares storage's gauges.
func (Rules) MetricsDescription() []types.MetricDescription {
	node := []string{"podname", "nodename"}
	dev := []string{"podname", "nodename", "device"}
	return []types.MetricDescription{
		{Name: "storage_used", Help: "bytes of storage held by workloads", Type: "gauge", Labels: node},
		{Name: "storage_capacity", Help: "bytes of storage the node offers", Type: "gauge", Labels: node},
		{Name: "storage_volume_used", Help: "bytes of a volume device held by workloads", Type: "gauge", Labels: dev},
		{Name: "storage_volume_capacity", Help: "bytes a volume device offers", Type: "gauge", Labels: dev},
		{Name: "storage_pool_held_bytes", Help: "bytes of the pool objects whose use right the node holds, per pool", Type: "gauge", Labels: []string{"podname", "nodename", "pool"}},
	}
}

// Metrics answers the node's samples.
func (Rules) Metrics(podname, nodename string, n *Node, _ types.Env) []types.Metric {
	base := "core.node." + statsdName(nodename) + ".storage."
	labels := []string{podname, nodename}
	out := []types.Metric{
		{Name: "storage_used", Labels: labels, Key: base + "used", Value: strconv.FormatInt(n.Usage.Storage, 10)},
		{Name: "storage_capacity", Labels: labels, Key: base + "capacity", Value: strconv.FormatInt(n.Capacity.Storage, 10)},
	}
	for _, dev := range n.Capacity.sortedDevices() {
		dl := []string{podname, nodename, dev}
		key := base + "volume." + statsdName(dev) + "."
		out = append(out,
			types.Metric{Name: "storage_volume_used", Labels: dl, Key: key + "used", Value: strconv.FormatInt(n.Usage.Volumes[dev], 10)},
			types.Metric{Name: "storage_volume_capacity", Labels: dl, Key: key + "capacity", Value: strconv.FormatInt(n.Capacity.Volumes[dev], 10)},
		)
	}
	held := n.Usage.PoolObjects.HeldBytes()
	for _, id := range n.Declarations().IDs() {
		out = append(out, types.Metric{Name: "storage_pool_held_bytes", Labels: []string{podname, nodename, id},
			Key: base + "pool." + statsdName(id) + ".held", Value: strconv.FormatInt(held[id], 10)})
	}
	return out
}

// statsdName makes a name safe inside a dotted statsd key (a name without
// a dot or a slash is returned as it is, without a copy).
func statsdName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '/' {
			return '_'
		}
		return r
	}, s)
}

// CheckShared: storage reads no shared keys.
func (Rules) CheckShared(map[string][]byte) error { return nil }

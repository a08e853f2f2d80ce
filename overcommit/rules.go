package overcommit

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/types"
)

// Rules are the compute resource's decisions as the engine drives them.
type Rules struct{}

// Name is the resource's name in core.
func (Rules) Name() string { return "compute" }

// SharedKeys: every decision reads the cluster-wide defaults.
func (Rules) SharedKeys() []string { return []string{DefaultsKey} }

// CheckShared refuses corrupt stored defaults.
func (Rules) CheckShared(shared map[string][]byte) error {
	data, ok := shared[DefaultsKey]
	_, err := DecodeDefaults(data, ok)
	return err
}

// Decode reads a stored record.
func (Rules) Decode(data []byte) (*Node, error) { return DecodeNode(data) }

// Encode writes a record.
func (Rules) Encode(n *Node) ([]byte, error) { return json.Marshal(n) }

// Empty is a node compute has never seen: no CPU, no memory.
func (Rules) Empty() *Node { return &Node{} }

// View is the capacity with the figures in effect, and the usage.
func (Rules) View(n *Node, env types.Env) (any, any) { return n.View(defaultsOf(env)), n.Usage }

// Held flattens the usage.
func (Rules) Held(n *Node) types.Amounts { return n.Held() }

// WithHeld sets the usage from amounts.
func (Rules) WithHeld(n *Node, a types.Amounts) *Node { return n.WithHeld(a) }

// Settle validates a record after a usage write.
func (Rules) Settle(n *Node) (*Node, error) { return n, n.Validate() }

// LedgerView renders released usage.
func (Rules) LedgerView(a types.Amounts) any {
	return Amount{CPUMillis: a["cpu_millis"], MemoryBytes: a["memory_bytes"]}
}

// CheckLedgerKey accepts the components Held produces: cpu_millis and
// memory_bytes.
func (Rules) CheckLedgerKey(key string) error {
	if key == "cpu_millis" || key == "memory_bytes" {
		return nil
	}
	return types.Invalid("%s is not a compute usage component (cpu_millis, memory_bytes)", key)
}

// IsolationFigures are the CPU and memory released.
func (Rules) IsolationFigures(a types.Amounts) []types.Figure {
	return []types.Figure{{Name: "released_cpu_millis", Value: a["cpu_millis"]}, {Name: "released_memory_bytes", Value: a["memory_bytes"]}}
}

// AddNode builds a new node's record.
func (Rules) AddNode(request json.RawMessage, info *types.EngineInfo) (*Node, error) {
	return AddNode(request, info)
}

// Restore builds a record from set-node-resource-info.
func (Rules) Restore(capacity, usage json.RawMessage) (*Node, error) {
	return Restore(capacity, usage)
}

// Recompute sums the workloads and lists the disagreements.
func (Rules) Recompute(n *Node, workloads json.RawMessage, released types.Amounts) (*Node, []string, error) {
	list, err := DecodeWorkloads(workloads)
	if err != nil {
		return nil, nil, err
	}
	return n.Recompute(list, released)
}

// ParseRequest reads a workload request.
func (Rules) ParseRequest(raw json.RawMessage) (*WorkloadRequest, error) {
	return ParseWorkloadRequest(raw, false)
}

// DeployCapacity answers the capacity query for one node.
func (Rules) DeployCapacity(n *Node, w *WorkloadRequest, env types.Env) types.NodeCapacity {
	return n.DeployCapacity(w, defaultsOf(env), env.MaxDeployCount)
}

// Deploy admits count workloads, or refuses with the figures.
func (Rules) Deploy(n *Node, w *WorkloadRequest, count int, env types.Env) (*types.Deploy, error) {
	if err := n.Admit(w, count, defaultsOf(env), env.MaxDeployCount); err != nil {
		return nil, err
	}
	out := &types.Deploy{EnginesParams: make([]any, 0, count), WorkloadsResource: make([]any, 0, count)}
	for range count {
		out.EnginesParams = append(out.EnginesParams, struct{}{})
		wl := Workload(*w)
		out.WorkloadsResource = append(out.WorkloadsResource, &wl)
	}
	return out, nil
}

// Resize is a decoded calculate-realloc: a stored workload and a request
// of deltas.
type Resize struct {
	old   *Workload
	delta *WorkloadRequest
}

// ParseResize decodes calculate-realloc's workload and request.
func (Rules) ParseResize(workload, request json.RawMessage) (engine.Resize[*Node], error) {
	old, err := DecodeWorkload(workload)
	if err != nil {
		return nil, err
	}
	delta, err := ParseWorkloadRequest(request, true)
	if err != nil {
		return nil, err
	}
	return &Resize{old: old, delta: delta}, nil
}

// Plan resizes the workload by the request's deltas on n.
func (r *Resize) Plan(n *Node, env types.Env) (*types.Realloc, bool, error) {
	next, diff, grows, err := n.Realloc(r.old, r.delta, defaultsOf(env))
	if err != nil {
		return nil, false, err
	}
	return &types.Realloc{EngineParams: struct{}{}, DeltaResource: diff, WorkloadResource: next}, grows, nil
}

// MostIdle answers the node with the lowest used CPU fraction.
func (Rules) MostIdle(nodenames []string, load func() (map[string]*Node, types.Env, error)) (*types.MostIdle, error) {
	recs, env, err := load()
	if err != nil {
		return nil, err
	}
	d := defaultsOf(env)
	best, bestFrac := "", 0.0
	for _, name := range nodenames {
		n, ok := recs[name]
		if !ok {
			continue
		}
		s := n.Schedulable(d).CPUMillis
		if s <= 0 {
			continue
		}
		if f := float64(n.Usage.CPUMillis) / float64(s); best == "" || f < bestFrac {
			best, bestFrac = name, f
		}
	}
	if best == "" {
		return &types.MostIdle{Nodename: nodenames[0], Priority: 0}, nil
	}
	return &types.MostIdle{Nodename: best, Priority: 1}, nil
}

// MetricsDescription declares compute's gauges.
func (Rules) MetricsDescription() []types.MetricDescription {
	labels := []string{"podname", "nodename"}
	g := func(name, help string) types.MetricDescription {
		return types.MetricDescription{Name: name, Help: help, Type: "gauge", Labels: labels}
	}
	return []types.MetricDescription{
		g("compute_cpu_schedulable_millis", "millicores placement admits against: host times ratio"),
		g("compute_cpu_used_millis", "millicores workloads requested"),
		g("compute_memory_schedulable_bytes", "bytes of memory placement admits against: host times ratio"),
		g("compute_memory_used_bytes", "bytes of memory workloads requested"),
		g("compute_cpu_ratio", "CPU overcommit ratio in effect, in thousandths"),
		g("compute_memory_ratio", "memory overcommit ratio in effect, in thousandths"),
	}
}

// Metrics answers the node's samples.
func (Rules) Metrics(podname, nodename string, n *Node, env types.Env) []types.Metric {
	d := defaultsOf(env)
	cpu, mem := n.Ratios(d)
	s := n.Schedulable(d)
	base := "core.node." + strings.ReplaceAll(nodename, ".", "_") + ".compute."
	labels := []string{podname, nodename}
	m := func(name, suffix string, v int64) types.Metric {
		return types.Metric{Name: name, Labels: labels, Key: base + suffix, Value: strconv.FormatInt(v, 10)}
	}
	return []types.Metric{
		m("compute_cpu_schedulable_millis", "cpu.schedulable_millis", s.CPUMillis),
		m("compute_cpu_used_millis", "cpu.used_millis", n.Usage.CPUMillis),
		m("compute_memory_schedulable_bytes", "memory.schedulable_bytes", s.MemoryBytes),
		m("compute_memory_used_bytes", "memory.used_bytes", n.Usage.MemoryBytes),
		m("compute_cpu_ratio", "cpu.ratio", cpu.Ratio),
		m("compute_memory_ratio", "memory.ratio", mem.Ratio),
	}
}

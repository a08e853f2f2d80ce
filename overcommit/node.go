package overcommit

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/eru-extend/resources/types"
)

// Amount is CPU in millicores and memory in bytes: a host's resources or
// what workloads hold.
type Amount struct {
	CPUMillis   int64 `json:"cpu_millis"`
	MemoryBytes int64 `json:"memory_bytes"`
}

// Override is a node's own ratios; nil follows the default.
type Override struct {
	CPU    *int64 `json:"cpu,omitempty"`
	Memory *int64 `json:"memory,omitempty"`
}

// Node is one node's compute record. Version advances when its overrides
// change.
type Node struct {
	Capacity Amount   `json:"capacity"`
	Usage    Amount   `json:"usage"`
	Override Override `json:"override"`
	Version  int64    `json:"version"`
}

// Capacity is the capacity as the verbs answer it: the host, and the
// figures in effect (informational).
type Capacity struct {
	CPUMillis              int64  `json:"cpu_millis"`
	MemoryBytes            int64  `json:"memory_bytes"`
	CPURatio               int64  `json:"cpu_ratio"`
	MemoryRatio            int64  `json:"memory_ratio"`
	SchedulableCPUMillis   int64  `json:"schedulable_cpu_millis"`
	SchedulableMemoryBytes int64  `json:"schedulable_memory_bytes"`
	CPURatioSource         Source `json:"cpu_ratio_source"`
	MemoryRatioSource      Source `json:"memory_ratio_source"`
	OvercommitVersion      int64  `json:"overcommit_version"`
}

// Ratios are the ratios in effect on the node.
func (n *Node) Ratios(d Defaults) (cpu, memory Effective) {
	return effective(n.Override.CPU, d.CPU), effective(n.Override.Memory, d.Memory)
}

// Schedulable is host × ratio for both resources.
func (n *Node) Schedulable(d Defaults) Amount {
	cpu, mem := n.Ratios(d)
	return Amount{CPUMillis: schedulable(n.Capacity.CPUMillis, cpu.Ratio), MemoryBytes: schedulable(n.Capacity.MemoryBytes, mem.Ratio)}
}

// View is the capacity extended with the figures in effect.
func (n *Node) View(d Defaults) Capacity {
	cpu, mem := n.Ratios(d)
	s := n.Schedulable(d)
	return Capacity{
		CPUMillis: n.Capacity.CPUMillis, MemoryBytes: n.Capacity.MemoryBytes,
		CPURatio: cpu.Ratio, MemoryRatio: mem.Ratio,
		SchedulableCPUMillis: s.CPUMillis, SchedulableMemoryBytes: s.MemoryBytes,
		CPURatioSource: cpu.Source, MemoryRatioSource: mem.Source,
		OvercommitVersion: n.Version,
	}
}

// DecodeNode reads a stored record.
func DecodeNode(data []byte) (*Node, error) {
	n := &Node{}
	if err := json.Unmarshal(data, n); err != nil {
		return nil, fmt.Errorf("stored compute record: %w", err)
	}
	return n, nil
}

// Validate checks a record: nothing negative, nothing too large, overrides
// in range. Usage above schedulable is allowed: core already decided. A
// host figure is at most MaxHost; usage at most MaxUsage, the largest
// schedulable figure (MaxHost at the largest ratio), so that whatever
// placement admits can be written.
func (n *Node) Validate() error {
	for _, c := range []struct {
		what string
		cpu  bool
		v    int64
		most int64
	}{
		{"capacity cpu_millis", true, n.Capacity.CPUMillis, MaxHost}, {"capacity memory_bytes", false, n.Capacity.MemoryBytes, MaxHost},
		{"usage cpu_millis", true, n.Usage.CPUMillis, MaxUsage}, {"usage memory_bytes", false, n.Usage.MemoryBytes, MaxUsage},
	} {
		if c.v < 0 {
			return types.Invalid("%s would be %d, below zero", c.what, c.v)
		}
		if c.v > c.most {
			return types.Invalid("%s %d is too large (at most %s)", c.what, c.v, limitText(c.most, c.cpu))
		}
	}
	if o := n.Override.CPU; o != nil {
		if err := CheckRatio("cpu", *o); err != nil {
			return err
		}
	}
	if o := n.Override.Memory; o != nil {
		if err := CheckRatio("memory", *o); err != nil {
			return err
		}
	}
	return nil
}

// nodeRequest is a node resource as a person writes it: {"cpu": 16,
// "memory": "64G"}.
type nodeRequest struct {
	CPU       int64
	HasCPU    bool
	Memory    int64
	HasMemory bool
}

func parseNodeRequest(m map[string]json.RawMessage, signed bool) (*nodeRequest, error) {
	if err := types.RefuseUnknown(m, "compute request", "cpu", "memory"); err != nil {
		return nil, err
	}
	q := &nodeRequest{}
	if raw, ok := m["cpu"]; ok && !types.IsNull(raw) {
		v, err := parseMillisJSON(raw, signed)
		if err != nil {
			return nil, types.Invalid("%v", err)
		}
		q.CPU, q.HasCPU = v, true
	}
	if raw, ok := m["memory"]; ok && !types.IsNull(raw) {
		v, err := types.ParseSizeJSONAtMost(raw, signed, MaxHost)
		if err != nil {
			return nil, types.Invalid("memory: %v", err)
		}
		q.Memory, q.HasMemory = v, true
	}
	return q, nil
}

// snapshotKeys are the stored key names a rollback snapshot carries.
func isSnapshot(m map[string]json.RawMessage) bool {
	for _, k := range []string{"cpu_millis", "memory_bytes"} {
		var n json.Number
		if raw, ok := m[k]; !ok || json.Unmarshal(raw, &n) != nil {
			return false
		}
	}
	return true
}

// decodeAmount reads stored-form figures (extra informational keys of a
// capacity snapshot are ignored). Both stored keys must be there: anything
// else (a request such as {"cpu": 16}) would otherwise read as zero and
// wipe the node.
func decodeAmount(raw json.RawMessage, what string) (Amount, error) {
	m, err := types.DecodeObject(raw, what)
	if err != nil {
		return Amount{}, err
	}
	return decodeAmountMembers(m, raw, what)
}

// decodeAmountMembers is decodeAmount of an object already split into its
// members m: m says which keys it carries, raw is decoded whole.
func decodeAmountMembers(m map[string]json.RawMessage, raw json.RawMessage, what string) (Amount, error) {
	for _, k := range []string{"cpu_millis", "memory_bytes"} {
		if _, ok := m[k]; !ok {
			return Amount{}, types.Invalid("%s: not a stored compute resource: %q is missing (want {\"cpu_millis\": N, \"memory_bytes\": N})", what, k)
		}
	}
	var a Amount
	if err := json.Unmarshal(raw, &a); err != nil {
		return Amount{}, types.Invalid("%s: not a stored compute resource: %v", what, err)
	}
	// Bounded so that adding one to a record's figure cannot wrap.
	for _, f := range []struct {
		field string
		cpu   bool
		v     int64
	}{{"cpu_millis", true, a.CPUMillis}, {"memory_bytes", false, a.MemoryBytes}} {
		if f.v > MaxUsage || f.v < -MaxUsage {
			return Amount{}, types.Invalid("%s: %s %d is out of range (at most %s, either way)", what, f.field, f.v, limitText(MaxUsage, f.cpu))
		}
	}
	return a, nil
}

// AddNode builds a new node's record: the request's cpu and memory, else
// the engine's compute resource, else its NCPU and MemTotal.
func AddNode(request json.RawMessage, info *types.EngineInfo) (*Node, error) {
	m, err := types.DecodeObject(request, "resource")
	if err != nil {
		return nil, err
	}
	q, err := parseNodeRequest(m, false)
	if err != nil {
		return nil, err
	}
	if info != nil && (!q.HasCPU || !q.HasMemory) {
		if raw := info.Resources["compute"]; len(raw) > 0 && !types.IsNull(json.RawMessage(raw)) {
			rm, err := types.DecodeObject(json.RawMessage(raw), "info.Resources.compute")
			if err != nil {
				return nil, err
			}
			reported, err := parseNodeRequest(rm, false)
			if err != nil {
				return nil, types.Invalid("info.Resources.compute: %v", err)
			}
			if !q.HasCPU && reported.HasCPU {
				q.CPU, q.HasCPU = reported.CPU, true
			}
			if !q.HasMemory && reported.HasMemory {
				q.Memory, q.HasMemory = reported.Memory, true
			}
		}
		if !q.HasCPU && info.NCPU > 0 {
			if info.NCPU > MaxHost/1000 {
				// Checked before the multiplication, which would wrap.
				return nil, types.Invalid("info.NCPU %d is too large (at most %s)", info.NCPU, maxHostCPUs())
			}
			q.CPU, q.HasCPU = info.NCPU*1000, true
		}
		if !q.HasMemory && info.MemTotal > 0 {
			q.Memory, q.HasMemory = info.MemTotal, true
		}
	}
	if !q.HasCPU || !q.HasMemory {
		unknown := "cpu and memory are"
		if q.HasCPU {
			unknown = "memory is"
		} else if q.HasMemory {
			unknown = "cpu is"
		}
		return nil, types.Invalid("the node's %s unknown: give them ({\"cpu\": 16, \"memory\": \"64G\"}) or let the engine report them", unknown)
	}
	n := &Node{Capacity: Amount{CPUMillis: q.CPU, MemoryBytes: q.Memory}}
	return n, n.Validate()
}

// checkShrink refuses a delta that takes the host's CPU or memory below
// zero, naming the amounts. (Usage above the host is overcommit's business:
// schedulable is host × ratio, and a host shrunk below what is reserved
// stops new placement there, as a lowered ratio does, and evicts nothing.)
func checkShrink(before, after Amount) error {
	if after.CPUMillis < 0 {
		return types.Errorf(types.FailedPrecondition, "cpu: capacity %d millicores %+d would be %d, below zero",
			before.CPUMillis, after.CPUMillis-before.CPUMillis, after.CPUMillis)
	}
	if after.MemoryBytes < 0 {
		return types.Errorf(types.FailedPrecondition, "memory: capacity %d bytes %+d would be %d, below zero",
			before.MemoryBytes, after.MemoryBytes-before.MemoryBytes, after.MemoryBytes)
	}
	return nil
}

// apply replaces (absolute) or adds/subtracts (delta) the given figures.
func apply(cur, change Amount, hasCPU, hasMem, delta, incr bool) Amount {
	sign := int64(1)
	if !incr {
		sign = -1
	}
	if hasCPU {
		if delta {
			cur.CPUMillis += sign * change.CPUMillis
		} else {
			cur.CPUMillis = change.CPUMillis
		}
	}
	if hasMem {
		if delta {
			cur.MemoryBytes += sign * change.MemoryBytes
		} else {
			cur.MemoryBytes = change.MemoryBytes
		}
	}
	return cur
}

// Restore builds a record from set-node-resource-info, verbatim: core
// replays there what get-node-resource-info answered, to undo a remove-node
// that failed elsewhere. The capacity it answered names each ratio's source
// and the overrides' version, so the node's own overrides come back as they
// were (a ratio whose source was the default stays the default, whatever the
// default is now).
func Restore(capacity, usage json.RawMessage) (*Node, error) {
	if types.IsNull(capacity) {
		return nil, types.Invalid("capacity: missing")
	}
	c, err := decodeAmount(capacity, "capacity")
	if err != nil {
		return nil, err
	}
	var view Capacity
	if err := json.Unmarshal(capacity, &view); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "overcommit_version" && strings.HasPrefix(te.Value, "number") {
			return nil, types.Invalid("capacity: overcommit_version %s is not an integer from 0 to 2^53 (%d)", strings.TrimPrefix(te.Value, "number "), int64(types.MaxExact))
		}
		return nil, types.Invalid("capacity: the figures in effect are not readable: %v", err)
	}
	if err := checkVersion(view.OvercommitVersion); err != nil {
		return nil, types.Wrap(types.InvalidArgument, err, "capacity")
	}
	n := &Node{Capacity: c, Version: view.OvercommitVersion}
	for _, r := range []struct {
		what   string
		source Source
		ratio  int64
		dst    **int64
	}{{"cpu", view.CPURatioSource, view.CPURatio, &n.Override.CPU}, {"memory", view.MemoryRatioSource, view.MemoryRatio, &n.Override.Memory}} {
		switch r.source {
		case SourceNode:
			// The node's own ratio is the snapshot's <what>_ratio: one
			// missing reads as 0, which no ratio is.
			if err := CheckRatio(r.what, r.ratio); err != nil {
				return nil, types.Wrap(types.InvalidArgument, err, fmt.Sprintf("capacity: %s_ratio_source is %s, so %s_ratio is the node's own ratio", r.what, SourceNode, r.what))
			}
			ratio := r.ratio
			*r.dst = &ratio
		case SourceDefault, "":
		default:
			return nil, types.Invalid("capacity: %s_ratio_source %q is neither %s nor %s", r.what, r.source, SourceDefault, SourceNode)
		}
	}
	if !types.IsNull(usage) {
		if n.Usage, err = decodeAmount(usage, "usage"); err != nil {
			return nil, err
		}
	}
	return n, n.Validate()
}

// Held flattens the usage for the node registry.
func (n *Node) Held() types.Amounts {
	return types.Amounts{"cpu_millis": n.Usage.CPUMillis, "memory_bytes": n.Usage.MemoryBytes}
}

// WithHeld sets the usage from amounts.
func (n *Node) WithHeld(a types.Amounts) *Node {
	out := *n
	out.Usage = Amount{CPUMillis: a["cpu_millis"], MemoryBytes: a["memory_bytes"]}
	return &out
}

// Recompute sums the workloads' requests, less what isolation released, and
// lists the disagreements with the stored usage. The record it returns
// carries that sum, unvalidated.
func (n *Node) Recompute(ws []*Workload, released types.Amounts) (*Node, []string, error) {
	sum, err := sumWorkloads(ws)
	if err != nil {
		return nil, nil, err
	}
	sum.CPUMillis = max(0, sum.CPUMillis-released["cpu_millis"])
	sum.MemoryBytes = max(0, sum.MemoryBytes-released["memory_bytes"])
	diffs := []string{}
	if sum.CPUMillis != n.Usage.CPUMillis {
		diffs = append(diffs, fmt.Sprintf("cpu: stored usage %d millicores, workloads hold %d", n.Usage.CPUMillis, sum.CPUMillis))
	}
	if sum.MemoryBytes != n.Usage.MemoryBytes {
		diffs = append(diffs, fmt.Sprintf("memory: stored usage %d bytes, workloads hold %d", n.Usage.MemoryBytes, sum.MemoryBytes))
	}
	out := *n
	out.Usage = sum
	return &out, diffs, nil
}

// checkVersion refuses an overrides version no record may keep: below 0, or
// past 2^53, which core's float64 decoding would change.
func checkVersion(v int64) error {
	if v < 0 || v > types.MaxExact {
		return types.Invalid("overcommit_version %d is out of range: want 0 to 2^53 (%d)", v, int64(types.MaxExact))
	}
	return nil
}

// nextVersion is the overrides version after a change of node's overrides:
// one more, refused at 2^53.
func nextVersion(node string, v int64) (int64, error) {
	if v >= types.MaxExact {
		return 0, types.Errorf(types.FailedPrecondition, "node %s compute record: overcommit version %d is at its limit, 2^53: it cannot advance", node, v)
	}
	return v + 1, nil
}

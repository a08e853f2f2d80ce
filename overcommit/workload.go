package overcommit

import (
	"encoding/json"

	"github.com/eru-extend/resources/types"
)

// Workload is a workload's compute resource in stored form.
type Workload struct {
	CPURequestMillis int64 `json:"cpu_request_millis"`
	CPULimitMillis   int64 `json:"cpu_limit_millis"`
	MemoryRequest    int64 `json:"memory_request"`
	MemoryLimit      int64 `json:"memory_limit"`
}

// WorkloadRequest is what a person asks of compute for one workload.
type WorkloadRequest Workload

// workloadKeys are the keys a workload request may carry.
func workloadKeys() []string {
	return []string{"cpu", "memory", "cpu-request", "cpu-limit", "memory-request", "memory-limit"}
}

// ParseWorkloadRequest reads a workload request: cpu and memory set request
// and limit; the -request and -limit keys set each; a limit without a
// request sets the request; a limit below its request is raised to it.
// signed allows negative values: a realloc's deltas, taken key by key (a
// limit delta alone leaves the request) and not reconciled here.
func ParseWorkloadRequest(raw json.RawMessage, signed bool) (*WorkloadRequest, error) {
	m, err := types.DecodeObject(raw, "workload request")
	if err != nil {
		return nil, err
	}
	if err := types.RefuseUnknown(m, "workload request", workloadKeys()...); err != nil {
		return nil, err
	}
	w := &WorkloadRequest{}
	var hasCPUReq, hasCPULim, hasMemReq, hasMemLim bool
	cpu := func(key string, dst *int64, has *bool) error {
		if v, ok := m[key]; ok && !types.IsNull(v) {
			n, err := parseMillisJSON(v, signed)
			if err != nil {
				return types.Invalid("%s: %v", key, err)
			}
			*dst, *has = n, true
		}
		return nil
	}
	mem := func(key string, dst *int64, has *bool) error {
		if v, ok := m[key]; ok && !types.IsNull(v) {
			n, err := types.ParseSizeJSONAtMost(v, signed, MaxHost)
			if err != nil {
				return types.Invalid("%s: %v", key, err)
			}
			*dst, *has = n, true
		}
		return nil
	}
	for _, step := range []error{
		cpu("cpu", &w.CPURequestMillis, &hasCPUReq),
		cpu("cpu", &w.CPULimitMillis, &hasCPULim),
		mem("memory", &w.MemoryRequest, &hasMemReq),
		mem("memory", &w.MemoryLimit, &hasMemLim),
		cpu("cpu-request", &w.CPURequestMillis, &hasCPUReq),
		cpu("cpu-limit", &w.CPULimitMillis, &hasCPULim),
		mem("memory-request", &w.MemoryRequest, &hasMemReq),
		mem("memory-limit", &w.MemoryLimit, &hasMemLim),
	} {
		if step != nil {
			return nil, step
		}
	}
	// A realloc's deltas are added as they are: a limit delta alone
	// changes the limit, not the request (the reservation); the result is
	// reconciled (Realloc).
	if !signed {
		if hasCPULim && !hasCPUReq {
			w.CPURequestMillis = w.CPULimitMillis
		}
		if hasMemLim && !hasMemReq {
			w.MemoryRequest = w.MemoryLimit
		}
		w.reconcile()
	}
	return w, nil
}

// reconcile raises each limit to at least its request.
func (w *WorkloadRequest) reconcile() {
	w.CPULimitMillis = max(w.CPULimitMillis, w.CPURequestMillis)
	w.MemoryLimit = max(w.MemoryLimit, w.MemoryRequest)
}

// DecodeWorkload reads a stored workload resource; null is an empty one.
func DecodeWorkload(raw json.RawMessage) (*Workload, error) {
	w := &Workload{}
	if types.IsNull(raw) {
		return w, nil
	}
	if err := json.Unmarshal(raw, w); err != nil {
		return nil, types.Invalid("workload resource: %v", err)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"cpu_request_millis", w.CPURequestMillis}, {"cpu_limit_millis", w.CPULimitMillis}, {"memory_request", w.MemoryRequest}, {"memory_limit", w.MemoryLimit}} {
		if f.v > MaxHost || f.v < -MaxHost {
			return nil, types.Invalid("workload resource: %s %d is out of range: want -%d to %d", f.name, f.v, int64(MaxHost), int64(MaxHost))
		}
	}
	return w, nil
}

// DecodeWorkloads reads a list of stored workload resources, skipping nulls.
func DecodeWorkloads(raw json.RawMessage) ([]*Workload, error) {
	return types.DecodeEach(raw, "workloads_resource", DecodeWorkload)
}

// sumWorkloads adds up the workloads' requests.
func sumWorkloads(ws []*Workload) (Amount, error) {
	var a Amount
	for _, w := range ws {
		a.CPUMillis += w.CPURequestMillis
		a.MemoryBytes += w.MemoryRequest
		if a.CPUMillis > types.MaxExact || a.MemoryBytes > types.MaxExact || a.CPUMillis < -types.MaxExact || a.MemoryBytes < -types.MaxExact {
			return Amount{}, types.Invalid("workloads hold more than 2^53 of cpu or memory")
		}
	}
	return a, nil
}

package overcommit

import (
	"strconv"

	"github.com/eru-extend/resources/types"
)

// DeployCapacity is how many more workloads of w the node admits: the
// smaller of what is left of schedulable CPU and memory over the request,
// for the resources it asks, never negative, capped at maxDeploy.
func (n *Node) DeployCapacity(w *WorkloadRequest, d Defaults, maxDeploy int) types.NodeCapacity {
	s := n.Schedulable(d)
	capacity := int64(maxDeploy)
	if w.CPURequestMillis > 0 {
		capacity = min(capacity, max(0, s.CPUMillis-n.Usage.CPUMillis)/w.CPURequestMillis)
	}
	if w.MemoryRequest > 0 {
		capacity = min(capacity, max(0, s.MemoryBytes-n.Usage.MemoryBytes)/w.MemoryRequest)
	}
	// Usage above schedulable (a ratio lowered under what is reserved)
	// still reads as a full node: core takes usage as a fraction in 0..1.
	cpuUsed, memUsed := used(n.Usage.CPUMillis, s.CPUMillis), used(n.Usage.MemoryBytes, s.MemoryBytes)
	// rate follows the resource usage comes from; when both are as used,
	// the one the request takes more of (a memory-only request on a node
	// half used in both must not read as costing nothing).
	cpuRate, memRate := fraction(w.CPURequestMillis, s.CPUMillis), fraction(w.MemoryRequest, s.MemoryBytes)
	usage, rate := cpuUsed, cpuRate
	if memUsed > cpuUsed || memUsed == cpuUsed && memRate > cpuRate {
		usage, rate = memUsed, memRate
	}
	return types.NodeCapacity{Capacity: int(capacity), Usage: usage, Rate: rate, Weight: 1}
}

// used is the used fraction of a resource, at most 1: usage on nothing
// schedulable (a host shrunk to no CPU or memory under what is reserved) is
// a full node too, not an empty one.
func used(part, whole int64) float64 {
	if whole <= 0 && part > 0 {
		return 1
	}
	return min(1, fraction(part, whole))
}

func fraction(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// Admit checks that count workloads of w fit what is left of schedulable,
// and refuses with the figures when they do not.
func (n *Node) Admit(w *WorkloadRequest, count int, d Defaults, maxDeploy int) error {
	if count <= 0 {
		return types.Invalid("deploy_count %d: want at least 1", count)
	}
	if count > maxDeploy {
		return types.Errorf(types.ResourceExhausted, "deploy_count %d is above scheduler.max_deploy_count %d", count, maxDeploy)
	}
	return n.fits(Amount{CPUMillis: types.MulSat(w.CPURequestMillis, int64(count)), MemoryBytes: types.MulSat(w.MemoryRequest, int64(count))}, d,
		func(resource string) string {
			each := w.CPURequestMillis
			if resource == "memory" {
				each = w.MemoryRequest
			}
			return plural(count) + " x " + strconv.FormatInt(each, 10)
		})
}

// fits refuses when more would take usage past schedulable; why says what
// asks for the resource ("cpu" or "memory").
func (n *Node) fits(more Amount, d Defaults, why func(resource string) string) error {
	s := n.Schedulable(d)
	cpu, mem := n.Ratios(d)
	if more.CPUMillis > 0 && !within(n.Usage.CPUMillis, more.CPUMillis, s.CPUMillis) {
		return types.Errorf(types.ResourceExhausted, "cpu: need %d millicores (%s), have %d left: %d used of %d schedulable (host %d millicores x ratio %d)",
			more.CPUMillis, why("cpu"), max(0, s.CPUMillis-n.Usage.CPUMillis), n.Usage.CPUMillis, s.CPUMillis, n.Capacity.CPUMillis, cpu.Ratio)
	}
	if more.MemoryBytes > 0 && !within(n.Usage.MemoryBytes, more.MemoryBytes, s.MemoryBytes) {
		return types.Errorf(types.ResourceExhausted, "memory: need %d bytes (%s), have %d left: %d used of %d schedulable (host %d bytes x ratio %d)",
			more.MemoryBytes, why("memory"), max(0, s.MemoryBytes-n.Usage.MemoryBytes), n.Usage.MemoryBytes, s.MemoryBytes, n.Capacity.MemoryBytes, mem.Ratio)
	}
	return nil
}

// within reports whether used plus more stays at or below limit (a sum
// that overflows does not).
func within(used, more, limit int64) bool {
	sum, ok := types.AddInt64(used, more)
	return ok && sum <= limit
}

func plural(count int) string {
	if count == 1 {
		return "1 workload"
	}
	return strconv.Itoa(count) + " workloads"
}

// Realloc adds a request's deltas to a workload, refuses a result below
// zero, and admits growth against what is left of schedulable. It returns
// the new workload, the change, and whether the change grows the workload.
func (n *Node) Realloc(old *Workload, delta *WorkloadRequest, d Defaults) (*Workload, *Workload, bool, error) {
	next := &WorkloadRequest{
		CPURequestMillis: old.CPURequestMillis + delta.CPURequestMillis,
		CPULimitMillis:   old.CPULimitMillis + delta.CPULimitMillis,
		MemoryRequest:    old.MemoryRequest + delta.MemoryRequest,
		MemoryLimit:      old.MemoryLimit + delta.MemoryLimit,
	}
	for _, f := range []struct {
		what string
		cpu  bool
		v    int64
	}{{"cpu request", true, next.CPURequestMillis}, {"cpu limit", true, next.CPULimitMillis}, {"memory request", false, next.MemoryRequest}, {"memory limit", false, next.MemoryLimit}} {
		if f.v < 0 {
			return nil, nil, false, types.Invalid("%s would go below zero (%d)", f.what, f.v)
		}
		if f.v > MaxHost {
			return nil, nil, false, types.Invalid("%s would be %d, too large (at most %s)", f.what, f.v, limitText(MaxHost, f.cpu))
		}
	}
	next.reconcile()
	grow := Amount{CPUMillis: max(0, next.CPURequestMillis-old.CPURequestMillis), MemoryBytes: max(0, next.MemoryRequest-old.MemoryRequest)}
	if err := n.fits(grow, d, func(string) string { return "growing the workload" }); err != nil {
		return nil, nil, false, err
	}
	nw := Workload(*next)
	diff := &Workload{
		CPURequestMillis: nw.CPURequestMillis - old.CPURequestMillis,
		CPULimitMillis:   nw.CPULimitMillis - old.CPULimitMillis,
		MemoryRequest:    nw.MemoryRequest - old.MemoryRequest,
		MemoryLimit:      nw.MemoryLimit - old.MemoryLimit,
	}
	return &nw, diff, grow != Amount{}, nil
}

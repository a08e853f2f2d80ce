package overcommit

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// host16 is a node of 16 cores and 64 GiB holding usage.
func host16(usage Amount) *Node {
	return &Node{Capacity: Amount{CPUMillis: 16000, MemoryBytes: 64 * gib}, Usage: usage}
}

var (
	oneToOne = Defaults{CPU: 1000, Memory: 1000}
	cpuAt4x  = Defaults{CPU: 4000, Memory: 1000, Version: 1}
	cpuAt2x  = Defaults{CPU: 2000, Memory: 1000, Version: 2}
)

func TestDeployCapacity(t *testing.T) {
	for _, c := range []struct {
		name      string
		node      *Node
		request   WorkloadRequest
		defaults  Defaults
		maxDeploy int
		want      types.NodeCapacity
	}{
		{name: "16 cores at 4x take 64 one-CPU workloads", node: host16(Amount{}), request: WorkloadRequest{CPURequestMillis: 1000}, defaults: cpuAt4x, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 64, Usage: 0, Rate: 1.0 / 64, Weight: 1}},
		{name: "what is used is taken off schedulable", node: host16(Amount{CPUMillis: 60000}), request: WorkloadRequest{CPURequestMillis: 1000}, defaults: cpuAt4x, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 4, Usage: 60000.0 / 64000, Rate: 1.0 / 64, Weight: 1}},
		{name: "a remainder smaller than one workload does not count", node: host16(Amount{CPUMillis: 63001}), request: WorkloadRequest{CPURequestMillis: 1000}, defaults: cpuAt4x, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 0, Usage: 63001.0 / 64000, Rate: 1.0 / 64, Weight: 1}},
		{name: "the smaller of cpu and memory wins", node: host16(Amount{}), request: WorkloadRequest{CPURequestMillis: 1000, MemoryRequest: 16 * gib}, defaults: cpuAt4x, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 4, Usage: 0, Rate: 0.25, Weight: 1}},
		{name: "a memory-only request is not bounded by a full cpu", node: host16(Amount{CPUMillis: 16000}), request: WorkloadRequest{MemoryRequest: 8 * gib}, defaults: oneToOne, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 8, Usage: 1, Rate: 0, Weight: 1}},
		{name: "a ratio lowered under what is used leaves no capacity, never a negative one", node: host16(Amount{CPUMillis: 60000}), request: WorkloadRequest{CPURequestMillis: 1000}, defaults: cpuAt2x, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 0, Usage: 1, Rate: 1.0 / 32, Weight: 1}},
		{name: "the capacity is capped at max_deploy_count", node: host16(Amount{}), request: WorkloadRequest{CPURequestMillis: 1}, defaults: cpuAt4x, maxDeploy: 100,
			want: types.NodeCapacity{Capacity: 100, Usage: 0, Rate: 1.0 / 64000, Weight: 1}},
		{name: "a request asking neither cpu nor memory answers max_deploy_count", node: host16(Amount{CPUMillis: 8000}), request: WorkloadRequest{}, defaults: oneToOne, maxDeploy: 777,
			want: types.NodeCapacity{Capacity: 777, Usage: 0.5, Rate: 0, Weight: 1}},
		{name: "a limit alone does not consume capacity", node: host16(Amount{}), request: WorkloadRequest{CPULimitMillis: 99000}, defaults: oneToOne, maxDeploy: 50,
			want: types.NodeCapacity{Capacity: 50, Usage: 0, Rate: 0, Weight: 1}},
		{name: "usage is the more used resource and rate follows it: memory", node: host16(Amount{CPUMillis: 4000, MemoryBytes: 32 * gib}), request: WorkloadRequest{CPURequestMillis: 1000, MemoryRequest: 4 * gib}, defaults: oneToOne, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 8, Usage: 0.5, Rate: 4.0 / 64, Weight: 1}},
		{name: "usage is the more used resource and rate follows it: cpu", node: host16(Amount{CPUMillis: 12000, MemoryBytes: 16 * gib}), request: WorkloadRequest{CPURequestMillis: 2000, MemoryRequest: 4 * gib}, defaults: oneToOne, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 2, Usage: 0.75, Rate: 0.125, Weight: 1}},
		{name: "when both are as used, rate follows what the request takes more of", node: host16(Amount{CPUMillis: 8000, MemoryBytes: 32 * gib}), request: WorkloadRequest{MemoryRequest: 16 * gib}, defaults: oneToOne, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 2, Usage: 0.5, Rate: 0.25, Weight: 1}},
		{name: "when both are as used and the request takes as much of each, rate is that share", node: host16(Amount{CPUMillis: 8000, MemoryBytes: 32 * gib}), request: WorkloadRequest{CPURequestMillis: 4000, MemoryRequest: 16 * gib}, defaults: oneToOne, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 2, Usage: 0.5, Rate: 0.25, Weight: 1}},
		{name: "the node's override wins over the default", node: &Node{Capacity: Amount{16000, 64 * gib}, Override: Override{CPU: ptr(500)}}, request: WorkloadRequest{CPURequestMillis: 1000}, defaults: cpuAt4x, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 8, Usage: 0, Rate: 1.0 / 8, Weight: 1}},
		{name: "a memory ratio raises schedulable memory", node: host16(Amount{}), request: WorkloadRequest{MemoryRequest: 32 * gib}, defaults: Defaults{CPU: 1000, Memory: 1500}, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 3, Usage: 0, Rate: 1.0 / 3, Weight: 1}},
		{name: "a host shrunk to no memory under what is reserved reads as full, not as empty", node: &Node{Capacity: Amount{16000, 0}, Usage: Amount{4000, 8 * gib}}, request: WorkloadRequest{CPURequestMillis: 1000}, defaults: oneToOne, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 12, Usage: 1, Rate: 0, Weight: 1}},
		{name: "a node compute has never seen takes nothing that asks for cpu", node: &Node{}, request: WorkloadRequest{CPURequestMillis: 1}, defaults: oneToOne, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 0, Usage: 0, Rate: 0, Weight: 1}},
		{name: "a node compute has never seen takes anything that asks for nothing", node: &Node{}, request: WorkloadRequest{}, defaults: oneToOne, maxDeploy: 10000,
			want: types.NodeCapacity{Capacity: 10000, Usage: 0, Rate: 0, Weight: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.node.DeployCapacity(&c.request, c.defaults, c.maxDeploy)
			require.Equal(t, c.want.Capacity, got.Capacity, "capacity")
			require.InDelta(t, c.want.Usage, got.Usage, 1e-12, "usage")
			require.InDelta(t, c.want.Rate, got.Rate, 1e-12, "rate")
			require.Equal(t, 1.0, got.Weight, "weight")
		})
	}
}

func TestAdmit(t *testing.T) {
	one := &WorkloadRequest{CPURequestMillis: 1000, CPULimitMillis: 1000}
	t.Run("as many workloads as schedulable holds are admitted", func(t *testing.T) {
		require.NoError(t, host16(Amount{}).Admit(one, 64, cpuAt4x, 10000))
	})
	t.Run("one more is refused with the figures", func(t *testing.T) {
		err := host16(Amount{}).Admit(one, 65, cpuAt4x, 10000)
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
		require.EqualError(t, err, "cpu: need 65000 millicores (65 workloads x 1000), have 64000 left: 0 used of 64000 schedulable (host 16000 millicores x ratio 4000)")
	})
	t.Run("a node reserved past a lowered ratio refuses even one, naming what is used", func(t *testing.T) {
		err := host16(Amount{CPUMillis: 60000}).Admit(one, 1, cpuAt2x, 10000)
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
		require.EqualError(t, err, "cpu: need 1000 millicores (1 workload x 1000), have 0 left: 60000 used of 32000 schedulable (host 16000 millicores x ratio 2000)")
	})
	t.Run("memory is refused with its figures", func(t *testing.T) {
		w := &WorkloadRequest{MemoryRequest: 8 * gib, MemoryLimit: 8 * gib}
		err := host16(Amount{MemoryBytes: 60 * gib}).Admit(w, 1, oneToOne, 10000)
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
		require.EqualError(t, err, "memory: need 8589934592 bytes (1 workload x 8589934592), have 4294967296 left: 64424509440 used of 68719476736 schedulable (host 68719476736 bytes x ratio 1000)")
	})
	t.Run("a request asking nothing is admitted on any node", func(t *testing.T) {
		require.NoError(t, (&Node{}).Admit(&WorkloadRequest{}, 5, oneToOne, 10000))
	})
	t.Run("a deploy count of zero is invalid", func(t *testing.T) {
		err := host16(Amount{}).Admit(one, 0, oneToOne, 10000)
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		require.EqualError(t, err, "deploy_count 0: want at least 1")
	})
	t.Run("a deploy count past max_deploy_count is refused", func(t *testing.T) {
		err := host16(Amount{}).Admit(&WorkloadRequest{}, 11, oneToOne, 10)
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
		require.EqualError(t, err, "deploy_count 11 is above scheduler.max_deploy_count 10")
	})
	t.Run("a count times a request past int64 is refused, not wrapped around", func(t *testing.T) {
		huge := &WorkloadRequest{CPURequestMillis: MaxHost, MemoryRequest: MaxHost}
		node := &Node{Capacity: Amount{MaxHost, MaxHost}, Override: Override{CPU: ptr(MaxRatio), Memory: ptr(MaxRatio)}}
		err := node.Admit(huge, math.MaxInt32, oneToOne, math.MaxInt)
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
		require.ErrorContains(t, err, "cpu: need ")
	})
}

func TestRealloc(t *testing.T) {
	// 16 cores at 4x (64000 schedulable) with 62000 used; 4 GiB at 1x with
	// 3 GiB used; the workload holds 2 CPUs and 1 GiB.
	node := func() *Node {
		return &Node{Capacity: Amount{16000, 4 * gib}, Usage: Amount{62000, 3 * gib}, Override: Override{CPU: ptr(4000)}}
	}
	old := Workload{CPURequestMillis: 2000, CPULimitMillis: 2000, MemoryRequest: gib, MemoryLimit: gib}
	for _, c := range []struct {
		name     string
		node     *Node
		delta    WorkloadRequest
		next     Workload
		diff     Workload
		grows    bool
		err      string
		errClass types.Class
		defaults Defaults
		workload *Workload
	}{
		{name: "growing within schedulable is admitted", delta: WorkloadRequest{1000, 1000, 0, 0},
			next: Workload{3000, 3000, gib, gib}, diff: Workload{1000, 1000, 0, 0}, grows: true},
		{name: "growing exactly to schedulable is admitted", delta: WorkloadRequest{2000, 2000, gib, gib},
			next: Workload{4000, 4000, 2 * gib, 2 * gib}, diff: Workload{2000, 2000, gib, gib}, grows: true},
		{name: "growing past schedulable cpu is refused with the figures", delta: WorkloadRequest{3000, 3000, 0, 0}, errClass: types.ResourceExhausted,
			err: "cpu: need 3000 millicores (growing the workload), have 2000 left: 62000 used of 64000 schedulable (host 16000 millicores x ratio 4000)"},
		{name: "growing past schedulable memory is refused with the figures", delta: WorkloadRequest{0, 0, 2 * gib, 2 * gib}, errClass: types.ResourceExhausted,
			err: "memory: need 2147483648 bytes (growing the workload), have 1073741824 left: 3221225472 used of 4294967296 schedulable (host 4294967296 bytes x ratio 1000)"},
		{name: "shrinking answers a negative delta", delta: WorkloadRequest{-1000, -1000, -gib / 2, -gib / 2},
			next: Workload{1000, 1000, gib / 2, gib / 2}, diff: Workload{-1000, -1000, -gib / 2, -gib / 2}},
		{name: "shrinking to nothing is allowed", delta: WorkloadRequest{-2000, -2000, -gib, -gib},
			next: Workload{}, diff: Workload{-2000, -2000, -gib, -gib}},
		{name: "shrinking below zero is refused", delta: WorkloadRequest{-3000, -3000, 0, 0}, errClass: types.InvalidArgument,
			err: "cpu request would go below zero (-1000)"},
		{name: "a memory limit below zero is refused", delta: WorkloadRequest{0, 0, 0, -2 * gib}, errClass: types.InvalidArgument,
			err: "memory limit would go below zero (-1073741824)"},
		{name: "shrinking passes on a node reserved past its ratio", node: &Node{Capacity: Amount{16000, 4 * gib}, Usage: Amount{60000, 0}}, defaults: cpuAt2x,
			delta: WorkloadRequest{-1000, -1000, 0, 0}, next: Workload{1000, 1000, gib, gib}, diff: Workload{-1000, -1000, 0, 0}},
		{name: "growing on a node reserved past its ratio is refused", node: &Node{Capacity: Amount{16000, 4 * gib}, Usage: Amount{60000, 0}}, defaults: cpuAt2x,
			delta: WorkloadRequest{1, 1, 0, 0}, errClass: types.ResourceExhausted, err: "cpu: need 1 millicores (growing the workload), have 0 left: 60000 used of 32000 schedulable"},
		{name: "raising only the limit is not growth: limits are not admitted", delta: WorkloadRequest{0, 99000, 0, 0},
			next: Workload{2000, 101000, gib, gib}, diff: Workload{0, 99000, 0, 0}},
		{name: "a limit lowered under the request is raised back to it", delta: WorkloadRequest{0, -1000, 0, 0},
			next: old, diff: Workload{}},
		{name: "a request raised over the limit takes the limit with it", delta: WorkloadRequest{500, 0, 0, 0},
			next: Workload{2500, 2500, gib, gib}, diff: Workload{500, 500, 0, 0}, grows: true},
		{name: "a workload with nothing grows from nothing", workload: &Workload{}, delta: WorkloadRequest{1000, 1000, 0, 0},
			next: Workload{1000, 1000, 0, 0}, diff: Workload{1000, 1000, 0, 0}, grows: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := c.node
			if n == nil {
				n = node()
			}
			d := c.defaults
			if d == (Defaults{}) {
				d = oneToOne
			}
			w := old
			if c.workload != nil {
				w = *c.workload
			}
			next, diff, grows, err := n.Realloc(&w, &c.delta, d)
			if c.err != "" {
				require.Equal(t, c.errClass, types.ClassOf(err))
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.next, *next, "the new workload")
			require.Equal(t, c.diff, *diff, "delta_resource")
			require.Equal(t, c.grows, grows, "grows")
		})
	}
}

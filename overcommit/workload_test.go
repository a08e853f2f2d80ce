package overcommit

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestParseWorkloadRequest(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     string
		signed bool
		want   WorkloadRequest
		err    string
	}{
		{name: "cpu sets request and limit", in: `{"cpu": 1.5}`, want: WorkloadRequest{CPURequestMillis: 1500, CPULimitMillis: 1500}},
		{name: "memory sets request and limit", in: `{"memory": "1G"}`, want: WorkloadRequest{MemoryRequest: gib, MemoryLimit: gib}},
		{name: "cpu and memory together", in: `{"cpu": 2, "memory": "4G"}`, want: WorkloadRequest{2000, 2000, 4 * gib, 4 * gib}},
		{name: "a tenth of a CPU given as a JSON number is exactly 100 millicores", in: `{"cpu": 0.1}`, want: WorkloadRequest{CPURequestMillis: 100, CPULimitMillis: 100}},
		{name: "request and limit are set each", in: `{"cpu-request": 1, "cpu-limit": 2, "memory-request": "1G", "memory-limit": "2G"}`,
			want: WorkloadRequest{1000, 2000, gib, 2 * gib}},
		{name: "a cpu limit below its request is raised to it", in: `{"cpu-request": 2, "cpu-limit": 1}`, want: WorkloadRequest{CPURequestMillis: 2000, CPULimitMillis: 2000}},
		{name: "a memory limit below its request is raised to it", in: `{"memory-request": "2G", "memory-limit": "1G"}`, want: WorkloadRequest{MemoryRequest: 2 * gib, MemoryLimit: 2 * gib}},
		{name: "a request alone sets the limit to it", in: `{"cpu-request": "0.5"}`, want: WorkloadRequest{CPURequestMillis: 500, CPULimitMillis: 500}},
		{name: "a cpu limit without a request sets the request", in: `{"cpu-limit": 3}`, want: WorkloadRequest{CPURequestMillis: 3000, CPULimitMillis: 3000}},
		{name: "a memory limit without a request sets the request", in: `{"memory-limit": "512M"}`, want: WorkloadRequest{MemoryRequest: gib / 2, MemoryLimit: gib / 2}},
		{name: "cpu-limit overrides the limit cpu set", in: `{"cpu": 1, "cpu-limit": 3}`, want: WorkloadRequest{CPURequestMillis: 1000, CPULimitMillis: 3000}},
		{name: "cpu-request overrides the request cpu set, and the limit follows it up", in: `{"cpu": 1, "cpu-request": 2}`, want: WorkloadRequest{CPURequestMillis: 2000, CPULimitMillis: 2000}},
		{name: "an empty request asks for nothing", in: `{}`, want: WorkloadRequest{}},
		{name: "a null request asks for nothing", in: `null`, want: WorkloadRequest{}},
		{name: "null values are left out", in: `{"cpu": null, "memory": "1G"}`, want: WorkloadRequest{MemoryRequest: gib, MemoryLimit: gib}},
		{name: "a signed delta may shrink", in: `{"cpu": -1, "memory": "-1G"}`, signed: true, want: WorkloadRequest{-1000, -1000, -gib, -gib}},
		{name: "a signed delta is not reconciled: the limit delta stays apart", in: `{"memory-request": "-1G"}`, signed: true, want: WorkloadRequest{MemoryRequest: -gib}},
		{name: "a signed delta of the request alone leaves the limit", in: `{"cpu-request": 1, "cpu-limit": 0}`, signed: true, want: WorkloadRequest{CPURequestMillis: 1000}},
		{name: "a signed delta of the limit alone leaves the request", in: `{"cpu-limit": -1, "memory-limit": "1G"}`, signed: true, want: WorkloadRequest{CPULimitMillis: -1000, MemoryLimit: gib}},
		{name: "a memory size with an unknown unit is refused", in: `{"memory": "12Q"}`, err: `memory: size "12Q" is not a number of bytes`},
		{name: "a negative cpu string is refused", in: `{"cpu": "-1"}`, err: `cpu: cpu "-1" is negative`},
		{name: "a negative cpu number is refused", in: `{"cpu-request": -1}`, err: `cpu-request: cpu "-1" is negative`},
		{name: "a cpu that is not a number is refused", in: `{"cpu": "abc"}`, err: `cpu: cpu "abc" is not a decimal number`},
		{name: "a cpu below one millicore is refused", in: `{"cpu-limit": 0.0001}`, err: `cpu-limit: cpu "0.0001" is finer than one millicore`},
		{name: "a negative memory is refused unless signed", in: `{"memory-limit": "-1G"}`, err: `memory-limit: size "-1G" is negative`},
		{name: "memory past the largest host figure is refused", in: `{"memory": "3P"}`, err: `memory: size "3P" is too large (at most 512 TiB)`},
		{name: "memory past 8 PiB names the same limit", in: `{"memory-limit": "9P"}`, err: `memory-limit: size "9P" is too large (at most 512 TiB)`},
		{name: "an unknown key is refused", in: `{"cpus": 1}`, err: `workload request: unknown key "cpus"`},
		{name: "a request that is not an object is refused", in: `[1]`, err: "workload request: want a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := ParseWorkloadRequest(json.RawMessage(c.in), c.signed)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, *w)
		})
	}
}

func TestDecodeWorkloads(t *testing.T) {
	t.Run("nulls are workloads without compute and are skipped", func(t *testing.T) {
		ws, err := DecodeWorkloads(json.RawMessage(`[null, {"cpu_request_millis": 1, "cpu_limit_millis": 2, "memory_request": 3, "memory_limit": 4}, null]`))
		require.NoError(t, err)
		require.Equal(t, []*Workload{{1, 2, 3, 4}}, ws)
	})
	t.Run("no list is no workloads", func(t *testing.T) {
		ws, err := DecodeWorkloads(nil)
		require.NoError(t, err)
		require.Empty(t, ws)
	})
	for _, c := range []struct {
		name, in, err string
	}{
		{"an object is not a list", `{"w1": {}}`, "workloads_resource: want a list"},
		{"an entry that is not a stored resource is refused with its index", `[{}, {"cpu_request_millis": "1"}]`, "workloads_resource[1]: workload resource"},
		{"an entry past the largest figure is refused", `[{"memory_request": 9007199254740993}]`, "workloads_resource[0]: workload resource: memory_request 9007199254740993 is out of range: want -562949953421312 to 562949953421312"},
		{"a negative entry past the largest figure is refused naming its field", `[{"cpu_limit_millis": -9007199254740993}]`, "workloads_resource[0]: workload resource: cpu_limit_millis -9007199254740993 is out of range: want -562949953421312 to 562949953421312"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeWorkloads(json.RawMessage(c.in))
			require.ErrorContains(t, err, c.err)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
}

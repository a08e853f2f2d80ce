package overcommit

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

const gib = int64(1) << 30

func ptr(v int64) *int64 { return &v }

// engineInfo decodes core's engine report the way it arrives on stdin:
// capitalised keys, Resources values base64-encoded.
func engineInfo(t *testing.T, raw string) *types.EngineInfo {
	t.Helper()
	info := &types.EngineInfo{}
	require.NoError(t, json.Unmarshal([]byte(raw), info))
	return info
}

func TestAddNode(t *testing.T) {
	// base64 of {"cpu": 32, "memory": "16G"} and of {"cpu": 12}
	const reported32, reported12 = "eyJjcHUiOiAzMiwgIm1lbW9yeSI6ICIxNkcifQ==", "eyJjcHUiOiAxMn0="
	for _, c := range []struct {
		name    string
		request string
		info    string
		want    Amount
		err     string
	}{
		{name: "the request gives the host's cpu count and memory", request: `{"cpu": 16, "memory": "64G"}`, want: Amount{16000, 64 * gib}},
		{name: "a decimal cpu count and a byte count are read exactly", request: `{"cpu": "1.5", "memory": 1073741824}`, want: Amount{1500, gib}},
		{name: "the request wins over everything the engine reports", request: `{"cpu": 2, "memory": "1G"}`,
			info: `{"NCPU": 8, "MemTotal": 999, "Resources": {"compute": "` + reported32 + `"}}`, want: Amount{2000, gib}},
		{name: "what the request leaves out comes from the engine's compute resource", request: `{"cpu": 8}`,
			info: `{"NCPU": 4, "MemTotal": 999, "Resources": {"compute": "` + reported32 + `"}}`, want: Amount{8000, 16 * gib}},
		{name: "the engine's compute resource wins over NCPU and MemTotal", request: `null`,
			info: `{"NCPU": 8, "MemTotal": 16777216000, "Resources": {"compute": "` + reported12 + `"}}`, want: Amount{12000, 16777216000}},
		{name: "an inline compute resource is read like a base64 one", request: `{}`,
			info: `{"Resources": {"compute": {"cpu": 6, "memory": "2G"}}}`, want: Amount{6000, 2 * gib}},
		{name: "NCPU and MemTotal are the last source", request: `{}`,
			info: `{"Type": "docker", "ID": "x", "NCPU": 8, "MemTotal": 16777216000, "StorageTotal": 1, "Resources": {"storage": "e30="}}`, want: Amount{8000, 16777216000}},
		{name: "a node with neither request nor engine figures is refused", request: `{}`,
			err: "the node's cpu and memory are unknown"},
		{name: "a node whose memory is known nowhere is refused naming the memory", request: `{"cpu": 4}`, info: `{"NCPU": 4}`,
			err: "the node's memory is unknown"},
		{name: "a node whose cpu is known nowhere is refused naming the cpu", request: `{"memory": "4G"}`, info: `{"MemTotal": 4}`,
			err: "the node's cpu is unknown"},
		{name: "an engine reporting zeros is no source", request: `null`, info: `{"NCPU": 0, "MemTotal": 0}`,
			err: "the node's cpu and memory are unknown"},
		{name: "a negative cpu count is refused", request: `{"cpu": "-1", "memory": "1G"}`, err: `cpu "-1" is negative`},
		{name: "a cpu count that is not a number is refused", request: `{"cpu": "abc", "memory": "1G"}`, err: `cpu "abc" is not a decimal number`},
		{name: "a memory size with an unknown unit is refused", request: `{"cpu": 1, "memory": "12Q"}`, err: `memory: size "12Q" is not a number of bytes`},
		{name: "an unknown key is refused", request: `{"cpu": 1, "memory": "1G", "gpu": 1}`, err: `compute request: unknown key "gpu"`},
		{name: "a request that is not an object is refused", request: `[16]`, err: "resource: want a JSON object"},
		{name: "a bad engine compute resource is refused", request: `{}`,
			info: `{"NCPU": 4, "MemTotal": 1024, "Resources": {"compute": {"cpu": "abc"}}}`, err: "info.Resources.compute"},
		{name: "a host past the largest figure is refused naming the limit", request: `{"cpu": 1, "memory": "4P"}`, err: `memory: size "4P" is too large (at most 512 TiB)`},
		{name: "a host of 8 PiB is refused naming the same limit", request: `{"cpu": 1, "memory": "8P"}`, err: `memory: size "8P" is too large (at most 512 TiB)`},
		{name: "a host past 8 PiB is refused naming the same limit", request: `{"cpu": 1, "memory": "9P"}`, err: `memory: size "9P" is too large (at most 512 TiB)`},
		{name: "a host cpu past the largest figure is refused naming the limit", request: `{"cpu": "9007199254740", "memory": "1G"}`,
			err: `cpu "9007199254740" is too large (at most 562949953421.312 CPUs)`},
		{name: "an engine's NCPU past the largest figure is refused naming the limit, not wrapped", request: `{}`,
			info: `{"NCPU": 18446744073709552, "MemTotal": 1073741824}`, err: `info.NCPU 18446744073709552 is too large (at most 562949953421.312 CPUs)`},
		{name: "an engine's NCPU one past the largest whole count is refused", request: `{}`,
			info: `{"NCPU": 562949953422, "MemTotal": 1073741824}`, err: `info.NCPU 562949953422 is too large`},
		{name: "an engine's NCPU at the largest whole count is taken", request: `{}`,
			info: `{"NCPU": 562949953421, "MemTotal": 1073741824}`, want: Amount{562949953421000, gib}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var info *types.EngineInfo
			if c.info != "" {
				info = engineInfo(t, c.info)
			}
			n, err := AddNode(json.RawMessage(c.request), info)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, &Node{Capacity: c.want}, n, "a new node holds nothing and follows the defaults")
		})
	}
}

// sample is a node of 16 cores and 64 GiB with a CPU override of 4x,
// 3 CPUs and 4 GiB in use, at version 2.
func sample() *Node {
	return &Node{
		Capacity: Amount{CPUMillis: 16000, MemoryBytes: 64 * gib},
		Usage:    Amount{CPUMillis: 3000, MemoryBytes: 4 * gib},
		Override: Override{CPU: ptr(4000)},
		Version:  2,
	}
}

func TestSetCapacity(t *testing.T) {
	for _, c := range []struct {
		name              string
		resource, request string
		delta, incr       bool
		want              Amount
		err               string
		class             types.Class // invalid_argument when empty
	}{
		{name: "an absolute request replaces the cpu count", request: `{"cpu": 32}`, want: Amount{32000, 64 * gib}},
		{name: "an absolute request replaces only what it names", request: `{"memory": "128G"}`, want: Amount{16000, 128 * gib}},
		{name: "an absolute request ignores incr", request: `{"cpu": 8}`, incr: false, want: Amount{8000, 64 * gib}},
		{name: "a delta with incr adds", request: `{"cpu": 4, "memory": "1G"}`, delta: true, incr: true, want: Amount{20000, 65 * gib}},
		{name: "a delta without incr subtracts", request: `{"memory": "16G"}`, delta: true, want: Amount{16000, 48 * gib}},
		{name: "a delta taking the host below zero is refused, naming the amounts", request: `{"cpu": 17}`, delta: true,
			err: "cpu: capacity 16000 millicores -17000 would be -1000, below zero", class: types.FailedPrecondition},
		{name: "a negative delta with incr shrinks the host (eru-cli node set --delta)", request: `{"cpu": -4, "memory": "-16G"}`, delta: true, incr: true, want: Amount{12000, 48 * gib}},
		{name: "a negative delta without incr grows it", request: `{"cpu": "-1.5"}`, delta: true, want: Amount{17500, 64 * gib}},
		{name: "a negative delta below zero is refused", request: `{"memory": "-65G"}`, delta: true, incr: true,
			err: "memory: capacity 68719476736 bytes -69793218560 would be -1073741824, below zero", class: types.FailedPrecondition},
		{name: "a negative value is refused in absolute mode", request: `{"cpu": -4}`, err: `cpu "-4" is negative`},
		{name: "a stored-form snapshot is restored verbatim",
			request: `{"cpu_millis": 8000, "memory_bytes": 1024}`, want: Amount{8000, 1024}},
		{name: "a snapshot carrying the figures in effect restores only the host",
			request: `{"cpu_millis": 8000, "memory_bytes": 1024, "cpu_ratio": 9999, "memory_ratio": 1, "schedulable_cpu_millis": 79992, "schedulable_memory_bytes": 1}`,
			want:    Amount{8000, 1024}},
		{name: "a snapshot given as resource is restored when there is no request",
			resource: `{"cpu_millis": 4000, "memory_bytes": 2048}`, want: Amount{4000, 2048}},
		{name: "the request wins over the resource", resource: `{"cpu_millis": 4000, "memory_bytes": 2048}`, request: `{"cpu": 1}`, want: Amount{1000, 64 * gib}},
		{name: "no request changes nothing", request: `null`, want: Amount{16000, 64 * gib}},
		{name: "a memory size with an unknown unit is refused", request: `{"memory": "12Q"}`, err: `size "12Q"`},
		{name: "a partial snapshot is neither snapshot nor request", request: `{"cpu_millis": 8000}`, err: `unknown key "cpu_millis"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := sample()
			next, err := setCapacity(n, raw(c.resource), raw(c.request), c.delta, c.incr)
			require.Equal(t, sample(), n, "the stored record is not changed in place")
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				class := c.class
				if class == "" {
					class = types.InvalidArgument
				}
				require.Equal(t, class, types.ClassOf(err))
				return
			}
			require.NoError(t, err)
			want := sample()
			want.Capacity = c.want
			require.Equal(t, want, next, "usage, overrides and version are kept")
		})
	}
	t.Run("the answered capacity restores the node it was read from", func(t *testing.T) {
		before := sample()
		snapshot, err := json.Marshal(before.View(Defaults{CPU: 1000, Memory: 1500}))
		require.NoError(t, err)
		changed, err := setCapacity(before, nil, json.RawMessage(`{"cpu": 2, "memory": "3G"}`), false, false)
		require.NoError(t, err)
		restored, err := setCapacity(changed, nil, snapshot, false, false)
		require.NoError(t, err)
		require.Equal(t, before, restored)
	})
}

// raw turns a test table's text into a request value; "" is absent.
func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func TestView(t *testing.T) {
	n := sample()
	require.Equal(t, Capacity{
		CPUMillis: 16000, MemoryBytes: 64 * gib,
		CPURatio: 4000, MemoryRatio: 1500,
		SchedulableCPUMillis: 64000, SchedulableMemoryBytes: 96 * gib,
		CPURatioSource: SourceNode, MemoryRatioSource: SourceDefault, OvercommitVersion: 2,
	}, n.View(Defaults{CPU: 2000, Memory: 1500}))
}

func TestNextUsage(t *testing.T) {
	workloads := `[{"cpu_request_millis": 1500, "cpu_limit_millis": 2000, "memory_request": 1073741824, "memory_limit": 2147483648},
		null,
		{"cpu_request_millis": 500, "cpu_limit_millis": 500, "memory_request": 0, "memory_limit": 0}]`
	for _, c := range []struct {
		name                         string
		resource, request, workloads string
		delta, incr                  bool
		want                         Amount
		err                          string
	}{
		{name: "a request adds with delta and incr", request: `{"cpu": 1.5, "memory": "512M"}`, delta: true, incr: true, want: Amount{4500, 4*gib + gib/2}},
		{name: "a request subtracts with delta and no incr", request: `{"cpu": "0.5", "memory": "1G"}`, delta: true, want: Amount{2500, 3 * gib}},
		{name: "an absolute request replaces only what it names", request: `{"cpu": 4}`, want: Amount{4000, 4 * gib}},
		{name: "a stored-form resource is restored verbatim", resource: `{"cpu_millis": 100, "memory_bytes": 5}`, want: Amount{100, 5}},
		{name: "a stored-form snapshot through the request is restored verbatim", request: `{"cpu_millis": 7, "memory_bytes": 9}`, want: Amount{7, 9}},
		{name: "workloads add their requests with incr", workloads: workloads, delta: true, incr: true, want: Amount{5000, 5 * gib}},
		{name: "workloads subtract their requests without incr", workloads: workloads, delta: true, want: Amount{1000, 3 * gib}},
		{name: "workloads replace the usage in absolute mode", workloads: workloads, want: Amount{2000, gib}},
		{name: "a realloc's negative delta added with incr shrinks the usage",
			workloads: `[{"cpu_request_millis": -1000, "cpu_limit_millis": -1000, "memory_request": -1073741824, "memory_limit": 0}]`,
			delta:     true, incr: true, want: Amount{2000, 3 * gib}},
		{name: "nothing at all replaces the usage with nothing", want: Amount{0, 0}},
		{name: "a memory size with an unknown unit is refused", request: `{"memory": "12Q"}`, delta: true, incr: true, err: `size "12Q"`},
		{name: "a negative cpu in a request is refused", request: `{"cpu": -1}`, delta: true, incr: true, err: `cpu "-1" is negative`},
		{name: "workloads that are not a list are refused", workloads: `{"w1": {}}`, err: "workloads_resource: want a list"},
		{name: "a resource that is not an object is refused", resource: `[1]`, err: "resource: want a JSON object"},
		{name: "a resource in request form is refused rather than read as zero", resource: `{"cpu": 2}`, err: `resource: not a stored compute resource: "cpu_millis" is missing`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := sample()
			next, err := nextUsage(n, raw(c.resource), raw(c.request), raw(c.workloads), c.delta, c.incr)
			require.Equal(t, sample(), n, "the stored record is not changed in place")
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				return
			}
			require.NoError(t, err)
			want := sample()
			want.Usage = c.want
			require.Equal(t, want, next)
			require.NoError(t, next.Validate())
		})
	}
	t.Run("a decrease past zero is computed, and validation refuses it", func(t *testing.T) {
		next, err := nextUsage(sample(), nil, json.RawMessage(`{"cpu": 4}`), nil, true, false)
		require.NoError(t, err)
		require.Equal(t, int64(-1000), next.Usage.CPUMillis)
		err = next.Validate()
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		require.ErrorContains(t, err, "usage cpu_millis would be -1000, below zero")
	})
	t.Run("a usage above schedulable is accepted: core has already decided", func(t *testing.T) {
		next, err := nextUsage(sample(), nil, json.RawMessage(`{"cpu": 100}`), nil, false, false)
		require.NoError(t, err)
		require.Greater(t, next.Usage.CPUMillis, next.Schedulable(Defaults{CPU: 1000, Memory: 1000}).CPUMillis)
		require.NoError(t, next.Validate())
	})
}

func TestRestore(t *testing.T) {
	t.Run("capacity and usage are written verbatim, derived figures ignored", func(t *testing.T) {
		n, err := Restore(json.RawMessage(`{"cpu_millis": 16000, "memory_bytes": 1024, "cpu_ratio": 4000, "memory_ratio": 2000, "schedulable_cpu_millis": 64000,
			"cpu_ratio_source": "DEFAULT", "memory_ratio_source": "DEFAULT", "overcommit_version": 0}`),
			json.RawMessage(`{"cpu_millis": 60000, "memory_bytes": 512}`))
		require.NoError(t, err)
		require.Equal(t, &Node{Capacity: Amount{16000, 1024}, Usage: Amount{60000, 512}}, n)
	})
	t.Run("the node's own overrides and their version come back as they were", func(t *testing.T) {
		n, err := Restore(json.RawMessage(`{"cpu_millis": 16000, "memory_bytes": 1024, "cpu_ratio": 4000, "memory_ratio": 2000,
			"cpu_ratio_source": "NODE", "memory_ratio_source": "DEFAULT", "overcommit_version": 3}`), nil)
		require.NoError(t, err)
		require.Equal(t, Override{CPU: ptr(4000)}, n.Override)
		require.Equal(t, int64(3), n.Version)
		require.Equal(t, int64(64000), n.Schedulable(Defaults{CPU: 1000, Memory: 1000}).CPUMillis)
	})
	for _, c := range []struct {
		name, capacity, err string
	}{
		{"an override out of range is refused, naming the snapshot's keys",
			`{"cpu_millis": 1, "memory_bytes": 2, "cpu_ratio": 0, "cpu_ratio_source": "NODE"}`,
			"capacity: cpu_ratio_source is NODE, so cpu_ratio is the node's own ratio: cpu ratio 0 is out of range"},
		{"a node's own ratio left out is refused as one of 0, naming the key it lacks",
			`{"cpu_millis": 1, "memory_bytes": 2, "memory_ratio_source": "NODE"}`,
			"capacity: memory_ratio_source is NODE, so memory_ratio is the node's own ratio: memory ratio 0 is out of range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Restore(json.RawMessage(c.capacity), nil)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			require.ErrorContains(t, err, c.err)
		})
	}
	t.Run("an unknown source is refused", func(t *testing.T) {
		_, err := Restore(json.RawMessage(`{"cpu_millis": 1, "memory_bytes": 2, "cpu_ratio": 5, "cpu_ratio_source": "MINE"}`), nil)
		require.ErrorContains(t, err, `cpu_ratio_source "MINE" is neither DEFAULT nor NODE`)
	})
	t.Run("an overrides version of 2^53 is the largest restored", func(t *testing.T) {
		n, err := Restore(json.RawMessage(`{"cpu_millis": 1, "memory_bytes": 2, "overcommit_version": 9007199254740992}`), nil)
		require.NoError(t, err)
		require.Equal(t, int64(types.MaxExact), n.Version)
	})
	t.Run("a missing usage is no usage", func(t *testing.T) {
		n, err := Restore(json.RawMessage(`{"cpu_millis": 1, "memory_bytes": 2}`), nil)
		require.NoError(t, err)
		require.Equal(t, Amount{}, n.Usage)
	})
	for _, c := range []struct {
		name            string
		capacity, usage string
		err             string
	}{
		{"a missing capacity is refused", "null", "", "capacity: missing"},
		{"a capacity in request form is refused rather than read as zero", `{"cpu": 16, "memory": "64G"}`, "", `capacity: not a stored compute resource: "cpu_millis" is missing`},
		{"a usage missing a stored key is refused", `{"cpu_millis": 1, "memory_bytes": 2}`, `{"cpu_millis": 5}`, `usage: not a stored compute resource: "memory_bytes" is missing`},
		{"a fractional stored figure is refused", `{"cpu_millis": 1.5, "memory_bytes": 2}`, "", "capacity: not a stored compute resource"},
		{"a negative usage is refused", `{"cpu_millis": 1, "memory_bytes": 2}`, `{"cpu_millis": -1, "memory_bytes": 0}`, "usage cpu_millis would be -1, below zero"},
		{"an overrides version past 2^53 is refused naming the limit", `{"cpu_millis": 1, "memory_bytes": 2, "overcommit_version": 9007199254740993}`, "",
			"capacity: overcommit_version 9007199254740993 is out of range: want 0 to 2^53 (9007199254740992)"},
		{"a negative overrides version is refused naming the limit", `{"cpu_millis": 1, "memory_bytes": 2, "overcommit_version": -1}`, "",
			"capacity: overcommit_version -1 is out of range: want 0 to 2^53 (9007199254740992)"},
		{"an overrides version past int64 is refused naming the limit", `{"cpu_millis": 1, "memory_bytes": 2, "overcommit_version": 99999999999999999999}`, "",
			"capacity: overcommit_version 99999999999999999999 is not an integer from 0 to 2^53 (9007199254740992)"},
		{"a fractional overrides version is refused naming the limit", `{"cpu_millis": 1, "memory_bytes": 2, "overcommit_version": 1.5}`, "",
			"capacity: overcommit_version 1.5 is not an integer from 0 to 2^53 (9007199254740992)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Restore(raw(c.capacity), raw(c.usage))
			require.ErrorContains(t, err, c.err)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(n *Node)
		err  string
	}{
		{"a cpu override of zero is refused", func(n *Node) { n.Override.CPU = ptr(0) }, "cpu ratio 0 is out of range"},
		{"a memory override past 16000 is refused", func(n *Node) { n.Override.Memory = ptr(16001) }, "memory ratio 16001 is out of range"},
		{"a host past the largest figure is refused naming the limit", func(n *Node) { n.Capacity.CPUMillis = MaxHost + 1 },
			"capacity cpu_millis 562949953421313 is too large (at most 562949953421312 millicores)"},
		{"a host memory past the largest figure is refused naming the limit", func(n *Node) { n.Capacity.MemoryBytes = 659706976665600 },
			"capacity memory_bytes 659706976665600 is too large (at most 562949953421312 bytes, 512 TiB)"},
		{"a negative memory usage is refused", func(n *Node) { n.Usage.MemoryBytes = -1 }, "usage memory_bytes would be -1, below zero"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := sample()
			c.edit(n)
			err := n.Validate()
			require.ErrorContains(t, err, c.err)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
	t.Run("the sample node is valid", func(t *testing.T) { require.NoError(t, sample().Validate()) })
}

func TestRecompute(t *testing.T) {
	ws := []*Workload{
		{CPURequestMillis: 1000, CPULimitMillis: 2000, MemoryRequest: 2 * gib, MemoryLimit: 2 * gib},
		{CPURequestMillis: 2000, CPULimitMillis: 2000, MemoryRequest: 2 * gib, MemoryLimit: 4 * gib},
	}
	t.Run("workloads that sum to the stored usage leave no diffs", func(t *testing.T) {
		fixed, diffs, err := sample().Recompute(ws, nil)
		require.NoError(t, err)
		require.Empty(t, diffs)
		require.NotNil(t, diffs, "diffs are printed as [], never null")
		require.Equal(t, sample(), fixed)
	})
	t.Run("each disagreeing resource is one diff with both figures", func(t *testing.T) {
		fixed, diffs, err := sample().Recompute(ws[:1], nil)
		require.NoError(t, err)
		require.Equal(t, []string{
			"cpu: stored usage 3000 millicores, workloads hold 1000",
			"memory: stored usage 4294967296 bytes, workloads hold 2147483648",
		}, diffs)
		require.Equal(t, Amount{1000, 2 * gib}, fixed.Usage)
		require.Equal(t, sample().Capacity, fixed.Capacity)
		require.Equal(t, sample().Override, fixed.Override)
	})
	t.Run("what isolation released is not counted again", func(t *testing.T) {
		fixed, diffs, err := sample().Recompute(ws, types.Amounts{"cpu_millis": 1000})
		require.NoError(t, err)
		require.Equal(t, []string{"cpu: stored usage 3000 millicores, workloads hold 2000"}, diffs)
		require.Equal(t, Amount{2000, 4 * gib}, fixed.Usage)
	})
	t.Run("a ledger larger than the workloads leaves zero, not less", func(t *testing.T) {
		fixed, _, err := sample().Recompute(ws, types.Amounts{"cpu_millis": 99000, "memory_bytes": 99 * gib})
		require.NoError(t, err)
		require.Equal(t, Amount{}, fixed.Usage)
	})
	t.Run("the plugin reads the workloads from the request", func(t *testing.T) {
		_, diffs, err := Rules{}.Recompute(sample(), json.RawMessage(`[{"cpu_request_millis": 3000, "memory_request": 4294967296}]`), nil)
		require.NoError(t, err)
		require.Empty(t, diffs)
		_, _, err = Rules{}.Recompute(sample(), json.RawMessage(`{"w": {}}`), nil)
		require.ErrorContains(t, err, "workloads_resource: want a list")
	})
}

// setCapacity is set-node-resource-capacity's decision as the engine drives
// it: the change picked from resource and request (types.ChangeOf), decoded,
// then applied to n.
func setCapacity(n *Node, resource, request json.RawMessage, delta, incr bool) (*Node, error) {
	c, err := types.ChangeOf(&types.Request{Resource: resource, ResourceRequest: request}, false)
	if err != nil {
		return nil, err
	}
	edit, err := DecodeCapacityChange(c, delta, incr)
	if err != nil {
		return nil, err
	}
	return edit.Apply(n)
}

// nextUsage is set-node-resource-usage's decision as the engine drives it
// (without the isolation ledger, which is the engine's).
func nextUsage(n *Node, resource, request, workloads json.RawMessage, delta, incr bool) (*Node, error) {
	c, err := types.ChangeOf(&types.Request{Resource: resource, ResourceRequest: request, WorkloadsResource: workloads}, true)
	if err != nil {
		return nil, err
	}
	edit, err := DecodeUsageChange(c, delta, incr)
	if err != nil {
		return nil, err
	}
	return edit.Apply(n)
}

func TestUsageChangeOutOfRangeNamesTheFieldAndTheLimit(t *testing.T) {
	for _, c := range []struct {
		name, resource, want string
	}{
		{"memory past the largest schedulable figure", `{"cpu_millis": 2, "memory_bytes": 9007199254740993}`,
			"resource: memory_bytes 9007199254740993 is out of range (at most 9007199254740992 bytes, 8 PiB, either way)"},
		{"cpu past the largest schedulable figure", `{"cpu_millis": 9007199254740993, "memory_bytes": 0}`,
			"resource: cpu_millis 9007199254740993 is out of range (at most 9007199254740992 millicores, either way)"},
		{"a negative cpu past the largest schedulable figure", `{"cpu_millis": -9007199254740993, "memory_bytes": 0}`,
			"resource: cpu_millis -9007199254740993 is out of range (at most 9007199254740992 millicores, either way)"},
		{"the largest int64, which would wrap a sum", `{"cpu_millis": 9223372036854775807, "memory_bytes": 0}`,
			"resource: cpu_millis 9223372036854775807 is out of range (at most 9007199254740992 millicores, either way)"},
	} {
		t.Run("a change of "+c.name+" is refused naming the field and the limit", func(t *testing.T) {
			_, err := nextUsage(sample(), json.RawMessage(c.resource), nil, nil, true, true)
			require.EqualError(t, err, c.want)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
	t.Run("usage up to the largest schedulable figure is taken, past the largest host figure", func(t *testing.T) {
		// A host of MaxHost at the largest ratio schedules MaxUsage:
		// whatever placement admits can be written.
		n := &Node{Capacity: Amount{CPUMillis: MaxHost, MemoryBytes: MaxHost}}
		out, err := nextUsage(n, json.RawMessage(`{"cpu_millis": 9007199254740992, "memory_bytes": 1125899906842624}`), nil, nil, false, true)
		require.NoError(t, err)
		require.NoError(t, out.Validate())
		require.Equal(t, Amount{CPUMillis: MaxUsage, MemoryBytes: 2 * MaxHost}, out.Usage)
	})
	t.Run("a delta taking usage past the largest schedulable figure is refused", func(t *testing.T) {
		n := &Node{Capacity: Amount{CPUMillis: MaxHost, MemoryBytes: MaxHost}, Usage: Amount{CPUMillis: MaxUsage}}
		out, err := nextUsage(n, json.RawMessage(`{"cpu_millis": 1, "memory_bytes": 0}`), nil, nil, true, true)
		require.NoError(t, err)
		require.EqualError(t, out.Validate(), "usage cpu_millis 9007199254740993 is too large (at most 9007199254740992 millicores)")
	})
}

func TestAStoredCapacityDeltaCannotWrap(t *testing.T) {
	c, err := types.ChangeOf(&types.Request{Resource: json.RawMessage(`{"cpu_millis": 9223372036854775807, "memory_bytes": 0}`)}, true)
	require.NoError(t, err)
	_, err = DecodeCapacityChange(c, true, true)
	require.EqualError(t, err, "resource: cpu_millis 9223372036854775807 is out of range (at most 9007199254740992 millicores, either way)")
	require.Equal(t, types.InvalidArgument, types.ClassOf(err))
}

func TestALeadingZeroDoesNotMakeACPUCountTooLarge(t *testing.T) {
	n, err := ParseMillis("00000000000001.5", false)
	require.NoError(t, err)
	require.Equal(t, int64(1500), n)
	_, err = ParseMillis("00000000000000562949953421.313", false)
	require.EqualError(t, err, `cpu "00000000000000562949953421.313" is too large (at most 562949953421.312 CPUs)`)
}

func TestNextVersion(t *testing.T) {
	t.Run("a change of the overrides advances the version by one", func(t *testing.T) {
		v, err := nextVersion("n1", 3)
		require.NoError(t, err)
		require.Equal(t, int64(4), v)
	})
	t.Run("the version advances to 2^53 and no further", func(t *testing.T) {
		v, err := nextVersion("n1", types.MaxExact-1)
		require.NoError(t, err)
		require.Equal(t, int64(types.MaxExact), v)
		_, err = nextVersion("n1", types.MaxExact)
		require.EqualError(t, err, "node n1 compute record: overcommit version 9007199254740992 is at its limit, 2^53: it cannot advance")
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
	})
}

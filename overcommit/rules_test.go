package overcommit

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// envWith is a verb's environment holding the given defaults.
func envWith(t *testing.T, d *Defaults) types.Env {
	t.Helper()
	env := types.Env{MaxDeployCount: 10000, Shared: map[string][]byte{}}
	if d != nil {
		data, err := json.Marshal(d)
		require.NoError(t, err)
		env.Shared[DefaultsKey] = data
	}
	return env
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

func TestPluginDeploy(t *testing.T) {
	p := Rules{}
	w, err := p.ParseRequest(json.RawMessage(`{"cpu": 1, "memory-request": "1G", "memory-limit": "2G"}`))
	require.NoError(t, err)
	t.Run("each workload gets empty engine params and its stored resource", func(t *testing.T) {
		out, err := p.Deploy(host16(Amount{}), w, 2, envWith(t, &cpuAt4x))
		require.NoError(t, err)
		one := `{"cpu_request_millis":1000,"cpu_limit_millis":1000,"memory_request":1073741824,"memory_limit":2147483648}`
		require.JSONEq(t, `{"engines_params":[{},{}],"workloads_resource":[`+one+`,`+one+`]}`, asJSON(t, out))
	})
	t.Run("the defaults in the environment decide", func(t *testing.T) {
		_, err := p.Deploy(host16(Amount{}), w, 17, envWith(t, nil))
		require.Equal(t, types.ResourceExhausted, types.ClassOf(err), "16 cores at the built-in 1x take 16")
		_, err = p.Deploy(host16(Amount{}), w, 17, envWith(t, &cpuAt4x))
		require.NoError(t, err)
	})
	t.Run("the capacity query reads the same defaults", func(t *testing.T) {
		require.Equal(t, 16, p.DeployCapacity(host16(Amount{}), &WorkloadRequest{CPURequestMillis: 1000}, envWith(t, nil)).Capacity)
		require.Equal(t, 64, p.DeployCapacity(host16(Amount{}), &WorkloadRequest{CPURequestMillis: 1000}, envWith(t, &cpuAt4x)).Capacity)
	})
}

// realloc is calculate-realloc's decision as the engine drives it: the
// workload and request decoded first, then planned on n.
func realloc(n *Node, workload, request json.RawMessage, env types.Env) (*types.Realloc, bool, error) {
	r, err := Rules{}.ParseResize(workload, request)
	if err != nil {
		return nil, false, err
	}
	return r.Plan(n, env)
}

func TestPluginRealloc(t *testing.T) {
	old := json.RawMessage(`{"cpu_request_millis":2000,"cpu_limit_millis":2000,"memory_request":1073741824,"memory_limit":1073741824}`)
	t.Run("a shrink answers the delta in stored shape with negative numbers", func(t *testing.T) {
		out, grows, err := realloc(host16(Amount{CPUMillis: 2000}), old, json.RawMessage(`{"cpu": "-0.5", "memory": "-512M"}`), envWith(t, nil))
		require.NoError(t, err)
		require.False(t, grows)
		require.JSONEq(t, `{"engine_params":{},
			"delta_resource":{"cpu_request_millis":-500,"cpu_limit_millis":-500,"memory_request":-536870912,"memory_limit":-536870912},
			"workload_resource":{"cpu_request_millis":1500,"cpu_limit_millis":1500,"memory_request":536870912,"memory_limit":536870912}}`, asJSON(t, out))
	})
	t.Run("a growth says so", func(t *testing.T) {
		_, grows, err := realloc(host16(Amount{CPUMillis: 2000}), old, json.RawMessage(`{"cpu": 1}`), envWith(t, nil))
		require.NoError(t, err)
		require.True(t, grows)
	})
	for _, c := range []struct {
		name, workload, request, err string
	}{
		{"a bad delta is refused", string(old), `{"memory": "12Q"}`, `memory: size "12Q"`},
		{"a bad stored workload is refused", `{"cpu_request_millis": "x"}`, `{"cpu": 1}`, "workload resource"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := realloc(host16(Amount{}), json.RawMessage(c.workload), json.RawMessage(c.request), envWith(t, nil))
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			require.ErrorContains(t, err, c.err)
		})
	}
}

func TestPluginMostIdle(t *testing.T) {
	recs := map[string]*Node{
		"busy":     host16(Amount{CPUMillis: 12000}), // 75% at 1x
		"half":     host16(Amount{CPUMillis: 8000}),
		"half2":    host16(Amount{CPUMillis: 8000}),                                                                   // 50% at 1x
		"override": {Capacity: Amount{16000, 0}, Usage: Amount{CPUMillis: 12000}, Override: Override{CPU: ptr(4000)}}, // 12000 of 64000: 18.75%
		"empty":    {},                                                                                                // nothing schedulable: no fraction
	}
	for _, c := range []struct {
		name     string
		nodes    []string
		want     string
		priority int
	}{
		{"the lowest used cpu fraction wins with priority 1", []string{"busy", "half"}, "half", 1},
		{"the fraction is of schedulable, so a node's override counts", []string{"busy", "half", "override"}, "override", 1},
		{"of equal fractions the first named wins", []string{"busy", "half2", "half"}, "half2", 1},
		{"nodes compute has never seen are passed over", []string{"unknown", "busy"}, "busy", 1},
		{"a node with nothing schedulable is passed over", []string{"empty", "busy"}, "busy", 1},
		{"with no node to judge, the first is answered with priority 0", []string{"unknown", "empty"}, "unknown", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := Rules{}.MostIdle(c.nodes, func() (map[string]*Node, types.Env, error) {
				got := map[string]*Node{}
				for _, n := range c.nodes {
					if r, ok := recs[n]; ok {
						got[n] = r
					}
				}
				return got, envWith(t, nil), nil
			})
			require.NoError(t, err)
			require.Equal(t, &types.MostIdle{Nodename: c.want, Priority: c.priority}, out)
		})
	}
}

func TestPluginMetrics(t *testing.T) {
	p := Rules{}
	n := &Node{Capacity: Amount{16000, 64 * gib}, Usage: Amount{60000, gib}, Override: Override{Memory: ptr(1500)}}
	metrics := p.Metrics("pod1", "n1.example.com", n, envWith(t, &cpuAt4x))
	key := "core.node.n1_example_com.compute."
	labels := []string{"pod1", "n1.example.com"}
	require.Equal(t, []types.Metric{
		{Name: "compute_cpu_schedulable_millis", Labels: labels, Key: key + "cpu.schedulable_millis", Value: "64000"},
		{Name: "compute_cpu_used_millis", Labels: labels, Key: key + "cpu.used_millis", Value: "60000"},
		{Name: "compute_memory_schedulable_bytes", Labels: labels, Key: key + "memory.schedulable_bytes", Value: "103079215104"},
		{Name: "compute_memory_used_bytes", Labels: labels, Key: key + "memory.used_bytes", Value: "1073741824"},
		{Name: "compute_cpu_ratio", Labels: labels, Key: key + "cpu.ratio", Value: "4000"},
		{Name: "compute_memory_ratio", Labels: labels, Key: key + "memory.ratio", Value: "1500"},
	}, metrics)

	t.Run("every sample has a description with as many label names as it has values", func(t *testing.T) {
		desc := p.MetricsDescription()
		require.Len(t, desc, len(metrics))
		for i, d := range desc {
			require.Equal(t, metrics[i].Name, d.Name)
			require.Equal(t, "gauge", d.Type)
			require.Equal(t, []string{"podname", "nodename"}, d.Labels)
			require.Len(t, metrics[i].Labels, len(d.Labels))
			require.NotEmpty(t, d.Help)
		}
	})
}

func TestPluginRecords(t *testing.T) {
	p := Rules{}
	n := sample()
	t.Run("a record survives encoding and decoding", func(t *testing.T) {
		data, err := p.Encode(n)
		require.NoError(t, err)
		back, err := p.Decode(data)
		require.NoError(t, err)
		require.Equal(t, n, back)
		require.JSONEq(t, `{"capacity":{"cpu_millis":16000,"memory_bytes":68719476736},"usage":{"cpu_millis":3000,"memory_bytes":4294967296},"override":{"cpu":4000},"version":2}`, string(data))
	})
	t.Run("the view answers the host with the figures in effect, and the usage", func(t *testing.T) {
		capacity, usage := p.View(n, envWith(t, &Defaults{CPU: 1000, Memory: 2000}))
		require.JSONEq(t, `{"cpu_millis":16000,"memory_bytes":68719476736,"cpu_ratio":4000,"memory_ratio":2000,"schedulable_cpu_millis":64000,"schedulable_memory_bytes":137438953472,
			"cpu_ratio_source":"NODE","memory_ratio_source":"DEFAULT","overcommit_version":2}`, asJSON(t, capacity))
		require.JSONEq(t, `{"cpu_millis":3000,"memory_bytes":4294967296}`, asJSON(t, usage))
	})
	t.Run("the registry sees the usage as amounts and can set it back", func(t *testing.T) {
		held := p.Held(n)
		require.Equal(t, types.Amounts{"cpu_millis": 3000, "memory_bytes": 4 * gib}, held)
		zero := p.WithHeld(n, types.Amounts{"cpu_millis": 0, "memory_bytes": 0})
		require.Equal(t, Amount{}, zero.Usage)
		require.Equal(t, n.Capacity, zero.Capacity)
		require.Equal(t, Amount{3000, 4 * gib}, n.Usage, "the record itself is untouched")
		require.Equal(t, []types.Figure{{Name: "released_cpu_millis", Value: 3000}, {Name: "released_memory_bytes", Value: 4 * gib}}, p.IsolationFigures(held))
		require.JSONEq(t, `{"cpu_millis":3000,"memory_bytes":4294967296}`, asJSON(t, p.LedgerView(held)))
	})
	t.Run("a node never seen holds nothing", func(t *testing.T) {
		require.Equal(t, &Node{}, p.Empty())
		require.Equal(t, "compute", p.Name())
		require.Equal(t, []string{DefaultsKey}, p.SharedKeys())
	})
}

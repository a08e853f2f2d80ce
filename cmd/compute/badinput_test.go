package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

func TestBadRatios(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		env.OpOK(t, bin, nil, "overcommit", "set-node", "n1", "--cpu", "3000")
		for _, c := range []struct {
			name  string
			ratio string
			want  string
		}{
			{"zero", "0", "ratio 0 is out of range: want 1 to 16000 thousandths"},
			{"one past the largest", "16001", "ratio 16001 is out of range: want 1 to 16000 thousandths"},
			{"negative", "-5", "ratio -5 is out of range: want 1 to 16000 thousandths"},
			{"not a number", "abc", `ratio "abc" is not an integer (thousandths: 1000 is 1x)`},
			{"a decimal", "1.5", `ratio "1.5" is not an integer (thousandths: 1000 is 1x)`},
		} {
			t.Run("a "+c.name+" ratio is refused by every command that takes one, and nothing is written", func(t *testing.T) {
				unchanged(t, env, func() {
					require.Equal(t, "compute: overcommit set-defaults: invalid_argument: cpu "+c.want,
						opFail(t, env, 2, "overcommit", "set-defaults", "--cpu", c.ratio, "--memory", "1000"))
					require.Equal(t, "compute: overcommit set-defaults: invalid_argument: memory "+c.want,
						opFail(t, env, 2, "overcommit", "set-defaults", "--cpu", "1000", "--memory="+c.ratio))
					require.Equal(t, "compute: overcommit set-node: invalid_argument: cpu "+c.want,
						opFail(t, env, 2, "overcommit", "set-node", "n1", "--cpu", c.ratio))
					require.Equal(t, "compute: overcommit set-node: invalid_argument: memory "+c.want,
						opFail(t, env, 2, "overcommit", "set-node", "--memory", c.ratio, "n1"))
				})
			})
		}
	})
}

func TestBadResources(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		held := workload{2000, 2000, gib, gib}
		for _, c := range []struct {
			name     string
			resource obj
			want     string
		}{
			{"a negative cpu", obj{"cpu": "-1"}, `cpu "-1" is negative`},
			{"a negative cpu number", obj{"cpu": -1}, `cpu "-1" is negative`},
			{"a cpu that is not a number", obj{"cpu": "abc"}, `cpu "abc" is not a decimal number of CPUs like 2 or 0.5`},
			{"a memory size with an unknown unit", obj{"memory": "12Q"}, `size "12Q" is not a number of bytes or a human size like 10G`},
		} {
			t.Run(c.name+" is refused in add-node, and nothing is written", func(t *testing.T) {
				request := obj{"cpu": 4, "memory": "8G"}
				for k, v := range c.resource {
					request[k] = v
				}
				unchanged(t, env, func() {
					line := env.Fail(t, bin, "add-node", obj{"nodename": "n2", "resource": request})
					require.Contains(t, line, "compute: add-node: node n2: invalid_argument: ")
					require.Contains(t, line, c.want)
				})
			})
			t.Run(c.name+" is refused in an absolute node capacity or a usage request, and nothing is written", func(t *testing.T) {
				unchanged(t, env, func() {
					for _, verb := range []string{"set-node-resource-capacity", "set-node-resource-usage"} {
						// a capacity delta may be negative (eru-cli node set --delta)
						delta := verb == "set-node-resource-usage"
						line := env.Fail(t, bin, verb, obj{"nodename": "n1", "resource_request": c.resource, "delta": delta, "incr": true})
						require.Contains(t, line, "compute: "+verb+": node n1: invalid_argument: ")
						require.Contains(t, line, c.want)
					}
				})
			})
			t.Run(c.name+" is refused in a workload request, and nothing is written", func(t *testing.T) {
				unchanged(t, env, func() {
					line := env.Fail(t, bin, "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": c.resource})
					require.Contains(t, line, "compute: calculate-deploy: node n1: invalid_argument: ")
					require.Contains(t, line, c.want)
					line = env.Fail(t, bin, "get-nodes-deploy-capacity", obj{"nodenames": []string{"n1"}, "workload_resource": c.resource})
					require.Contains(t, line, "compute: get-nodes-deploy-capacity: invalid_argument: ")
					require.Contains(t, line, c.want)
				})
			})
		}
		t.Run("a realloc delta may be negative but not malformed", func(t *testing.T) {
			unchanged(t, env, func() {
				for _, c := range []struct {
					delta obj
					want  string
				}{
					{obj{"cpu": "abc"}, `cpu: cpu "abc" is not a decimal number`},
					{obj{"memory": "12Q"}, `memory: size "12Q" is not a number of bytes`},
					{obj{"cpu-limit": "0.0001"}, `cpu-limit: cpu "0.0001" is finer than one millicore`},
				} {
					line := env.Fail(t, bin, "calculate-realloc", obj{"nodename": "n1", "workload_resource": held, "workload_resource_request": c.delta})
					require.Contains(t, line, "compute: calculate-realloc: node n1: invalid_argument: "+c.want)
				}
			})
		})
		t.Run("an engine reporting more CPUs than a record holds is refused naming the limit, and nothing is written", func(t *testing.T) {
			unchanged(t, env, func() {
				// NCPU × 1000 would wrap to a host of 0.384 CPUs.
				line := env.Fail(t, bin, "add-node", obj{"nodename": "n2", "resource": obj{}, "info": obj{"NCPU": int64(18446744073709552), "MemTotal": gib}})
				require.Contains(t, line, "compute: add-node: node n2: invalid_argument: info.NCPU 18446744073709552 is too large (at most 562949953421.312 CPUs)")
			})
		})
		t.Run("a request that is not one JSON object is refused", func(t *testing.T) {
			unchanged(t, env, func() {
				require.Contains(t, env.Fail(t, bin, "add-node", []byte(`{"nodename": "n2", "resource": {"cpu": 1}`)), "invalid_argument: request: ")
				require.Contains(t, env.Fail(t, bin, "add-node", []byte(`[1]`)), "invalid_argument: stdin is not a JSON object")
				require.Contains(t, env.Fail(t, bin, "add-node", obj{"nodename": "n2", "resource": []int{16}}), "invalid_argument: resource: want a JSON object")
			})
		})
	})
}

func TestCorruptStoredDefaultsAreAnErrorNotOneToOne(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		env.Call(t, "compute", "add-node", map[string]any{"nodename": "n1", "resource": map[string]any{"cpu": 4, "memory": "8G"}}, nil)
		env.Put(t, "/overcommit/defaults", "{not json")
		line := env.Fail(t, "compute", "calculate-deploy", map[string]any{"nodename": "n1", "deploy_count": 1, "workload_resource_request": map[string]any{"cpu": 1}})
		require.Contains(t, line, "node n1: internal: stored overcommit defaults are corrupt")
		line = env.Fail(t, "compute", "get-nodes-deploy-capacity", map[string]any{"nodenames": []string{"n1"}, "workload_resource": map[string]any{"cpu": 1}})
		require.Contains(t, line, "internal: stored overcommit defaults are corrupt")
	})
}

package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// eru-cli node set --delta --extra-resources '{"compute":{"cpu":-4,"memory":"-16G"}}':
// core's SetNode always sends incr true, so a negative delta is how an
// operator shrinks a node (issue 10 item 5).
func TestNodeSetDeltaWithNegativeValuesShrinksTheHost(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		var out capacityChange
		env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "delta": true, "incr": true,
			"resource_request": obj{"cpu": -4, "memory": "-16G"}}, &out)
		require.Equal(t, int64(16000), out.Before.CPUMillis)
		require.Equal(t, int64(12000), out.After.CPUMillis)
		require.Equal(t, 48*gib, out.After.MemoryBytes)
		require.Equal(t, int64(12000), info(t, env, "n1").Capacity.CPUMillis)

		t.Run("subtracted (incr false), a negative value grows the host", func(t *testing.T) {
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "delta": true, "incr": false,
				"resource_request": obj{"cpu": "-0.5"}}, &out)
			require.Equal(t, int64(12500), out.After.CPUMillis)
		})
		t.Run("core's rollback of it restores the host", func(t *testing.T) {
			var before capacityChange
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "delta": true, "incr": true, "resource_request": obj{"cpu": -1}}, &before)
			env.Call(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "delta": false, "resource_request": before.Before}, nil)
			require.Equal(t, int64(12500), info(t, env, "n1").Capacity.CPUMillis)
		})
		for _, c := range []struct {
			name    string
			request obj
			want    string
		}{
			{"cpu below zero", obj{"cpu": -13}, "failed_precondition: cpu: capacity 12500 millicores -13000 would be -500, below zero"},
			{"memory below zero", obj{"memory": "-49G"}, "failed_precondition: memory: capacity 51539607552 bytes -52613349376 would be -1073741824, below zero"},
		} {
			t.Run(c.name+" is refused naming the amounts, and nothing is written", func(t *testing.T) {
				unchanged(t, env, func() {
					line := env.Fail(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "delta": true, "incr": true, "resource_request": c.request})
					require.Equal(t, "compute: set-node-resource-capacity: node n1: "+c.want, line)
				})
			})
		}
		t.Run("a negative value in absolute mode is refused", func(t *testing.T) {
			unchanged(t, env, func() {
				line := env.Fail(t, bin, "set-node-resource-capacity", obj{"nodename": "n1", "delta": false, "resource_request": obj{"cpu": -4}})
				require.Equal(t, `compute: set-node-resource-capacity: node n1: invalid_argument: cpu "-4" is negative`, line)
			})
		})
	})
}

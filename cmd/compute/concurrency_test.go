package main_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

func TestConcurrentWritesAllLand(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		const writers = 8
		results := make([]testenv.Result, writers+1)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				results[i] = env.Verb(t, bin, "set-node-resource-usage", obj{"nodename": "n1",
					"workloads_resource": []workload{{500, 500, gib, gib}}, "delta": true, "incr": true})
			})
		}
		wg.Go(func() { results[writers] = env.Op(t, bin, "overcommit", "set-node", "n1", "--cpu", "4000") })
		wg.Wait()
		for i, res := range results {
			require.Equal(t, 0, res.Code, "writer %d: %s", i, res.Stderr)
			require.Empty(t, res.Stderr, "writer %d", i)
		}
		got := info(t, env, "n1")
		require.Equal(t, amount{writers * 500, writers * gib}, got.Usage, "every usage write landed")
		require.Equal(t, int64(4000), got.Capacity.CPURatio, "the override landed beside them")
		require.Equal(t, nodeRatios{NodeID: "n1", CPU: effective{4000, "NODE"}, Memory: effective{1000, "DEFAULT"}, Version: 1}, getNode(t, env, "n1"))
	})
}

// TestManyNodes goes past the number of nodes read key by key, so the
// records, registrations and the defaults come from prefix reads.
func TestManyNodes(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		const count = 45
		names := make([]string, count)
		for i := range names {
			names[i] = fmt.Sprintf("n%02d", i)
			addNode(t, env, names[i], 16, "64G")
		}
		env.OpOK(t, bin, nil, "overcommit", "set-defaults", "--cpu", "4000", "--memory", "1000")
		env.OpOK(t, bin, nil, "overcommit", "set-node", "n07", "--cpu", "1000")
		place(t, env, "n03", 10, obj{"cpu": 1})
		env.OpOK(t, bin, nil, "nodes", "drain", "n11")

		caps := capacities(t, env, obj{"cpu": 1}, append(names, "ghost")...)
		require.Len(t, caps.Nodes, count-1, "the drained node and the unknown one are left out")
		require.NotContains(t, caps.Nodes, "n11")
		require.Equal(t, 64, caps.Nodes["n00"].Capacity, "the defaults are read with the prefixes")
		require.Equal(t, 16, caps.Nodes["n07"].Capacity, "an override is read with its record")
		require.Equal(t, 54, caps.Nodes["n03"].Capacity, "usage is read with its record")
		require.Equal(t, 64*(count-3)+16+54, caps.Total)

		var samples []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		}
		nodes := make([]obj, count)
		for i, n := range names {
			nodes[i] = obj{"podname": "p", "nodename": n}
		}
		env.Call(t, bin, "get-metrics", obj{"nodes": nodes}, &samples)
		require.Len(t, samples, 7*count, "six gauges and node_schedulable per node")
		require.Equal(t, "core.node.n00.compute.cpu.schedulable_millis", samples[0].Key)
		require.Equal(t, "64000", samples[0].Value)
		require.Equal(t, "core.node.n03.compute.cpu.used_millis", samples[3*7+1].Key)
		require.Equal(t, "10000", samples[3*7+1].Value)
		require.Equal(t, "core.node.n11.compute.schedulable", samples[11*7+6].Key)
		require.Equal(t, "0", samples[11*7+6].Value, "the drained node, read with the prefixes")
		require.Equal(t, "0", samples[11*7].Value, "the drained node has no schedulable CPU")
	})
}

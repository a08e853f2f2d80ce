package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolRaceManyDeploys is the first race of docs/pools.md: 8 processes deploy
// through 4 nodes (each in its own pod for core, so core locks nothing in
// common) into a pool with room for 10. Each process goes on until
// calculate-deploy finds the pool full; usage writes that lose the race
// are refused. Exactly 10 objects land, the pool reserves their sum, and
// `pools check` finds no drift.
func TestPoolRaceManyDeploys(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env, procs int) {
		nodes := []string{"n1", "n2", "n3", "n4"}
		for _, n := range nodes {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:10G"}}

		var mu sync.Mutex
		landed := map[string]int{}
		var failures []string
		var wg sync.WaitGroup
		for p := range procs {
			node := nodes[p%len(nodes)]
			wg.Go(func() {
				for attempt := 0; attempt < 40; attempt++ {
					res := env.Verb(t, "storage", "calculate-deploy", obj{"nodename": node, "deploy_count": 1, "workload_resource_request": request})
					if res.Code != 0 {
						if !strings.Contains(res.Stderr, "resource_exhausted: pool ceph-a") {
							mu.Lock()
							failures = append(failures, "calculate-deploy: "+res.Stderr)
							mu.Unlock()
						}
						return
					}
					var d deployAnswer
					if err := json.Unmarshal([]byte(res.Stdout), &d); err != nil || len(d.WorkloadsResource) != 1 {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("calculate-deploy answer %q: %v", res.Stdout, err))
						mu.Unlock()
						return
					}
					res = env.Verb(t, "storage", "set-node-resource-usage", obj{"nodename": node, "workloads_resource": d.WorkloadsResource, "delta": true, "incr": true})
					mu.Lock()
					switch {
					case res.Code == 0:
						landed[node]++
					case !strings.Contains(res.Stderr, "resource_exhausted: pool ceph-a"):
						failures = append(failures, "set-node-resource-usage: "+res.Stderr)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Empty(t, failures)
		total := 0
		for _, n := range landed {
			total += n
		}
		require.Equal(t, 10, total, "landed per node: %v", landed)
		objects := 0
		var sum int64
		for _, n := range nodes {
			for _, o := range poolObjects(t, env, n) {
				objects++
				sum += o.Bytes
			}
		}
		require.Equal(t, 10, objects)
		v := poolGet(t, env, "ceph-a")
		require.Equal(t, sum, v.Reserved)
		require.Equal(t, 100*gib, v.Reserved)
		require.Equal(t, int64(10), v.Objects)
		noDrift(t, env)
	}
	pick := testenv.ShortStore(t)
	t.Run("on etcd, 8 processes through 4 nodes land exactly 10 (4 under -short)", func(t *testing.T) {
		testenv.SkipUnlessShortStore(t, pick, "etcd")
		run(t, testenv.NewEtcd(t, raceBudget), sizes(8, 4))
	})
	t.Run("on the embedded store, 4 processes through 4 nodes land exactly 10", func(t *testing.T) {
		testenv.SkipUnlessShortStore(t, pick, "embedded")
		run(t, testenv.NewEmbedded(t, raceBudget), 4)
	})
}

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/tests/testenv"
)

// manyNodes is how many nodes the many-node queries name: more than two
// pages of etcd's paged read (512 names a page); fewer under -short, still
// more than one page.
func manyNodes() int {
	if testing.Short() {
		return 700
	}
	return 1300
}

// loadCopies stores, for every name, a copy of the keys add-node wrote for
// seed (its name replaced), with the usage of /data0 and of the flat budget
// set to used(i), every seventh node draining; written in transactions of
// 100 keys on etcd, one on the embedded store.
func loadCopies(t *testing.T, env *testenv.Env, seed string, names []string, used func(i int) int64) {
	t.Helper()
	templates := map[string]string{}
	for k, v := range env.Dump(t) {
		if strings.HasSuffix(k, "/"+seed) {
			templates[k] = v
		}
	}
	require.Contains(t, templates, "/resource/storage/"+seed)
	require.Contains(t, templates, "/nodes/"+seed)
	var ops []store.Op
	for i, name := range names {
		for k, v := range templates {
			key := strings.TrimSuffix(k, seed) + name
			value := strings.ReplaceAll(v, seed, name)
			switch {
			case strings.HasPrefix(k, "/resource/storage/"):
				var rec map[string]any
				require.NoError(t, json.Unmarshal([]byte(value), &rec))
				usage := rec["usage"].(map[string]any)
				usage["volumes"].(map[string]any)["/data0"] = used(i)
				usage["storage"] = used(i)
				raw, err := json.Marshal(rec)
				require.NoError(t, err)
				value = string(raw)
			case strings.HasPrefix(k, "/nodes/") && i%7 == 3:
				require.Contains(t, value, `"drain":false`)
				value = strings.Replace(value, `"drain":false`, `"drain":true`, 1)
			}
			ops = append(ops, store.Op{Key: key, Value: []byte(value)})
		}
	}
	if env.Etcd != nil {
		c := env.Etcd.Client(t)
		for start := 0; start < len(ops); start += 100 {
			var puts []clientv3.Op
			for _, op := range ops[start:min(start+100, len(ops))] {
				puts = append(puts, clientv3.OpPut(env.Prefix+op.Key, string(op.Value)))
			}
			_, err := c.Txn(context.Background()).Then(puts...).Commit()
			require.NoError(t, err)
		}
		return
	}
	s, err := boltstore.Open(env.DB, boltstore.Options{Prefix: env.Prefix, LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Txn(context.Background(), nil, ops))
}

// TestAQueryOverManyNodesAnswersWhatItsPartsAnswer holds a query the store
// reads in pages (etcd, more than 40 nodes) to the answers of the same
// query in parts of 30 nodes, each read at once: the same capacities, the
// same samples in the same order.
func TestAQueryOverManyNodesAnswersWhatItsPartsAnswer(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		n := manyNodes()
		addNode(t, env, "seed", obj{"volumes": []string{"/data0:1T", "/data1:1T"}, "disks": []string{"/dev/vda:/,/data0:1000:1000:1G:1G"}, "storage": "4T"})
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("node-%05d", i)
		}
		loadCopies(t, env, "seed", names, func(i int) int64 { return int64(i%3) * 300 * gib })
		// The query names the nodes out of order, with two nobody knows.
		asked := append([]string{"unknown-a"}, names...)
		asked = append(asked, "unknown-b")
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(asked), func(i, j int) { asked[i], asked[j] = asked[j], asked[i] })
		parts := func(f func(part []string)) {
			for start := 0; start < len(asked); start += 30 {
				f(asked[start:min(start+30, len(asked))])
			}
		}
		request := obj{"volumes": []string{"AUTO:/data:rw:100G"}}

		t.Run("a capacity query", func(t *testing.T) {
			whole := capacity(t, env, asked, request)
			var merged capacityAnswer
			require.NoError(t, json.Unmarshal([]byte(`{"nodes_deploy_capacity_map":{}}`), &merged))
			seen := map[int]bool{}
			parts(func(part []string) {
				c := capacity(t, env, part, request)
				for name, nc := range c.Nodes {
					merged.Nodes[name] = nc
					seen[nc.Capacity] = true
				}
				merged.Total += c.Total
			})
			require.Equal(t, merged, whole)
			require.Len(t, whole.Nodes, n-(n+3)/7, "every node but the draining ones")
			require.Len(t, seen, 3, "the three usages give three capacities")
			require.Equal(t, 20, whole.Nodes["node-00000"].Capacity)
			require.Equal(t, 17, whole.Nodes["node-00001"].Capacity)
			require.Equal(t, 14, whole.Nodes["node-00002"].Capacity)
			require.NotContains(t, whole.Nodes, "node-00003", "draining")
		})
		t.Run("a metrics sweep naming some nodes twice", func(t *testing.T) {
			var refs []obj
			for i, name := range asked {
				refs = append(refs, obj{"podname": "pod", "nodename": name})
				if i%5 == 0 {
					refs = append(refs, obj{"podname": "other", "nodename": name})
				}
			}
			var whole []json.RawMessage
			env.Call(t, "storage", "get-metrics", obj{"nodes": refs}, &whole)
			var merged []json.RawMessage
			for start := 0; start < len(refs); start += 30 {
				var part []json.RawMessage
				env.Call(t, "storage", "get-metrics", obj{"nodes": refs[start:min(start+30, len(refs))]}, &part)
				merged = append(merged, part...)
			}
			require.Equal(t, len(merged), len(whole))
			for i := range whole {
				require.JSONEq(t, string(merged[i]), string(whole[i]), "sample %d", i)
			}
			require.Greater(t, len(whole), 6*n, "six samples a known node, and its twins")
		})
	})
}

// TestAPoolCapacityQueryOverManyNodesIsTheSameOnBothStores deals ten
// pools' slots among many nodes: on etcd the nodes are read in pages with
// the pool records at the same revision, on the embedded store at once;
// both answer the same, and every pool's slots are dealt out exactly.
func TestAPoolCapacityQueryOverManyNodesIsTheSameOnBothStores(t *testing.T) {
	n := manyNodes()
	const pools = 10
	const slots = 100 // each pool holds 100 workloads of 100 GiB, dealt over nodes of every page
	answers := map[string]capacityAnswer{}
	for _, env := range []*testenv.Env{testenv.NewEtcd(t), testenv.NewEmbedded(t)} {
		var names []string
		for k := range pools {
			seed := fmt.Sprintf("seed-%d", k)
			addNode(t, env, seed, obj{"storage": "4T", "pools": []string{fmt.Sprintf("p%d:/mnt/p%d", k, k)}})
			env.OpOK(t, "storage", nil, "pools", "set-capacity", fmt.Sprintf("p%d", k), fmt.Sprintf("%dG", slots*100), "--if-version", "0")
			var copies []string
			for i := k; i < n; i += pools {
				copies = append(copies, fmt.Sprintf("node-%05d", i))
			}
			loadCopies(t, env, seed, copies, func(int) int64 { return 0 })
			names = append(names, copies...)
		}
		c := capacity(t, env, names, obj{"volumes": []string{"POOL:/data:rw:100G"}})
		require.Equal(t, pools*slots, c.Total, "%s: every pool's slots, no more", env.Kind)
		answers[env.Kind] = c
	}
	require.Equal(t, answers["embedded"], answers["etcd"])
}

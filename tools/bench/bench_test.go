package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestMain lets the test binary be the bench's etcd process too, as main
// does: startEtcd runs this program again with etcdDirEnv set.
func TestMain(m *testing.M) {
	if dir := os.Getenv(etcdDirEnv); dir != "" {
		os.Exit(serveEtcd(dir))
	}
	os.Exit(m.Run())
}

// TestQuickRunOnATinyCluster runs the whole harness as `make bench` does,
// in quick mode on clusters of 20 and 60 nodes (either side of the point
// read limit), so that it cannot rot: every measure runs, every answer is
// checked, and the report has one row per measure. The first run on a
// machine also builds etcdctl into the user's cache (about half a minute).
func TestQuickRunOnATinyCluster(t *testing.T) {
	bin := filepath.Dir(testenv.Bin(t, "storage"))
	o := options{bin: bin, goBin: "go", args: []string{"bench", "-quick"}, quick: true}
	require.NoError(t, o.settle("20,60"))
	// Two pairs: three runs a measure, so a measure that undoes its own
	// change runs once more to undo the last. -short times one pair (every
	// measure, check and row the same), leaving that extra run to the full
	// run.
	o.pairs = 2
	if testing.Short() {
		o.pairs = 1
	}
	var report bytes.Buffer
	require.NoError(t, run(context.Background(), o, &report, nil), report.String())
	checkReport(t, report.String())
}

func checkReport(t *testing.T, report string) {
	t.Helper()
	for _, row := range []string{
		"| Go hello-world (floor) | `/bin/true` |",
		"| `etcdctl get` of one key (floor) | `/bin/true` |",
		"| read of one key over etcd's JSON gateway, standard library only | `etcdctl get` of its record |",
		"| `storage name` (no store) | Go hello-world |",
		"| the plugin's linked code, started, printing the name (floor) | Go hello-world |",
		"| `storage name` (no store), against its linked code | the plugin's linked code printing the name |",
		"| `storage name` through the front, as core runs it with the front installed | Go hello-world |",
		"| `get-node-resource-info`, one node | `etcdctl get` of its record |",
		"| `set-node-resource-usage`, one write | `etcdctl put` of a record as large |",
		"| capacity, 20 nodes | `etcdctl txn`",
		"| `get-metrics`, 20 nodes | `etcdctl txn`",
		"| capacity, 60 nodes | `etcdctl txn`",
		"| `get-metrics`, 60 nodes | `etcdctl txn`",
		"| capacity, 20 nodes sharing 10 pools | the same query without its pool volume |",
		"| capacity of 20 nodes in a cluster of 60 | the same query in a cluster of 20 |",
		"| `get-node-resource-info` forwarded (serve) | Go hello-world |",
		"| `get-node-resource-info` forwarded (serve), against no daemon | the same call without a daemon |",
		"| Go hello-world, against `get-node-resource-info` without a daemon (floor) | the same call without a daemon |",
		"| a sweep of 20 Go hello-world execs, against the `get-metrics` sweep without the daemon (floor) | the same sweep without it |",
		"| a sweep of 60 Go hello-world execs, against the `get-metrics` sweep without the daemon (floor) | the same sweep without it |",
		"| capacity, 20 nodes, through `storage serve` | the same query without it |",
		"| capacity, 20 nodes, through `storage serve`, a request it has not seen | the same query without it |",
		"| `get-metrics` sweep, 20 calls of one node, through `storage serve` | the same sweep without it |",
		"| capacity, 60 nodes, through `storage serve` | the same query without it |",
		"| `get-metrics` sweep, 60 calls of one node, through `storage serve` | the same sweep without it |",
		"| `/metrics`, 60 nodes, rendered after a change (",
		"no store read: met",
	} {
		require.Contains(t, report, row)
	}
	require.Equal(t, 27, strings.Count(report, "×** ["), "one row of ratios per measure:\n%s", report)
	for _, line := range []string{"- load average at start: ", "- load average at end: ", "- cluster: 20 nodes", "- cluster: 60 nodes", "- cluster: 20 nodes sharing 10 pools", "- machine: ", "in a process of its own (embed)", "the plugins' build settings: CGO_ENABLED="} {
		require.Contains(t, report, line)
	}
}

// TestATimedRunFailsTheBenchUnlessItAnswersRight: a wrong answer, a failed
// exit or a word on stderr is an error, never a figure.
func TestATimedRunFailsTheBenchUnlessItAnswersRight(t *testing.T) {
	b := &bench{runner: &runner{path: filepath.Join(t.TempDir(), "runner")}}
	require.NoError(t, goBuild("go", runnerSource, b.runner.path))
	sh := func(script string) func(int) command {
		return fixed(command{argv: []string{"/bin/sh", "-c", script}})
	}
	for _, c := range []struct {
		name, script, want string
	}{
		{"a wrong answer", "echo wrong", "wrong answer"},
		{"a failed exit", "echo right; exit 3", "exit 3"},
		{"a word on stderr", "echo right; echo warning >&2", "wrote on stderr: warning"},
	} {
		t.Run(c.name+" is an error", func(t *testing.T) {
			_, err := b.timed(step{cmd: sh(c.script), check: exactly("right\n")}, 0)
			require.ErrorContains(t, err, c.want)
		})
	}
	t.Run("a right answer is a sample with the command's own rusage", func(t *testing.T) {
		s, err := b.timed(step{cmd: sh("echo right"), check: exactly("right\n")}, 0)
		require.NoError(t, err)
		require.Positive(t, s.wall)
		require.Positive(t, s.rssKiB)
	})
}

func TestChecksRejectWrongAnswers(t *testing.T) {
	names := []string{nodeName(0), nodeName(1), nodeName(2)}
	record := func(u int64) map[string]any {
		return map[string]any{
			"capacity": map[string]any{"volumes": map[string]int64{"/data0": tib, "/data1": tib}, "storage": storageCapacity},
			"usage":    map[string]any{"volumes": map[string]int64{"/data0": u, "/data1": 0}, "storage": u},
		}
	}
	capacity := func(caps []int, total int) map[string]any {
		m := map[string]any{}
		for i, c := range caps {
			m[names[i]] = map[string]any{"capacity": c}
		}
		return map[string]any{"nodes_deploy_capacity_map": m, "total": total}
	}
	metrics := func(node string, u int64) []map[string]any {
		return []map[string]any{
			{"name": "storage_used", "labels": []string{"pod", node}, "value": fmt.Sprint(u)},
			{"name": "storage_capacity", "labels": []string{"pod", node}, "value": fmt.Sprint(storageCapacity)},
			{"name": "storage_volume_used", "labels": []string{"pod", node, "/data0"}, "value": fmt.Sprint(u)},
			{"name": "storage_volume_capacity", "labels": []string{"pod", node, "/data0"}, "value": fmt.Sprint(tib)},
			{"name": "storage_volume_used", "labels": []string{"pod", node, "/data1"}, "value": "0"},
			{"name": "storage_volume_capacity", "labels": []string{"pod", node, "/data1"}, "value": fmt.Sprint(tib)},
		}
	}
	jsonOf := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	right := capacity([]int{wantCapacity(0), wantCapacity(1), wantCapacity(2)}, wantCapacity(0)+wantCapacity(1)+wantCapacity(2))
	for _, c := range []struct {
		name  string
		check check
		run   int
		good  string
		bad   []string
	}{
		{"get-node-resource-info", nodeInfoOf(0), 0, jsonOf(record(0)), []string{
			jsonOf(record(gib)),
			jsonOf(map[string]any{"capacity": record(0)["capacity"], "usage": record(0)["usage"], "diffs": []string{"storage: drift"}}),
			jsonOf(map[string]any{"usage": record(0)["usage"]}),
			jsonOf(record(0)) + " {}",
			"",
		}},
		{"set-node-resource-usage, an even run adds", alternatingUsage(1), 2,
			jsonOf(map[string]any{"before": record(used(1))["usage"], "after": record(used(1) + gib)["usage"]}), []string{
				jsonOf(map[string]any{"before": record(used(1) + gib)["usage"], "after": record(used(1))["usage"]}),
				jsonOf(map[string]any{"before": record(used(1))["usage"]}),
			}},
		{"set-node-resource-usage, an odd run takes back", alternatingUsage(1), 3,
			jsonOf(map[string]any{"before": record(used(1) + gib)["usage"], "after": record(used(1))["usage"]}), []string{
				jsonOf(map[string]any{"before": record(used(1))["usage"], "after": record(used(1) + gib)["usage"]}),
			}},
		{"get-nodes-deploy-capacity", capacityOf(names), 0, jsonOf(right), []string{
			jsonOf(capacity([]int{wantCapacity(0), wantCapacity(1)}, wantCapacity(0)+wantCapacity(1))),
			jsonOf(capacity([]int{wantCapacity(0), wantCapacity(1), wantCapacity(2) + 1}, wantCapacity(0)+wantCapacity(1)+wantCapacity(2)+1)),
			jsonOf(capacity([]int{wantCapacity(0), wantCapacity(1), wantCapacity(2)}, 0)),
		}},
		{"get-metrics", metricsOf(names[:1]), 0, jsonOf(metrics(names[0], 0)), []string{
			jsonOf(metrics(names[0], gib)),
			jsonOf(metrics(names[0], 0)[:5]),
			jsonOf(append(metrics(names[0], 0), metrics(names[1], used(1))...)),
		}},
		{"etcdctl get", etcdctlRecord("/p/resource/storage/"+names[0], 0), 0, "/p/resource/storage/" + names[0] + "\n" + jsonOf(record(0)) + "\n", []string{
			"/p/resource/storage/" + names[1] + "\n" + jsonOf(record(0)) + "\n",
			"/p/resource/storage/" + names[0] + "\n" + jsonOf(record(gib)) + "\n",
			"",
		}},
		{"etcdctl txn", etcdctlTxn(map[string]int{"/p/a/": 2, "/p/b/": 0}), 0, "SUCCESS\n\n/p/a/x\n{}\n/p/a/y\n{}\n", []string{
			"SUCCESS\n\n/p/a/x\n{}\n",
			"SUCCESS\n\n/p/a/x\n{}\n/p/a/y\n{}\n/p/b/z\n{}\n",
			"FAILURE\n\n/p/a/x\n{}\n/p/a/y\n{}\n",
		}},
	} {
		t.Run(c.name+" accepts the right answer", func(t *testing.T) {
			require.NoError(t, c.check(c.run, []byte(c.good)))
		})
		for i, bad := range c.bad {
			t.Run(fmt.Sprintf("%s rejects wrong answer %d", c.name, i+1), func(t *testing.T) {
				require.Error(t, c.check(c.run, []byte(bad)))
			})
		}
	}
}

func TestOptionsRefuseWhatIsNoComparison(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     options
		nodes string
		want  string
	}{
		{"fewer than 15 pairs outside quick mode", options{pairs: 5}, "", "at least 15"},
		{"sizes out of order", options{}, "10000,1000", "must ascend"},
		{"a size that is no count", options{}, "1k", "not a node count"},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			require.ErrorContains(t, c.o.settle(c.nodes), c.want)
		})
	}
	t.Run("defaults are 15 pairs at 1,000 and 10,000 nodes, quick mode 5 at 1,000", func(t *testing.T) {
		var full, quick options
		quick.quick = true
		require.NoError(t, full.settle(""))
		require.NoError(t, quick.settle(""))
		require.Equal(t, options{pairs: 15, nodes: []int{1000, 10000}}, full)
		require.Equal(t, options{pairs: 5, nodes: []int{1000}, quick: true}, quick)
	})
}

func TestStatIsMedianAndRange(t *testing.T) {
	require.Equal(t, stat{median: 2, low: 1, high: 9}, statOf([]float64{9, 1, 2}))
	require.Equal(t, stat{median: 2.5, low: 1, high: 9}, statOf([]float64{9, 1, 2, 3}))
	require.Equal(t, "1,000", thousands(1000))
	require.Equal(t, "100,000", thousands(100000))
	require.Equal(t, "999", thousands(999))
}

package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projecteru2/core/resource/plugins"
	binarytypes "github.com/projecteru2/core/resource/plugins/binary/types"
	plugintypes "github.com/projecteru2/core/resource/plugins/types"
	resourcetypes "github.com/projecteru2/core/resource/types"
	"github.com/stretchr/testify/require"
)

// verbCall is one plugin call as core makes it: the verb and the request
// object core marshals onto stdin.
type verbCall struct {
	verb    string
	request any
}

// successfulCalls are a valid call of every verb for one binary, on a
// node core has added and deployed to.
func successfulCalls(t *testing.T, e *env, resource string) []verbCall {
	t.Helper()
	p := e.plugin(t, resource)
	var (
		nodeRequest, otherNode, deployRequest, reallocRequest, capacityRequest params
	)
	switch resource {
	case "storage":
		nodeRequest = n1Request
		otherNode = params{"volumes": []string{"/data0:1T"}}
		deployRequest = params{"volumes": []string{"AUTO:/data:rw:100G", "/data0/logs:/logs:rw:0:100:100:1M:1M"}}
		reallocRequest = params{"volumes": []string{"AUTO:/data:rw:1G"}}
		capacityRequest = params{"volumes": []string{"/data2:1T"}}
	case "compute":
		nodeRequest = params{"cpu": 4, "memory": "8G"}
		otherNode = params{"cpu": 2, "memory": "2G"}
		deployRequest = params{"cpu": 1, "memory": "1G"}
		reallocRequest = params{"cpu": 0.5}
		capacityRequest = params{"cpu": 2}
	}
	addNode(t, p, "n1", nodeRequest, nil)
	deploy, err := p.CalculateDeploy(t.Context(), "n1", 2, deployRequest)
	require.NoError(t, err)
	_, err = p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, deploy.WorkloadsResource, true, plugins.Incr)
	require.NoError(t, err)
	info := nodeInfo(t, p, "n1", nil)
	wr := deploy.WorkloadsResource

	return []verbCall{
		{"name", nil},
		{"add-node", binarytypes.AddNodeRequest{Nodename: "n2", Resource: otherNode, Info: engineInfo("engine-n2")}},
		{"get-nodes-deploy-capacity", binarytypes.GetNodesDeployCapacityRequest{Nodenames: []string{"n1", "n2", "ghost"}, WorkloadResource: deployRequest}},
		{"calculate-deploy", binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 1, WorkloadResourceRequest: deployRequest}},
		{"set-node-resource-capacity", binarytypes.SetNodeResourceCapacityRequest{Nodename: "n1", ResourceRequest: capacityRequest, Delta: true, Incr: true}},
		{"set-node-resource-usage", binarytypes.SetNodeResourceUsageRequest{Nodename: "n1", WorkloadsResource: wr[:1], Delta: true, Incr: true}},
		{"get-node-resource-info", binarytypes.GetNodeResourceInfoRequest{Nodename: "n1", WorkloadsResource: wr}},
		{"set-node-resource-info", binarytypes.SetNodeResourceInfoRequest{Nodename: "n3", Capacity: info.Capacity, Usage: info.Usage}},
		{"get-most-idle-node", binarytypes.GetMostIdleNodeRequest{Nodenames: []string{"n1", "n2"}}},
		{"fix-node-resource", binarytypes.GetNodeResourceInfoRequest{Nodename: "n1", WorkloadsResource: wr}},
		{"calculate-realloc", binarytypes.CalculateReallocRequest{Nodename: "n1", WorkloadResource: wr[0], WorkloadResourceRequest: reallocRequest}},
		{"calculate-remap", binarytypes.CalculateRemapRequest{Nodename: "n1", WorkloadsResource: map[string]plugintypes.WorkloadResource{"w1": wr[0], "w2": wr[1]}}},
		{"get-metrics-description", binarytypes.GetMetricsDescriptionRequest{}},
		{"get-metrics", binarytypes.GetMetricsRequest{Podname: "pod1", Nodename: "n1"}},
		{"remove-node", binarytypes.RemoveNodeRequest{Nodename: "n2"}},
	}
}

// requireOneJSONValue checks that out is one JSON value and nothing else
// but white space.
func requireOneJSONValue(t *testing.T, out string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var v any
	require.NoError(t, dec.Decode(&v), "stdout is not JSON: %q", out)
	var extra any
	require.ErrorIs(t, dec.Decode(&extra), io.EOF, "stdout holds more than one JSON value: %q", out)
}

func TestSuccessfulAnswersAreOnlyJSON(t *testing.T) {
	for _, resource := range resourceNames {
		for _, logging := range []bool{false, true} {
			name := resource + " prints its answer and nothing else on either stream"
			if logging {
				name += ", with a log file configured"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				logFile := filepath.Join(t.TempDir(), resource+".log")
				if logging {
					config := fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %q\nlog:\n  file: %q\n", e.suite.endpoint, e.prefix, logFile)
					require.NoError(t, os.WriteFile(filepath.Join(e.dir, resource+".yaml"), []byte(config), 0o644))
				}
				for _, call := range successfulCalls(t, e, resource) {
					var stdin []byte
					if call.request != nil {
						stdin = []byte(mustJSON(t, call.request))
					}
					stdout, stderr, code := e.run(t, resource, call.verb, stdin)
					require.Zero(t, code, "%s %s failed: %s", resource, call.verb, stderr)
					require.Empty(t, stderr, "%s %s wrote on stderr, which core reads with stdout", resource, call.verb)
					requireOneJSONValue(t, stdout)
				}
				if logging {
					_, err := os.Stat(logFile)
					require.NoError(t, err, "logs go to the configured file")
				}
			})
		}
	}
}

// classes are the error classes of nodes.md.
var classes = "internal|invalid_argument|not_found|failed_precondition|aborted|already_exists|unavailable|resource_exhausted"

func TestFailedCallsPrintOneLineAndExit128(t *testing.T) {
	e := newEnv(t)
	storage := e.plugin(t, "storage")
	compute := e.plugin(t, "compute")
	addNode(t, storage, "n1", n1Request, nil)
	addNode(t, storage, "n2", params{"volumes": []string{"/data0:1T"}}, nil)
	addNode(t, compute, "n1", params{"cpu": 4, "memory": "8G"}, nil)
	deploy, err := storage.CalculateDeploy(t.Context(), "n1", 1, params{"volumes": []string{"AUTO:/data:rw:100G"}})
	require.NoError(t, err)
	wr := deploy.WorkloadsResource[0]
	big := bytes.Repeat([]byte(" "), 17<<20)
	copy(big, `{"nodename": "n1"}`)

	cases := []struct {
		name     string
		resource string
		verb     string
		request  any    // marshalled as core does
		stdin    []byte // when the request is not JSON core would send
		node     string // the node the line names, if the request could be read
		class    string // empty: any class
	}{
		{"storage refuses more workloads than fit", "storage", "calculate-deploy",
			binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 100, WorkloadResourceRequest: params{"volumes": []string{"AUTO:/data:rw:100G"}}}, nil, "n1", "resource_exhausted"},
		{"storage refuses a binding without a destination", "storage", "calculate-deploy",
			binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 1, WorkloadResourceRequest: params{"volumes": []string{"AUTO::rw:1G"}}}, nil, "n1", "invalid_argument"},
		{"storage refuses volumes that are not a list", "storage", "calculate-deploy",
			binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 1, WorkloadResourceRequest: params{"volumes": 42}}, nil, "n1", "invalid_argument"},
		{"storage refuses a monopoly binding of size 0 without IO quota", "storage", "calculate-deploy",
			binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 1, WorkloadResourceRequest: params{"volumes": []string{"AUTO:/m:mrw:0"}}}, nil, "n1", "invalid_argument"},
		{"storage refuses IOPS on a path no disk covers", "storage", "calculate-deploy",
			binarytypes.CalculateDeployRequest{Nodename: "n2", DeployCount: 1, WorkloadResourceRequest: params{"volumes": []string{"/srv/x:/x:rw:0:100:0:0:0"}}}, nil, "n2", ""},
		{"storage refuses a negative size outside a realloc", "storage", "get-nodes-deploy-capacity",
			binarytypes.GetNodesDeployCapacityRequest{Nodenames: []string{"n1"}, WorkloadResource: params{"volumes": []string{"AUTO:/d:rw:-1G"}}}, nil, "", "invalid_argument"},
		{"storage refuses realloc growth that does not fit", "storage", "calculate-realloc",
			binarytypes.CalculateReallocRequest{Nodename: "n1", WorkloadResource: wr, WorkloadResourceRequest: params{"volumes": []string{"AUTO:/data:rw:2T"}}}, nil, "n1", "resource_exhausted"},
		{"storage refuses a node that exists", "storage", "add-node",
			binarytypes.AddNodeRequest{Nodename: "n1", Resource: n1Request}, nil, "n1", "already_exists"},
		{"storage refuses a size it cannot read", "storage", "add-node",
			binarytypes.AddNodeRequest{Nodename: "n9", Resource: params{"volumes": []string{"/data0:lots"}}}, nil, "n9", "invalid_argument"},
		{"storage refuses a size core would round (above 8 PiB)", "storage", "add-node",
			binarytypes.AddNodeRequest{Nodename: "n9", Resource: params{"volumes": []string{"/data0:9P"}}}, nil, "n9", "invalid_argument"},
		{"storage refuses rm-disks with delta", "storage", "set-node-resource-capacity",
			binarytypes.SetNodeResourceCapacityRequest{Nodename: "n1", ResourceRequest: params{"rm-disks": "/dev/vda"}, Delta: true}, nil, "n1", "invalid_argument"},
		{"storage refuses usage above capacity", "storage", "set-node-resource-usage",
			binarytypes.SetNodeResourceUsageRequest{Nodename: "n1", ResourceRequest: params{"volumes": []string{"/data1:2T"}}, Delta: true, Incr: true}, nil, "n1", ""},
		{"storage cannot fix a node it has never seen", "storage", "fix-node-resource",
			binarytypes.GetNodeResourceInfoRequest{Nodename: "ghost"}, nil, "ghost", "not_found"},
		{"compute refuses more than host times ratio admits", "compute", "calculate-deploy",
			binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 5, WorkloadResourceRequest: params{"cpu": 1}}, nil, "n1", "resource_exhausted"},
		{"compute refuses a CPU below one millicore", "compute", "calculate-deploy",
			binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 1, WorkloadResourceRequest: params{"cpu": "0.0001"}}, nil, "n1", "invalid_argument"},
		{"compute refuses a negative CPU outside a realloc", "compute", "calculate-deploy",
			binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 1, WorkloadResourceRequest: params{"cpu": -1}}, nil, "n1", "invalid_argument"},
		{"compute refuses a node with nothing to go by", "compute", "add-node",
			binarytypes.AddNodeRequest{Nodename: "n9", Resource: params{}}, nil, "n9", "invalid_argument"},
		{"compute refuses a CPU count it cannot read", "compute", "set-node-resource-capacity",
			binarytypes.SetNodeResourceCapacityRequest{Nodename: "n1", ResourceRequest: params{"cpu": "lots"}, Delta: true, Incr: true}, nil, "n1", "invalid_argument"},
		{"compute cannot fix a node it has never seen", "compute", "fix-node-resource",
			binarytypes.GetNodeResourceInfoRequest{Nodename: "ghost"}, nil, "ghost", "not_found"},
		{"a request that is not JSON", "storage", "calculate-deploy", nil, []byte("not json"), "", "invalid_argument"},
		{"an empty request", "compute", "calculate-deploy", nil, []byte{}, "", "invalid_argument"},
		{"a request that is a JSON array", "storage", "get-node-resource-info", nil, []byte(`[{"nodename": "n1"}]`), "", "invalid_argument"},
		{"two JSON objects", "compute", "get-node-resource-info", nil, []byte(`{"nodename": "n1"} {"nodename": "n2"}`), "", "invalid_argument"},
		{"a node name that is not a string", "storage", "get-node-resource-info", nil, []byte(`{"nodename": 5}`), "", "invalid_argument"},
		{"a request above 16 MiB", "storage", "get-node-resource-info", nil, big, "", "invalid_argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdin := tc.stdin
			if tc.request != nil {
				stdin = []byte(mustJSON(t, tc.request))
			}
			stdout, stderr, code := e.run(t, tc.resource, tc.verb, stdin)
			require.Equal(t, 128, code, "exit status; stderr: %s", stderr)
			require.Empty(t, stdout, "no answer on stdout")
			where := regexp.QuoteMeta(tc.resource + ": " + tc.verb + ": ")
			if tc.node != "" {
				where += regexp.QuoteMeta("node " + tc.node + ": ")
			}
			class := classes
			if tc.class != "" {
				class = tc.class
			}
			require.Regexp(t, "^"+where+"(node [^:]+: )?("+class+"): \\S[^\n]*\n$", stderr, "one line on stderr")
		})
	}
}

func TestFailedCallsReachCoreAsErrorsWithoutAnAnswer(t *testing.T) {
	e := newEnv(t)
	storage := e.plugin(t, "storage")
	compute := e.plugin(t, "compute")
	addNode(t, storage, "n1", n1Request, nil)
	addNode(t, compute, "n1", params{"cpu": 4, "memory": "8G"}, nil)

	cases := []struct {
		name string
		call func(t *testing.T) (any, error)
	}{
		{"calculate-deploy asking more than fits", func(t *testing.T) (any, error) {
			return storage.CalculateDeploy(t.Context(), "n1", 100, params{"volumes": []string{"AUTO:/data:rw:100G"}})
		}},
		{"calculate-deploy with a malformed binding", func(t *testing.T) (any, error) {
			return storage.CalculateDeploy(t.Context(), "n1", 1, params{"volumes": []string{"AUTO:/data:rw:lots"}})
		}},
		{"get-nodes-deploy-capacity with a malformed request", func(t *testing.T) (any, error) {
			return storage.GetNodesDeployCapacity(t.Context(), []string{"n1"}, params{"storage": "lots"})
		}},
		{"calculate-realloc of a workload resource that is not the stored shape", func(t *testing.T) (any, error) {
			return storage.CalculateRealloc(t.Context(), "n1", params{"volume_plan_request": "x"}, params{"volumes": []string{"AUTO:/data:rw:1G"}})
		}},
		{"set-node-resource-capacity with an unreadable size", func(t *testing.T) (any, error) {
			return storage.SetNodeResourceCapacity(t.Context(), "n1", nil, params{"volumes": []string{"/data2:lots"}}, true, true)
		}},
		{"set-node-resource-usage with a workload resource of the wrong type", func(t *testing.T) (any, error) {
			return compute.SetNodeResourceUsage(t.Context(), "n1", nil, nil, []plugintypes.WorkloadResource{{"cpu_request_millis": "lots"}}, true, true)
		}},
		{"add-node of a node that exists", func(t *testing.T) (any, error) {
			return compute.AddNode(t.Context(), "n1", params{"cpu": 4, "memory": "8G"}, nil)
		}},
		{"fix-node-resource of an unknown node", func(t *testing.T) (any, error) {
			return compute.FixNodeResource(t.Context(), "ghost", nil)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is an error in core, not a half-parsed answer", func(t *testing.T) {
			resp, err := tc.call(t)
			require.Error(t, err)
			require.Equal(t, 128, exitCode(t, err))
			v := reflect.ValueOf(resp)
			require.Equal(t, reflect.Pointer, v.Kind())
			require.True(t, v.Elem().IsZero(), "core's answer stays empty: %+v", v.Elem().Interface())
		})
	}
}

func TestUnreachableEtcdFailsWellInsideCallTimeout(t *testing.T) {
	e := newEnv(t)
	port, err := freePort()
	require.NoError(t, err)
	dead := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, resource := range resourceNames {
		e.writeConfig(t, resource, dead)
	}

	for _, resource := range resourceNames {
		t.Run(resource+" answers core with a failure before core's timeout kills it", func(t *testing.T) {
			p := e.plugin(t, resource)
			start := time.Now()
			_, err := p.GetNodeResourceInfo(t.Context(), "n1", nil)
			took := time.Since(start)
			require.Error(t, err)
			require.Equal(t, 128, exitCode(t, err), "the plugin exited by itself rather than being killed at the timeout")
			require.Less(t, took, failFast, "the default etcd dial timeout is 2s; core's call_timeout is often a few seconds")

			stdout, stderr, code := e.run(t, resource, "get-node-resource-info", []byte(`{"nodename": "n1"}`))
			require.Equal(t, 128, code)
			require.Empty(t, stdout)
			require.Regexp(t, "^"+resource+": get-node-resource-info: node n1: ("+classes+"): \\S[^\n]*\n$", stderr)
		})
	}
}

func TestConcurrentUsageWritesAreNeverLost(t *testing.T) {
	e := newEnv(t)
	storage := e.plugin(t, "storage")
	compute := e.plugin(t, "compute")
	addNode(t, storage, "n1", n1Request, nil)
	addNode(t, compute, "n1", params{"cpu": 64, "memory": "256G"}, nil)
	storageDeploy, err := storage.CalculateDeploy(t.Context(), "n1", 1, params{"volumes": []string{"AUTO:/data:rw:10G"}})
	require.NoError(t, err)
	computeDeploy, err := compute.CalculateDeploy(t.Context(), "n1", 1, params{"cpu": 0.5, "memory": "1G"})
	require.NoError(t, err)

	cases := []struct {
		resource string
		workload plugintypes.WorkloadResource
		// held is what n writes of the workload add up to
		held func(t *testing.T, usage plugintypes.NodeResource, n int64)
	}{
		{"storage", storageDeploy.WorkloadsResource[0], func(t *testing.T, usage plugintypes.NodeResource, n int64) {
			u := asStorageNode(t, usage)
			require.Equal(t, n*10*GiB, u.Storage)
			require.Equal(t, n*10*GiB, u.Volumes["/data0"])
		}},
		{"compute", computeDeploy.WorkloadsResource[0], func(t *testing.T, usage plugintypes.NodeResource, n int64) {
			require.Equal(t, computeNode{CPUMillis: n * 500, MemoryBytes: n * GiB}, asComputeUsage(t, usage))
		}},
	}
	for _, tc := range cases {
		p := e.plugin(t, tc.resource)

		t.Run(tc.resource+" lands both of two usage writes made at once, as by two cores", func(t *testing.T) {
			before := nodeInfo(t, p, "n1", nil).Usage
			tc.held(t, before, 0)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range errs {
				wg.Go(func() {
					_, errs[i] = p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, []plugintypes.WorkloadResource{tc.workload}, true, plugins.Incr)
				})
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			tc.held(t, nodeInfo(t, p, "n1", nil).Usage, 2)

			// back to no usage, as core's rollback would
			_, err := p.SetNodeResourceUsage(t.Context(), "n1", before, nil, nil, false, false)
			require.NoError(t, err)
			tc.held(t, nodeInfo(t, p, "n1", nil).Usage, 0)
		})

		t.Run(tc.resource+" loses none of many usage writes made at once: each lands or fails visibly", func(t *testing.T) {
			const writers = 8
			request := []byte(mustJSON(t, binarytypes.SetNodeResourceUsageRequest{
				Nodename: "n1", WorkloadsResource: []plugintypes.WorkloadResource{tc.workload}, Delta: true, Incr: true,
			}))
			type result struct {
				stdout, stderr string
				code           int
				err            error
			}
			results := make([]result, writers)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() {
					r := &results[i]
					// no deadline from outside: each writer ends by itself,
					// landed or refused, so the count below is exact
					r.stdout, r.stderr, r.code, r.err = e.exec(t.Context(), time.Minute, tc.resource, []string{"set-node-resource-usage"}, request)
				})
			}
			wg.Wait()
			var landed int64
			for _, r := range results {
				require.NoError(t, r.err)
				if r.code == 0 {
					landed++
					requireOneJSONValue(t, r.stdout)
					continue
				}
				// under heavy load a writer may run out of its store budget:
				// it must say so, and write nothing
				require.Equal(t, 128, r.code)
				require.Regexp(t, "^"+tc.resource+": set-node-resource-usage: node n1: (aborted|unavailable): \\S[^\n]*\n$", r.stderr)
			}
			require.Positive(t, landed, "no writer landed: %+v", results)
			tc.held(t, nodeInfo(t, p, "n1", nil).Usage, landed)
			t.Logf("%d of %d concurrent writers landed", landed, writers)
		})
	}
}

func TestDrainedNodeTakesNoNewWorkInCore(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	for node, volume := range map[string]string{"n1": "300G", "n2": "300G"} {
		_, err := m.AddNode(t.Context(), node, nodeResources(volume), engineInfo("engine-"+node))
		require.NoError(t, err)
	}
	workloads, _, err := m.Alloc(t.Context(), "n1", 1, deployResources("100G"))
	require.NoError(t, err)

	_, stderr, code := e.command(t, "storage", []string{"nodes", "drain", "n1"}, nil)
	require.Zero(t, code, stderr)

	t.Run("core's deploy capacity leaves the draining node out", func(t *testing.T) {
		capacities, total, err := m.GetNodesDeployCapacity(t.Context(), []string{"n1", "n2"}, deployResources("10G"))
		require.NoError(t, err)
		require.Equal(t, []string{"n2"}, keys(capacities))
		require.Equal(t, capacities["n2"].Capacity, total)
	})

	t.Run("core's Alloc on the draining node fails and commits nothing", func(t *testing.T) {
		_, version := e.record(t, "storage", "n1")
		_, _, err := m.Alloc(t.Context(), "n1", 1, deployResources("10G"))
		require.Error(t, err)
		_, after := e.record(t, "storage", "n1")
		require.Equal(t, version, after)
	})

	t.Run("each plugin refuses to plan on the draining node, naming the precondition", func(t *testing.T) {
		for _, resource := range resourceNames {
			request := binarytypes.CalculateDeployRequest{Nodename: "n1", DeployCount: 1, WorkloadResourceRequest: deployResources("10G")[resource]}
			_, err := e.plugin(t, resource).CalculateDeploy(t.Context(), "n1", 1, request.WorkloadResourceRequest)
			require.Error(t, err, resource)
			require.Equal(t, 128, exitCode(t, err))
			_, stderr, code := e.run(t, resource, "calculate-deploy", []byte(mustJSON(t, request)))
			require.Equal(t, 128, code)
			require.Equal(t, resource+": calculate-deploy: node n1: failed_precondition: node is draining\n", stderr)
		}
	})

	t.Run("core's Realloc that shrinks a workload on the draining node passes, one that grows it fails", func(t *testing.T) {
		_, _, grown, err := m.Realloc(t.Context(), "n1", workloads[0], resourcetypes.Resources{"storage": {"volumes": []string{"AUTO:/data:rw:-10G"}}})
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"/data0": 90 * GiB}, planBytes(asStorageWorkload(t, grown["storage"]).VolumePlanRequest))

		_, _, _, err = m.Realloc(t.Context(), "n1", grown, resourcetypes.Resources{"storage": {"volumes": []string{"AUTO:/data:rw:10G"}}})
		require.Error(t, err)
	})
}

// core's GetMostIdleNode, which picks the node a build runs on, takes the
// answer of the highest priority, and its own cpumem answers with 100: a
// node the registry refuses must still not come out of it.
func TestCoreNeverPicksANodeThatMayTakeNoWorkAsMostIdle(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	for _, node := range []string{"n1", "n2", "n3"} {
		_, err := m.AddNode(t.Context(), node, nodeResources("300G"), engineInfo("engine-"+node))
		require.NoError(t, err)
	}
	// n1 is the busiest for cpumem and compute alike
	_, _, err := m.Alloc(t.Context(), "n1", 2, deployResources("10G"))
	require.NoError(t, err)

	t.Run("with every node placeable core follows cpumem to an idle node", func(t *testing.T) {
		node, err := m.GetMostIdleNode(t.Context(), []string{"n1", "n2", "n3"})
		require.NoError(t, err)
		require.Contains(t, []string{"n2", "n3"}, node)
	})

	_, stderr, code := e.command(t, "storage", []string{"nodes", "drain", "n2"}, nil)
	require.Zero(t, code, stderr)
	_, stderr, code = e.command(t, "storage", []string{"nodes", "drain", "n3"}, nil)
	require.Zero(t, code, stderr)

	t.Run("with the idle nodes draining core answers the busy node that may take work", func(t *testing.T) {
		for range 8 { // core reads the plugins' answers in map order
			node, err := m.GetMostIdleNode(t.Context(), []string{"n1", "n2", "n3"})
			require.NoError(t, err)
			require.Equal(t, "n1", node)
		}
	})

	t.Run("with every node draining core fails", func(t *testing.T) {
		_, stderr, code := e.command(t, "storage", []string{"nodes", "drain", "n1"}, nil)
		require.Zero(t, code, stderr)
		_, err := m.GetMostIdleNode(t.Context(), []string{"n1", "n2", "n3"})
		// core keeps the first plugin's error in the message, in its order
		require.ErrorContains(t, err, "exit status 128")
	})
}

func TestWorkloadsFromBeforeThePluginExisted(t *testing.T) {
	// core hands plugins each workload's resource under the plugin's name;
	// a workload deployed before the plugin was installed has none, and
	// core sends null for it.
	e := newEnv(t)
	cases := []struct {
		resource string
		node     params
		request  params
	}{
		{"storage", n1Request, params{"volumes": []string{"AUTO:/data:rw:10G"}}},
		{"compute", params{"cpu": 4, "memory": "8G"}, params{"cpu": 1, "memory": "1G"}},
	}
	for _, tc := range cases {
		t.Run(tc.resource+" counts a null workload resource as holding nothing", func(t *testing.T) {
			p := e.plugin(t, tc.resource)
			addNode(t, p, "n1", tc.node, nil)
			deploy, err := p.CalculateDeploy(t.Context(), "n1", 1, tc.request)
			require.NoError(t, err)
			_, err = p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, deploy.WorkloadsResource, true, plugins.Incr)
			require.NoError(t, err)
			withOld := []plugintypes.WorkloadResource{nil, deploy.WorkloadsResource[0], nil}

			info := nodeInfo(t, p, "n1", withOld)
			require.NotNil(t, info.Diffs)
			require.Empty(t, info.Diffs)
			fixed, err := p.FixNodeResource(t.Context(), "n1", withOld)
			require.NoError(t, err)
			require.JSONEq(t, mustJSON(t, info.Usage), mustJSON(t, fixed.Usage))

			remap, err := p.CalculateRemap(t.Context(), "n1", map[string]plugintypes.WorkloadResource{"old": nil, "new": deploy.WorkloadsResource[0]})
			require.NoError(t, err)
			require.Empty(t, remap.EngineParamsMap, "a remap names no workload, so core updates no engine")

			// core's remove and dissociate of such a workload gather no
			// resource of this plugin and send workloads_resource null
			for _, incr := range []bool{plugins.Decr, plugins.Incr} {
				resp, err := p.SetNodeResourceUsage(t.Context(), "n1", nil, nil, nil, true, incr)
				require.NoError(t, err)
				require.JSONEq(t, mustJSON(t, info.Usage), mustJSON(t, resp.After), "a write of no workload changes no usage (incr %v)", incr)
				require.JSONEq(t, mustJSON(t, info.Usage), mustJSON(t, nodeInfo(t, p, "n1", nil).Usage))
			}

			realloc, err := p.CalculateRealloc(t.Context(), "n1", nil, tc.request)
			require.NoError(t, err, "an old workload can be given the resource by a realloc")
			require.JSONEq(t, mustJSON(t, deploy.WorkloadsResource[0]), mustJSON(t, realloc.WorkloadResource),
				"the realloc plans what a deploy of the same request plans")
		})
	}
}

func TestPluginFolderHoldsNothingCoreWouldLoadAsAPlugin(t *testing.T) {
	// With no etcd configured the plugins keep an embedded store, and a log
	// file, next to their config: in the folder core scans for plugins.
	e := newEnv(t)
	for _, resource := range resourceNames {
		config := "log:\n  file: \"plugins.log\"\nembedded:\n  path: \"eru-resources.db\"\n"
		require.NoError(t, os.WriteFile(filepath.Join(e.dir, resource+".yaml"), []byte(config), 0o644))
	}
	storage := e.plugin(t, "storage")
	compute := e.plugin(t, "compute")
	addNode(t, storage, "n1", n1Request, nil)
	addNode(t, compute, "n1", params{"cpu": 4, "memory": "8G"}, nil)
	require.Equal(t, 4*TiB, asStorageNode(t, nodeInfo(t, storage, "n1", nil).Capacity).Storage, "the embedded store keeps the record between calls")

	entries, err := os.ReadDir(e.dir)
	require.NoError(t, err)
	var files []string
	for _, entry := range entries {
		files = append(files, entry.Name())
	}
	require.Contains(t, files, "eru-resources.db", "the embedded store lives in the plugin folder")

	m := e.manager(t)
	names := []string{}
	for _, p := range m.GetPlugins() {
		names = append(names, p.Name())
	}
	require.ElementsMatch(t, []string{"cpumem", "compute", "storage"}, names, "files in the folder: %v", files)
}

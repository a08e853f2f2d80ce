package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd"
)

// TestADrainedNodeHoldingAPoolObjectIsDrainingInTheDaemonsMetrics: a node
// whose only usage is a held pool object still holds usage (nodes get says
// DRAINING, retire refuses it); /metrics and a get-metrics through the
// daemon, which read the cache's decoded records, must say the same.
func TestADrainedNodeHoldingAPoolObjectIsDrainingInTheDaemonsMetrics(t *testing.T) {
	c := newCluster(t, 1)
	op := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cmd.MainWith(cmd.Options{Config: c.cfg}, "storage", args, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, _, errb := c.served("storage", "add-node", `{"nodename":"p1","resource":{"storage":"1T","pools":["ceph-a:/mnt/ceph-a"]}}`)
	require.Equal(t, 0, code, errb)
	code, _, errb = op("pools", "set-capacity", "ceph-a", "250G", "--if-version", "0")
	require.Equal(t, 0, code, errb)
	code, plan, errb := c.served("storage", "calculate-deploy", `{"nodename":"p1","deploy_count":1,"workload_resource_request":{"volumes":["POOL@ceph-a:/data:rw:100G"]}}`)
	require.Equal(t, 0, code, errb)
	var deploy struct {
		Workloads []json.RawMessage `json:"workloads_resource"`
	}
	require.NoError(t, json.Unmarshal([]byte(plan), &deploy), plan)
	in, err := json.Marshal(map[string]any{"nodename": "p1", "workloads_resource": deploy.Workloads, "delta": true, "incr": true})
	require.NoError(t, err)
	code, _, errb = c.served("storage", "set-node-resource-usage", string(in))
	require.Equal(t, 0, code, errb)
	code, out, errb := op("nodes", "drain", "p1")
	require.Equal(t, 0, code, errb)
	var node struct{ Status string }
	require.NoError(t, json.Unmarshal([]byte(out), &node), out)
	require.Equal(t, "DRAINING", node.Status, "the registry: the pool object is usage")

	t.Run("get-metrics through the daemon answers as the binary does: node_schedulable 0", func(t *testing.T) {
		want := `{"name":"node_schedulable","labels":["p","p1"],"key":"core.node.p1.storage.schedulable","value":"0"}`
		code, cold, errb := c.cold("storage", "get-metrics", c.metricsRequest(t, []string{"p1"}))
		require.Equal(t, 0, code, errb)
		require.Contains(t, cold, want)
		code, served, errb := c.served("storage", "get-metrics", c.metricsRequest(t, []string{"p1"}))
		require.Equal(t, 0, code, errb)
		require.Equal(t, cold, served)
	})
	t.Run("the scrape's eru_node_status says DRAINING", func(t *testing.T) {
		require.Eventually(t, func() bool {
			rec := httptest.NewRecorder()
			c.d.metricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			return strings.Contains(rec.Body.String(), "\neru_node_status{nodename=\"p1\",status=\"DRAINING\"} 1\n")
		}, 5*time.Second, 20*time.Millisecond)
	})
}

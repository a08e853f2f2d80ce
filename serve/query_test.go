package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAQueryParameterTheRouteDoesNotTakeIsRefused: as with a body field, a
// misspelt or repeated filter is invalid_argument, never dropped: dropped,
// `GET /v1/nodes?stauts=DRAINED` answers every node as if each were
// drained, and `?status=READY&status=DRAINED` answers one of the two
// (the first here, the last on the command line); and a write's
// `?if_version=7` (a body field) would write unguarded.
func TestAQueryParameterTheRouteDoesNotTakeIsRefused(t *testing.T) {
	srv := poolNodeAPI(t)
	for _, c := range []struct {
		method string
		path   string
		status int
		says   string
	}{
		{"GET", "/v1/nodes?status=READY", 200, `"node_id":"n1"`},
		{"GET", "/v1/nodes?status=DRAINED", 200, `{"nodes":[]}`},
		{"GET", "/v1/nodes?stauts=DRAINED", 400, `unknown query parameter \"stauts\"`},
		{"GET", "/v1/nodes?status=DRAINED&status=READY", 400, `query parameter \"status\" given 2 times`},
		{"GET", "/v1/nodes?status=%zz", 400, `"code":"invalid_argument"`},
		{"GET", "/v1/pools/ceph-a/objects?nodes=n2", 400, `unknown query parameter \"nodes\"`},
		{"GET", "/v1/nodes/n1?status=DRAINED", 400, `unknown query parameter \"status\"`},
		{"POST", "/v1/nodes/n1:drain?if_version=7", 400, `unknown query parameter \"if_version\"`},
		{"GET", "/v1/nodes/n1", 200, `"drain":false`},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", c.path, body)
		require.Contains(t, string(body), c.says, c.path)
		require.True(t, json.Valid(body), c.path)
	}
}

// poolNodeAPI is the operator API, behind token "tok", of a daemon on the
// embedded store holding node n1, which declares pool ceph-a.
func poolNodeAPI(t *testing.T) *httptest.Server {
	t.Helper()
	d, _ := flowDaemon(t, "", nil)
	code, _, errb := d.run(d.options(d.cfg, d.linearizable()), "storage", []string{"add-node"}, []byte(`{"nodename":"n1","resource":{"storage":"1T","pools":["ceph-a:/mnt/ceph-a"]}}`))
	require.Equal(t, 0, code, string(errb))
	srv := httptest.NewServer(d.Handler("tok"))
	t.Cleanup(srv.Close)
	return srv
}

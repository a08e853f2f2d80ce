package serve

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/forward"
)

// requestSeries are the eru_serve_requests_total series of the daemon's
// registry: "verb/result" -> count.
func requestSeries(t *testing.T, d *Daemon) map[string]float64 {
	t.Helper()
	families, err := d.metrics.reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "eru_serve_requests_total" {
			continue
		}
		for _, m := range f.Metric {
			var verb, result string
			for _, l := range m.Label {
				switch l.GetName() {
				case "verb":
					verb = l.GetValue()
				case "result":
					result = l.GetValue()
				}
			}
			out[verb+"/"+result] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestAnHTTPRouteIsCountedUnderOneLabelWhateverItsResult: a route's
// requests are counted under the label its answers are timed and counted
// under, whether it was answered or refused by flow control, so that
// rejected/(ok+failed+rejected) of a route is a ratio of one series set;
// and /metrics and /v1/clock, which the daemon answers, are counted too.
func TestAnHTTPRouteIsCountedUnderOneLabelWhateverItsResult(t *testing.T) {
	var reject atomic.Bool
	d, _ := flowDaemon(t, "", func(ctx context.Context, r Request) (*Admitted, *Rejection) {
		if reject.Load() {
			return nil, &Rejection{Level: "operator", Schema: "operator"}
		}
		return AdmitAll(ctx, r)
	})
	srv := httptest.NewServer(d.Handler("tok"))
	defer srv.Close()
	do := func(method, path string) int {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer wrong") // refused when admitted: nothing runs
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, path, route, answered string
	}{
		{"POST", "/v1/nodes/n1:drain", "POST /v1/nodes/{id}:action", "refused"},
		{"POST", "/v1/nodes/n1:heartbeat", "POST /v1/nodes/{id}:heartbeat", "refused"},
		{"POST", "/v1/pools/ceph-a:declare-lost", "POST /v1/pools/{id}:declare-lost", "refused"},
		{"GET", "/v1/nodes/n1", "GET /v1/nodes/{id}", "failed"},
		{"GET", "/metrics", "GET /metrics", "ok"},
		{"GET", "/v1/clock", "GET /v1/clock", "ok"},
	} {
		t.Run(c.method+" "+c.path+" is counted as "+c.route+" answered and rejected", func(t *testing.T) {
			reject.Store(false)
			require.NotEqual(t, http.StatusTooManyRequests, do(c.method, c.path))
			reject.Store(true)
			require.Equal(t, http.StatusTooManyRequests, do(c.method, c.path))
			reject.Store(false)
			series := requestSeries(t, d)
			require.Equal(t, 1.0, series[c.route+"/"+c.answered], "%v", series)
			require.Equal(t, 1.0, series[c.route+"/rejected"], "%v", series)
		})
	}
	t.Run("every route label counted is one a route is timed under", func(t *testing.T) {
		families, err := d.metrics.reg.Gather()
		require.NoError(t, err)
		timed := map[string]bool{}
		for _, f := range families {
			if f.GetName() != "eru_serve_request_duration_seconds" {
				continue
			}
			for _, m := range f.Metric {
				timed[m.Label[0].GetValue()] = true
			}
		}
		for key := range requestSeries(t, d) {
			verb := key[:strings.LastIndexByte(key, '/')]
			require.True(t, timed[verb], "requests counted as %q, a label no latency is recorded under (%v)", verb, timed)
		}
	})
}

// TestAVerbTheDaemonDoesNotKnowAddsNoSeries: the verb label of
// eru_serve_requests_total takes the plugin verbs only. A peer sending
// other names (a client of another version, a script) is declined; were
// each name its own series, every distinct string would stay in the
// registry, and in every scrape, for the daemon's life.
func TestAVerbTheDaemonDoesNotKnowAddsNoSeries(t *testing.T) {
	d, file := flowDaemon(t, "", AdmitAll)
	sock := filepath.Join(filepath.Dir(file), forward.DefaultSocket)
	for i := range 50 {
		conn, err := net.Dial("unix", sock)
		require.NoError(t, err)
		verb := fmt.Sprintf("no-such-verb-%d", i)
		require.NoError(t, forward.WriteRequest(conn, forward.Request{Binary: "storage", Args: []string{verb}, Config: file, Dir: filepath.Dir(file), Verb: verb}, nil))
		status := make([]byte, 1)
		_, err = io.ReadFull(conn, status)
		require.NoError(t, err)
		require.Equal(t, forward.Declined, status[0])
		_ = conn.Close()
	}
	series := requestSeries(t, d)
	require.LessOrEqual(t, len(series), 1, "one series per unknown verb: %v", series)
	require.Equal(t, 50.0, series["unknown/declined"], "%v", series)
}

package serve

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
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

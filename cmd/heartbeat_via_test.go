package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/types"
)

type flagMap map[string]string

func (f flagMap) String(name string) string { return f[name] }

// TestTheViaClientSendsItsOwnClockReading runs the node's half of the
// exchange against a stand-in daemon, with the node's clock injected: the
// reading it sends is its clock's, taken after the stamp arrived; the
// stamp comes back as it was; the token goes only with the write; an
// error answer keeps the daemon's class.
func TestTheViaClientSendsItsOwnClockReading(t *testing.T) {
	skewed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var got HeartbeatRequest
	var clockAuth, beatAuth, action string
	var decodeErr error
	status := http.StatusOK
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/clock", func(w http.ResponseWriter, r *http.Request) {
		clockAuth = r.Header.Get("Authorization")
		_ = json.NewEncoder(w).Encode(ClockStamp{DaemonTime: time.Now(), Stamp: "sealed-1"})
	})
	mux.HandleFunc("POST /v1/nodes/{action}", func(w http.ResponseWriter, r *http.Request) {
		// Only recorded here: the test's goroutine checks them.
		action, beatAuth = r.PathValue("action"), r.Header.Get("Authorization")
		data, _ := io.ReadAll(r.Body)
		decodeErr = json.Unmarshal(data, &got)
		w.WriteHeader(status)
		if status != http.StatusOK {
			_, _ = io.WriteString(w, `{"code":"failed_precondition","message":"node n1 is retired"}`)
			return
		}
		_, _ = io.WriteString(w, `{"node_id":"n1","status":"READY"}`+"\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	v, err := newViaClient(flagMap{"via": srv.URL + "/"}, 5*time.Second)
	require.NoError(t, err)
	v.token = "tok"
	v.now = func() time.Time { return skewed }

	t.Run("a heartbeat carries the node's reading, the stamp and the measurement", func(t *testing.T) {
		mem := int64(1 << 30)
		answer, err := v.heartbeat(context.Background(), "n1", nodes.Measurement{BootID: "b1", ClockSync: nodes.ClockSynchronized, MemoryAvailable: &mem}, "20s", true)
		require.NoError(t, err)
		require.NoError(t, decodeErr)
		require.Equal(t, "n1:heartbeat", action)
		require.True(t, got.NodeTime.Equal(skewed))
		require.Equal(t, "sealed-1", got.Stamp)
		require.Equal(t, "20s", got.TTL)
		require.True(t, got.Register)
		require.Equal(t, "b1", got.Measurement.BootID)
		require.Equal(t, mem, *got.Measurement.MemoryAvailable)
		require.Nil(t, got.Measurement.Offset, "the offset is the daemon's to measure")
		require.Empty(t, clockAuth, "the stamp is a read: no token sent")
		require.Equal(t, "Bearer tok", beatAuth)
		require.Equal(t, nodes.StatusReady, answer.Value.Status)
		require.JSONEq(t, `{"node_id":"n1","status":"READY"}`, string(answer.JSON))
	})

	t.Run("an error answer keeps the daemon's class", func(t *testing.T) {
		status = http.StatusBadRequest
		_, err := v.heartbeat(context.Background(), "n1", nodes.Measurement{}, "", false)
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
		require.ErrorContains(t, err, "node n1 is retired")
	})

	t.Run("a daemon nobody answers at is unavailable", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		url := down.URL
		down.Close()
		d, err := newViaClient(flagMap{"via": url}, 5*time.Second)
		require.NoError(t, err)
		_, err = d.heartbeat(context.Background(), "n1", nodes.Measurement{}, "", false)
		require.Equal(t, types.Unavailable, types.ClassOf(err))
	})
}

func TestTheViaFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags flagMap
		want  string
	}{
		{"a URL that is not http", flagMap{"via": "unix:///run/x.sock"}, `--via "unix:///run/x.sock": want the daemon's http:// or https:// URL`},
		{"a URL without a host", flagMap{"via": "http://"}, "want the daemon's http:// or https:// URL"},
		{"a missing token file", flagMap{"via": "http://h", "token-file": "/nonexistent/token"}, "--token-file /nonexistent/token"},
		{"a certificate without its key", flagMap{"via": "https://h", "tls-cert": "c.pem"}, "--tls-cert and --tls-key go together"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := newViaClient(c.flags, time.Second)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			require.ErrorContains(t, err, c.want)
		})
	}
}

// A heartbeat sent through the daemon carries a measurement the node
// made, not one Measure read here: the daemon refuses one no host could
// have taken (a clock state that is none, a negative error or memory, a
// pressure beyond 100%) before anything is written, so that no reading
// made up escapes the clock check or shows as a figure.
func TestTheDaemonRefusesAMeasurementNoHostCouldTake(t *testing.T) {
	dir := t.TempDir()
	configFile := filepath.Join(dir, "plugins.yaml")
	require.NoError(t, os.WriteFile(configFile, fmt.Appendf(nil, "embedded:\n  path: %q\n", filepath.Join(dir, "store.db")), 0o644))
	run := func(stdin string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main("storage", append([]string{"--config", configFile}, args...), strings.NewReader(stdin), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, _, stderr := run(`{"nodename":"n1","resource":{"volumes":["/data0:1G"]}}`, "add-node")
	require.Equal(t, 0, code, stderr)
	cfg, err := config.Load(configFile, "storage")
	require.NoError(t, err)
	neg := time.Duration(-1)
	minus, over := int64(-1), int64(10001)
	for _, c := range []struct {
		name string
		m    nodes.Measurement
		says string
	}{
		{"a clock state that is none of the kernel's is refused", nodes.Measurement{ClockSync: "FINE"}, `clock_sync "FINE"`},
		{"a negative clock error is refused", nodes.Measurement{ClockSync: nodes.ClockSynchronized, ClockMaxError: &neg}, "clock_max_error_ns -1"},
		{"a negative available memory is refused", nodes.Measurement{MemoryAvailable: &minus}, "memory_available_bytes -1"},
		{"a CPU pressure beyond 100% is refused", nodes.Measurement{CPUPressureBP: &over}, "cpu_pressure_bp 10001: want 0 to 10000"},
		{"a negative memory pressure is refused", nodes.Measurement{MemoryPressureBP: &minus}, "memory_pressure_bp -1: want 0 to 10000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := RecordHeartbeat(Options{Config: cfg}, "storage", "n1", c.m, 0, false)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err), "%v", err)
			require.ErrorContains(t, err, c.says)
			code, stdout, stderr := run("", "nodes", "get", "n1")
			require.Equal(t, 0, code, stderr)
			require.Contains(t, stdout, `"session":{"ever":false}`, "nothing was written")
		})
	}
	t.Run("a measurement a host could take is recorded", func(t *testing.T) {
		bp := int64(10000)
		raw, err := RecordHeartbeat(Options{Config: cfg}, "storage", "n1", nodes.Measurement{ClockSync: nodes.ClockUnspecified, CPUPressureBP: &bp}, 0, false)
		require.NoError(t, err)
		require.Contains(t, string(raw), `"cpu_pressure_bp":10000`)
	})
}

package serve

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol"
	"github.com/eru-extend/resources/internal/forward"
)

// TestACallWhoseClientLeavesWhileItWaitsIsWithdrawn: a forwarded call
// waiting for a seat, or a write waiting for its node's lock, is dropped
// when its client closes the connection (killed by core's timeout, or a
// read's client that ran the call itself): it never runs and frees its
// place in the queue. A client that only shut its side for writing, as
// every client does once its request is whole, still waits.
func TestACallWhoseClientLeavesWhileItWaitsIsWithdrawn(t *testing.T) {
	const every = 10 * time.Millisecond
	d, file := flowDaemon(t, oneQueue, nil, func(d *Daemon) { d.hangupEvery = every })
	inqueue := func() float64 {
		return gauge(t, d, "eru_flowcontrol_current_inqueue_requests", map[string]string{"priority_level": "placement"})
	}
	withdrawn := func(verb string) float64 {
		return gauge(t, d, "eru_serve_requests_total", map[string]string{"verb": verb, "result": "withdrawn"})
	}
	// send forwards a call as the client does, and leaves its connection
	// open: the request whole, the client's side shut for writing.
	send := func(verb, stdin string) *net.UnixConn {
		conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: d.serve.Socket, Net: "unix"})
		require.NoError(t, err)
		req := forward.Request{Binary: "storage", Args: []string{"--config", file, verb}, Config: file, Dir: filepath.Dir(file), Verb: verb}
		require.NoError(t, forward.WriteRequest(conn, req, []byte(stdin)))
		require.NoError(t, conn.CloseWrite())
		return conn
	}

	t.Run("a queued read whose client closes the connection leaves the queue and never runs", func(t *testing.T) {
		held, err := d.FlowControl().Admit(context.Background(), flowcontrol.Request{Verb: "calculate-deploy", Pod: "pod:other"})
		require.NoError(t, err)
		defer held.Done()
		conn := send("calculate-deploy", `{"nodename":"n1","deploy_count":1}`)
		waitFor(t, "the call to queue", func() bool { return inqueue() == 1 })
		time.Sleep(10 * every)
		require.Equal(t, 1.0, inqueue(), "a client that shut only its writing side still waits")
		require.NoError(t, conn.Close())
		waitFor(t, "the call to leave the queue", func() bool { return inqueue() == 0 })
		waitFor(t, "the withdrawal to be counted", func() bool { return withdrawn("calculate-deploy") == 1 })
		require.Equal(t, 1.0, gauge(t, d, "eru_flowcontrol_rejected_requests_total", map[string]string{"priority_level": "placement", "reason": "cancelled"}))
		require.Zero(t, d.Answered(), "the withdrawn call did not run")
	})

	t.Run("a write waiting for its node's lock whose client closes the connection never runs", func(t *testing.T) {
		unlock := d.lockNode(true, "n1")
		conn := send("set-node-resource-usage", `{"nodename":"n1","resource_request":{"storage":"1G"},"delta":true,"incr":true}`)
		time.Sleep(10 * every)
		require.NoError(t, conn.Close())
		time.Sleep(10 * every)
		unlock()
		waitFor(t, "the withdrawal to be counted", func() bool { return withdrawn("set-node-resource-usage") == 1 })
		require.Zero(t, d.Answered(), "the withdrawn write did not run")
	})

	t.Run("a call whose client stays is answered", func(t *testing.T) {
		conn := send("calculate-deploy", `{"nodename":"n1","deploy_count":1}`)
		defer conn.Close()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		buf := make([]byte, 1)
		_, err := conn.Read(buf)
		require.NoError(t, err)
		waitFor(t, "the call to run", func() bool { return d.Answered() == 1 })
	})
}

// TestAnHTTPRequestWhoseClientLeavesWhileItWaitsIsWithdrawn: as on the
// socket, a request queued for a seat whose client goes away is counted
// withdrawn (docs/serve.md: result withdrawn, its client left while it
// waited), not rejected: flow control refused nobody.
func TestAnHTTPRequestWhoseClientLeavesWhileItWaitsIsWithdrawn(t *testing.T) {
	d, _ := flowDaemon(t, oneQueue, nil)
	srv := httptest.NewServer(d.Handler(""))
	defer srv.Close()
	held, err := d.FlowControl().Admit(context.Background(), flowcontrol.Request{Path: "/v1/nodes", Caller: "someone"})
	require.NoError(t, err)
	defer held.Done()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/nodes", nil)
		if err == nil {
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}
		done <- err
	}()
	inqueue := func() float64 {
		return gauge(t, d, "eru_flowcontrol_current_inqueue_requests", map[string]string{"priority_level": "operator"})
	}
	waitFor(t, "the request to queue", func() bool { return inqueue() == 1 })
	cancel()
	require.Error(t, <-done)
	waitFor(t, "the request to leave the queue", func() bool { return inqueue() == 0 })
	result := func(r string) float64 {
		return gauge(t, d, "eru_serve_requests_total", map[string]string{"verb": "GET /v1/nodes", "result": r})
	}
	waitFor(t, "the withdrawal to be counted", func() bool { return result("withdrawn")+result("rejected") > 0 })
	require.Equal(t, 1.0, result("withdrawn"))
	require.Zero(t, result("rejected"), "nobody was refused")
}

package cmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/types"
)

// The wire of `nodes heartbeat --via`, a two-step exchange that lets the
// daemon measure the node's clock with its own two timestamps:
//
//  1. GET /v1/clock: the daemon answers a ClockStamp, the time it answered
//     (sent) sealed so that only it can have made it.
//  2. The node reads its clock at once and POSTs /v1/nodes/{id}:heartbeat
//     with its measurement, that reading and the stamp. The daemon notes
//     when the request arrived (received): the node's reading was taken
//     between sent and received on the daemon's clock, so the offset is the
//     reading minus their midpoint, true within half the round trip.

// ClockStamp is the daemon's answer to GET /v1/clock.
type ClockStamp struct {
	DaemonTime time.Time `json:"daemon_time"`
	Stamp      string    `json:"stamp"`
}

// HeartbeatRequest is the body of POST /v1/nodes/{id}:heartbeat.
type HeartbeatRequest struct {
	Measurement nodes.Measurement `json:"measurement"`
	// TTL is a Go duration ("30s"); empty takes the daemon's
	// nodes.session_ttl.
	TTL      string `json:"ttl,omitempty"`
	Register bool   `json:"register,omitempty"`
	// Stamp is the daemon's stamp of step 1; NodeTime the node's clock
	// read after it arrived, before this request was sent.
	Stamp    string    `json:"stamp"`
	NodeTime time.Time `json:"node_time"`
}

// RecordHeartbeat is the daemon's half of `nodes heartbeat --via`: it
// records a heartbeat another host measured through the same registry
// operation as `nodes heartbeat`, with the configuration and store of
// opts, and answers the record after as `-o json` prints it. A zero ttl
// takes the configured nodes.session_ttl. The error carries its class.
func RecordHeartbeat(opts Options, binary, node string, m nodes.Measurement, ttl time.Duration, register bool) (json.RawMessage, error) {
	r := &runner{name: binary, opts: opts, stdout: io.Discard, stderr: io.Discard}
	if err := nodes.ValidName(node); err != nil {
		return nil, err
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	cfg, err := r.config()
	if err != nil {
		return nil, err
	}
	if ttl == 0 {
		ttl = cfg.Nodes.SessionTTL
	}
	if ttl, err = nodes.SessionTTL(ttl); err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(cfg)
	defer cancel()
	s, err := r.open(ctx, cfg, config.WriteExisting)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	answer, err := r.registry(s, cfg).Heartbeat(ctx, node, m, ttl, cfg.Nodes.MemoryTightBytes, register, nodes.Command{})
	if err != nil {
		return nil, err
	}
	if answer.JSON != nil {
		return answer.JSON, nil
	}
	return json.Marshal(answer.Value)
}

// viaFlags are the flags of a heartbeat sent through the daemon.
func viaFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "via", Usage: "send the heartbeat through the serve daemon's HTTP API at this URL (http:// or https://), which also measures this host's clock offset", DefaultText: "none: write to the store directly"},
		&cli.StringFlag{Name: "token-file", Usage: "with --via: the file holding the daemon's bearer token (serve.token_file)"},
		&cli.StringFlag{Name: "tls-ca", Usage: "with --via https: the CA that signed the daemon's certificate", DefaultText: "the system's"},
		&cli.StringFlag{Name: "tls-cert", Usage: "with --via https: this node's client certificate, for a daemon with serve.tls.client_ca"},
		&cli.StringFlag{Name: "tls-key", Usage: "with --via https: the key of --tls-cert"},
	}
}

// viaClient talks to the daemon's HTTP API for one node.
type viaClient struct {
	base  string
	token string
	http  *http.Client
	now   func() time.Time // the node's clock
}

// newViaClient checks the --via flags and builds the client.
func newViaClient(c flagReader, timeout time.Duration) (*viaClient, error) {
	u, err := url.Parse(c.String("via"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, types.Invalid("--via %q: want the daemon's http:// or https:// URL", c.String("via"))
	}
	v := &viaClient{base: strings.TrimRight(u.String(), "/"), now: time.Now}
	if f := c.String("token-file"); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, types.Errorf(types.InvalidArgument, "--token-file %s: %w", f, err)
		}
		if v.token = strings.TrimSpace(string(data)); v.token == "" {
			return nil, types.Invalid("--token-file %s is empty", f)
		}
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f := c.String("tls-ca"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, types.Errorf(types.InvalidArgument, "--tls-ca %s: %w", f, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, types.Invalid("--tls-ca %s: no certificate in it", f)
		}
	}
	if cert, key := c.String("tls-cert"), c.String("tls-key"); cert != "" || key != "" {
		if cert == "" || key == "" {
			return nil, types.Invalid("--tls-cert and --tls-key go together")
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, types.Errorf(types.InvalidArgument, "--tls-cert %s, --tls-key %s: %w", cert, key, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	v.http = &http.Client{Transport: tr, Timeout: timeout}
	return v, nil
}

// flagReader is what newViaClient reads of a command line.
type flagReader interface{ String(name string) string }

// heartbeat runs the two-step exchange for one heartbeat of node and
// answers the record after, as the daemon rendered it.
func (v *viaClient) heartbeat(ctx context.Context, node string, m nodes.Measurement, ttl string, register bool) (nodes.Answer[*nodes.View], error) {
	var stamp ClockStamp
	if err := v.call(ctx, http.MethodGet, "/v1/clock", nil, &stamp, false); err != nil {
		return nodes.Answer[*nodes.View]{}, err
	}
	req := HeartbeatRequest{Measurement: m, TTL: ttl, Register: register, Stamp: stamp.Stamp, NodeTime: v.now()}
	return v.record(ctx, "/v1/nodes/"+url.PathEscape(node)+":heartbeat", req)
}

// endSession ends node's session through the daemon.
func (v *viaClient) endSession(ctx context.Context, node string) (nodes.Answer[*nodes.View], error) {
	return v.record(ctx, "/v1/nodes/"+url.PathEscape(node)+":end-session", map[string]any{})
}

func (v *viaClient) record(ctx context.Context, path string, body any) (nodes.Answer[*nodes.View], error) {
	var raw json.RawMessage
	if err := v.call(ctx, http.MethodPost, path, body, &raw, true); err != nil {
		return nodes.Answer[*nodes.View]{}, err
	}
	raw = bytes.TrimSpace(raw)
	view := &nodes.View{}
	if err := json.Unmarshal(raw, view); err != nil {
		return nodes.Answer[*nodes.View]{}, types.Errorf(types.Internal, "daemon %s: the answer is not a node record: %w", v.base, err)
	}
	return nodes.Answer[*nodes.View]{Value: view, JSON: raw}, nil
}

// call sends one request and decodes its answer into out. A daemon that
// cannot be reached is unavailable; a write whose connection failed after
// it was sent may have landed: outcome unknown. An error answer keeps the
// daemon's class.
func (v *viaClient) call(ctx context.Context, method, path string, body, out any, write bool) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, v.base+path, rd)
	if err != nil {
		return types.Errorf(types.InvalidArgument, "--via %s: %w", v.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if v.token != "" && write {
		req.Header.Set("Authorization", "Bearer "+v.token)
	}
	resp, err := v.http.Do(req)
	if err != nil {
		var op *net.OpError
		if !write || (errors.As(err, &op) && op.Op == "dial") {
			return types.Errorf(types.Unavailable, "daemon %s cannot be reached: %w", v.base, err)
		}
		return types.Errorf(types.OutcomeUnknown, "daemon %s: %s %s: the connection failed after the request was sent: %w", v.base, method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		if write {
			return types.Errorf(types.OutcomeUnknown, "daemon %s: %s %s: the answer was cut off: %w", v.base, method, path, err)
		}
		return types.Errorf(types.Unavailable, "daemon %s: %s %s: the answer was cut off: %w", v.base, method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Code, Message string }
		if json.Unmarshal(data, &e) != nil || e.Code == "" {
			return types.Errorf(statusClass(resp.StatusCode), "daemon %s: %s %s: %s", v.base, method, path, strings.TrimSpace(string(types.Clip(data))))
		}
		return types.Errorf(types.Class(e.Code), "daemon %s: %s", v.base, e.Message)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return types.Errorf(types.Internal, "daemon %s: %s %s: the answer is not JSON: %w", v.base, method, path, err)
	}
	return nil
}

// statusClass is the class of an error answer that carries none.
func statusClass(status int) types.Class {
	switch {
	case status == http.StatusTooManyRequests:
		return types.ResourceExhausted
	case status == http.StatusUnauthorized:
		return types.Unauthenticated
	case status == http.StatusForbidden:
		return types.PermissionDenied
	case status == http.StatusNotFound:
		return types.NotFound
	case status >= 500:
		return types.Unavailable
	}
	return types.Internal
}

// viaTimeout bounds one call to the daemon.
func viaTimeout(cfg *config.Config) time.Duration {
	return max(cfg.Etcd.CallTimeout, 5*time.Second)
}

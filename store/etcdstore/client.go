package etcdstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// client makes etcd's unary gRPC calls over net/http's HTTP/2: h2c with
// prior knowledge on http:// endpoints, HTTP/2 over TLS on https:// ones.
// A call goes to the endpoints in turn (from one picked at random),
// skipping one whose connection failed lately; a call that could not be
// sent (no connection, or none within its share of the dial timeout, see
// connectWait) is sent again, to the next endpoint, until its context
// ends, as grpc's wait-for-ready does. A call that was sent is never sent
// again, except after etcd refused its auth token (then it was not
// applied); a read that etcd answered with an election's error is a new
// call (see hedged).
type client struct {
	endpoints []*endpoint
	secure    map[string]bool // host:port -> speaks TLS
	tls       *tls.Config     // nil: the system's roots, no client certificate
	dialer    *net.Dialer
	dial      time.Duration
	transport *http.Transport
	http      *http.Client
	turn      atomic.Uint64

	connMu sync.Mutex
	conns  map[*trackedConn]struct{} // open connections, closed by close
	closed bool
	// closing ends when the client is closed, and with it any dial.
	closing context.Context
	stop    context.CancelFunc

	username, password string
	token              atomic.Pointer[string]
	authMu             sync.Mutex // one authentication at a time
}

// endpoint is one etcd member's address.
type endpoint struct {
	base string // http://host:port: h2c on the client's own connections (TLS when secure)
	up   atomic.Bool
	// downUntil is when a member whose connection failed is tried again
	// before the others (unix nanoseconds).
	downUntil atomic.Int64
}

// downFor is how long an endpoint whose connection failed is passed over
// (grpc's first reconnect backoff).
const downFor = time.Second

// newClient builds a client of endpoints; tlsCfg is nil when no TLS file is
// configured.
//
// net/http speaks HTTP/2 to every endpoint as h2c with prior knowledge, on
// connections the client dials itself: plain TCP for an http:// endpoint,
// TLS (ALPN h2) for an https:// one. A connection is handed over only
// once etcd has said its first word on it (see handshake): in TLS 1.3 the server judges
// the client's certificate after the client's handshake is done, and its
// refusal comes as that first word. A refused certificate is then a
// connection that never came up — nothing is sent on it — as with grpc.
func newClient(endpoints []string, tlsCfg *tls.Config, dial time.Duration) (*client, error) {
	c := &client{secure: map[string]bool{}}
	c.closing, c.stop = context.WithCancel(context.Background())
	for _, e := range endpoints {
		host, secure, err := endpointHost(e, tlsCfg != nil)
		if err != nil {
			return nil, &SettingError{Key: "etcd.machines", Value: e, Err: err}
		}
		c.endpoints = append(c.endpoints, &endpoint{base: "http://" + host})
		c.secure[host] = secure
	}
	if len(c.endpoints) == 0 {
		return nil, errors.New("no endpoint")
	}
	// Each client starts its turns at a member of its own: the processes
	// core execs, one call each, spread over the cluster instead of all
	// starting at the same member.
	c.turn.Store(rand.Uint64N(uint64(len(c.endpoints))))
	c.dialer = &net.Dialer{KeepAlive: 30 * time.Second, Timeout: dial}
	c.tls = tlsCfg
	c.dial = dial
	t := &http.Transport{
		DialContext:         c.dialContext,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		Protocols:           new(http.Protocols),
	}
	// No HTTP/2 health-check pings (clientv3 as Open configured it sent
	// no keepalives either): net/http's ping timer outlives the connection
	// it watches and keeps it in memory for that long.
	t.Protocols.SetUnencryptedHTTP2(true)
	c.transport = t
	// A redirect is not followed: gRPC has none, and following it would
	// send the call again, with its token, to wherever it points.
	c.http = &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

// endpointHost is the host:port of an etcd endpoint and whether it speaks
// TLS, as clientv3 reads an endpoint: http:// is plain, https:// is TLS, and
// a bare host:port is TLS when TLS files are configured.
func endpointHost(written string, tlsFiles bool) (string, bool, error) {
	e := written
	if !strings.Contains(e, "://") {
		scheme := "http"
		if tlsFiles {
			scheme = "https"
		}
		e = scheme + "://" + e
	}
	u, err := url.Parse(e)
	if err != nil {
		return "", false, fmt.Errorf("endpoint %q: %w", written, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" {
		// Without a port net/http would dial host:80, which secure does
		// not name: an https:// endpoint would be spoken to in clear text
		// (credentials included) on port 80.
		return "", false, fmt.Errorf("endpoint %q: not host:port, http://host:port or https://host:port", written)
	}
	return u.Host, u.Scheme == "https", nil
}

// dialContext dials an endpoint's connection (see newClient) and keeps it
// until it is closed, so that close ends every connection, idle or not,
// and every dial still under way (net/http dials on after the call that
// asked for the connection has given up).
func (c *client) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.closing, cancel)()
	raw, err := c.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	t := &trackedConn{Conn: raw, c: c}
	c.connMu.Lock()
	if c.closed {
		c.connMu.Unlock()
		_ = raw.Close()
		return nil, net.ErrClosed
	}
	if c.conns == nil {
		c.conns = map[*trackedConn]struct{}{}
	}
	c.conns[t] = struct{}{}
	c.connMu.Unlock()
	conn, err := c.handshake(ctx, t, addr)
	if err != nil {
		_ = t.Close()
		return nil, err
	}
	return conn, nil
}

// trackedConn is a connection the client closes when it is closed.
type trackedConn struct {
	net.Conn
	c    *client
	once sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.c.connMu.Lock()
		delete(t.c.conns, t)
		t.c.connMu.Unlock()
	})
	return t.Conn.Close()
}

// defaultDialWait bounds a connection's handshake when no dial timeout is
// configured (grpc's least connect timeout).
const defaultDialWait = 20 * time.Second

// clientPreface is what an HTTP/2 client says first on a connection.
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// handshake makes raw, a connection to addr, an HTTP/2 connection etcd has
// accepted, as grpc makes a connection ready: one on which etcd has said
// its first word. A member that is stopped (SIGSTOP), or cut off, accepts
// connections in its kernel and never speaks: nothing is sent on them.
// Over TLS, the handshake's; on a plain connection, etcd speaks once the
// client's preface is in (etcd's listener reads it to tell gRPC from
// HTTP/1), so the preface is sent here and dropped from what net/http
// writes first.
func (c *client) handshake(ctx context.Context, raw net.Conn, addr string) (net.Conn, error) {
	// The handshake and etcd's first word within the dial timeout, and
	// the context's deadline.
	deadline := time.Now().Add(defaultDialWait)
	if c.dial > 0 {
		deadline = time.Now().Add(c.dial)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = raw.SetDeadline(deadline)
	secure, known := c.secure[addr]
	if !known {
		return nil, fmt.Errorf("%s is none of the endpoints", addr)
	}
	if !secure {
		if _, err := io.WriteString(raw, clientPreface); err != nil {
			return nil, err
		}
		first, err := firstWord(raw)
		if err != nil {
			return nil, err
		}
		_ = raw.SetDeadline(time.Time{})
		return &primedConn{Conn: raw, first: first, skip: []byte(clientPreface)}, nil
	}
	cfg := &tls.Config{}
	if c.tls != nil {
		cfg = c.tls.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	cfg.NextProtos = []string{"h2"}
	tc := tls.Client(raw, cfg)
	fail := func(err error) (net.Conn, error) {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return fail(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		return fail(fmt.Errorf("etcd does not speak HTTP/2 over TLS (ALPN %q)", p))
	}
	first, err := firstWord(tc)
	if err != nil {
		return fail(err)
	}
	_ = raw.SetDeadline(time.Time{})
	return &primedConn{Conn: tc, first: first}, nil
}

// firstWord reads what etcd says first on conn.
func firstWord(conn net.Conn) ([]byte, error) {
	first := make([]byte, 4096)
	n, err := conn.Read(first)
	if n == 0 {
		if err == nil {
			err = io.ErrNoProgress
		}
		return nil, err
	}
	return first[:n], nil
}

// primedConn is a connection whose first bytes were read ahead, and whose
// first bytes written (skip) were written already.
type primedConn struct {
	net.Conn
	first []byte // read by Read before the connection
	skip  []byte // dropped from the start of what Write is given
}

func (p *primedConn) Read(b []byte) (int, error) {
	if len(p.first) > 0 {
		n := copy(b, p.first)
		p.first = p.first[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

func (p *primedConn) Write(b []byte) (int, error) {
	if len(p.skip) == 0 {
		return p.Conn.Write(b)
	}
	n := min(len(p.skip), len(b))
	if !bytes.Equal(b[:n], p.skip[:n]) {
		return 0, errors.New("HTTP/2 connection preface expected")
	}
	p.skip = p.skip[n:]
	if n == len(b) {
		return n, nil
	}
	m, err := p.Conn.Write(b[n:])
	return n + m, err
}

// loadTLS builds the client's TLS configuration from PEM files, as etcd's
// clients read them: a certificate and its key, and the CAs trusted (the
// system's when none is given).
func loadTLS(ca, cert, key string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case cert != "" && key == "":
		return nil, &SettingError{Key: "etcd.key", Err: errors.New("missing: etcd.cert is set, and a client certificate needs both")}
	case cert == "" && key != "":
		return nil, &SettingError{Key: "etcd.cert", Err: errors.New("missing: etcd.key is set, and a client certificate needs both")}
	}
	if cert != "" {
		certPEM, err := os.ReadFile(cert)
		if err != nil {
			return nil, &SettingError{Key: "etcd.cert", Err: err}
		}
		keyPEM, err := os.ReadFile(key)
		if err != nil {
			return nil, &SettingError{Key: "etcd.key", Err: err}
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, &SettingError{Key: "etcd.cert", Err: fmt.Errorf("%s with %s: %w", cert, key, err)}
		}
		// Offered whatever CAs the server names as acceptable, as etcd's
		// clients do: a certificate of the wrong CA is refused by etcd
		// for what it is, not mistaken for a missing one.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, &SettingError{Key: "etcd.ca", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &SettingError{Key: "etcd.ca", Err: fmt.Errorf("%s: no PEM certificate in it", ca)}
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// SettingError is a setting of Config the client refuses (an endpoint, a
// TLS file), named by its key in the plugins' config, so that the caller
// can say where it was written.
type SettingError struct {
	Key string // etcd.machines, etcd.ca, etcd.cert or etcd.key
	// Value is the item of a list refused (an endpoint of etcd.machines),
	// "" when the whole setting is.
	Value string
	Err   error
}

func (e *SettingError) Error() string { return e.Key + ": " + e.Err.Error() }

func (e *SettingError) Unwrap() error { return e.Err }

// live reports whether a connection to some endpoint is up, as far as the
// last calls tell.
func (c *client) live() bool {
	for _, e := range c.endpoints {
		if e.up.Load() {
			return true
		}
	}
	return false
}

// pick chooses the endpoint of the next call: the next in turn that has not
// failed lately, or the next in turn when all have.
func (c *client) pick() *endpoint {
	n := uint64(len(c.endpoints))
	start := c.turn.Add(1)
	now := time.Now().UnixNano()
	for i := range n {
		e := c.endpoints[(start+i)%n]
		if e.downUntil.Load() <= now {
			return e
		}
	}
	return c.endpoints[start%n]
}

// notSent is the error of a call that left nothing with any etcd: no
// connection was made, or the request was refused by the client.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// wasNotSent reports whether err is of a call that left nothing with etcd.
func wasNotSent(err error) bool {
	var ns notSent
	return errors.As(err, &ns)
}

// call makes the unary call method (e.g. "/etcdserverpb.KV/Txn") with the
// encoded request req and returns the encoded answer. Its error is a
// Status for an error status (etcd's, or Unavailable for a connection lost
// after the request was sent), ctx's error when ctx ended first, and is
// notSent when nothing was sent.
func (c *client) call(ctx context.Context, method string, req []byte) ([]byte, error) {
	if len(req) > sendLimit {
		return nil, notSent{Status{codeResourceExhausted, fmt.Sprintf("%s (%d vs. %d)", tooLargeMessage, len(req), sendLimit)}}
	}
	frame := make([]byte, 5+len(req))
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(req)))
	copy(frame[5:], req)
	refreshed := false
	for try := 0; ; try++ {
		e := c.pick()
		resp, sent, err := c.roundTrip(ctx, e, method, frame, c.connectWait(ctx))
		if err == nil {
			return resp, nil
		}
		if sent {
			if !refreshed && c.username != "" && is(err, errInvalidAuthToken, errAuthOldRevision, errUserEmpty) && method != authenticateMethod {
				// A token etcd no longer takes: the request was refused
				// before it was applied; authenticate again and resend.
				refreshed = true
				if aerr := c.authenticate(ctx); aerr != nil {
					return nil, aerr
				}
				continue
			}
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, notSent{ctx.Err()}
		}
		// No connection: wait for one, trying each endpoint in turn and
		// backing off once all have failed.
		if try+1 >= len(c.endpoints) {
			wait := time.Duration(min(try, 10)*20+rand.N(20)) * time.Millisecond
			select {
			case <-ctx.Done():
				return nil, notSent{ctx.Err()}
			case <-time.After(wait):
			}
		}
	}
}

// connectWait is how long a call waits for a connection to one endpoint
// before it tries the next (0: as long as it has): its share of the dial
// timeout (or of its time), so that a member that never answers (see
// handshake) leaves time for the others, as grpc connects to every member
// at once.
func (c *client) connectWait(ctx context.Context) time.Duration {
	if len(c.endpoints) < 2 {
		return 0
	}
	wait := c.dial
	if d, ok := ctx.Deadline(); ok && (wait <= 0 || time.Until(d) < wait) {
		wait = time.Until(d)
	}
	return max(wait/time.Duration(len(c.endpoints)), 0)
}

// Connection states of one round trip.
const (
	connecting = iota
	connected
	passedOver // no connection within its wait: the call goes elsewhere
)

// roundTrip sends one call to e, waiting connectBy (0: as long as ctx
// lasts) for a connection. sent reports whether the request may have
// reached etcd (its headers were written on a connection).
func (c *client) roundTrip(ctx context.Context, e *endpoint, method string, frame []byte, connectBy time.Duration) (answer []byte, sent bool, err error) {
	var wrote atomic.Bool
	var state atomic.Int32
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if connectBy > 0 {
		t := time.AfterFunc(connectBy, func() {
			if state.CompareAndSwap(connecting, passedOver) {
				cancel()
			}
		})
		defer t.Stop()
	}
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			state.CompareAndSwap(connecting, connected)
			e.up.Store(true)
		},
		WroteHeaders: func() { wrote.Store(true) },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(actx, trace), http.MethodPost, e.base+method, bytes.NewReader(frame))
	if err != nil {
		return nil, false, err
	}
	// net/http's HTTP/2 transport sends a request again by itself after
	// some errors (a stream reset as refused or in error, a GOAWAY), even
	// one etcd had whole and may have applied; without GetBody it sends
	// again only a request of which nothing was written. Whether, and
	// where, to send a call again is call's to decide.
	req.GetBody = nil
	req.Header = http.Header{
		"Content-Type": {"application/grpc+proto"},
		"Te":           {"trailers"},
		"User-Agent":   {"eru-resources"},
	}
	if deadline, ok := ctx.Deadline(); ok {
		req.Header["Grpc-Timeout"] = []string{grpcTimeout(time.Until(deadline))}
	}
	if t := c.token.Load(); t != nil && *t != "" && method != authenticateMethod {
		req.Header["Token"] = []string{*t}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		sent = wrote.Load()
		if ctx.Err() != nil {
			return nil, sent, ctx.Err()
		}
		e.up.Store(false)
		if !sent {
			e.downUntil.Store(time.Now().Add(downFor).UnixNano())
			if state.Load() == passedOver {
				return nil, false, notSent{fmt.Errorf("no connection within %s", connectBy)}
			}
			return nil, false, notSent{transportError(err)}
		}
		return nil, true, Status{codeUnavailable, "connection error: " + transportError(err).Error()}
	}
	defer resp.Body.Close()
	e.downUntil.Store(0)
	body, rerr := io.ReadAll(resp.Body)
	if rerr != nil {
		if ctx.Err() != nil {
			return nil, true, ctx.Err()
		}
		e.up.Store(false)
		return nil, true, Status{codeUnavailable, "error reading from server: " + transportError(rerr).Error()}
	}
	if !isGRPC(resp.Header.Get("Content-Type")) {
		// Not a gRPC answer (a proxy's, a redirect): its HTTP status
		// says what happened, as grpc reads it.
		return nil, true, Status{httpCode(resp.StatusCode), fmt.Sprintf("unexpected HTTP status %s, content type %q", resp.Status, resp.Header.Get("Content-Type"))}
	}
	if st, ok := callStatus(resp); ok {
		if st.Code == codeDeadlineExceeded || st.Code == codeCanceled {
			// etcd ran out of the time grpc-timeout gave it, a moment
			// before ctx ends here: the call's error is ctx's, as
			// clientv3 reports it.
			select {
			case <-ctx.Done():
				return nil, true, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		if st.Code != codeOK {
			return nil, true, st
		}
	} else {
		return nil, true, Status{codeInternal, "server closed the stream without sending trailers"}
	}
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		return nil, true, Status{codeInternal, fmt.Sprintf("malformed answer of %d bytes", len(body))}
	}
	return body[5:], true, nil
}

// callStatus is the status of a finished call: its trailers', or its
// headers' in a trailers-only answer.
func callStatus(resp *http.Response) (Status, bool) {
	h := resp.Trailer
	if h.Get("Grpc-Status") == "" {
		h = resp.Header
	}
	s := h.Get("Grpc-Status")
	if s == "" {
		return Status{}, false
	}
	code, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return Status{codeUnknown, "malformed grpc-status " + s}, true
	}
	msg := h.Get("Grpc-Message")
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	// An error is one line: a control character (a newline) is a space.
	msg = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
	return Status{Code(code), msg}, true
}

// isGRPC reports whether contentType is gRPC's (application/grpc, or
// application/grpc+ or ; and a subtype), as grpc tells a gRPC answer.
func isGRPC(contentType string) bool {
	rest, ok := strings.CutPrefix(strings.ToLower(contentType), "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// httpCode is the gRPC code of an HTTP status without a gRPC status, as
// gRPC maps it.
func httpCode(status int) Code {
	switch status {
	case http.StatusBadRequest:
		return codeInternal
	case http.StatusUnauthorized:
		return codeUnauthenticated
	case http.StatusForbidden:
		return codePermissionDenied
	case http.StatusNotFound:
		return 12 // Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codeUnavailable
	}
	return codeUnknown
}

// transportError is the cause of a failed round trip, without the URL and
// method net/http puts in front of it.
func transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	// A request net/http would have sent again, had it GetBody (see
	// roundTrip): its cause, without net/http's advice.
	if inner, ok := strings.CutPrefix(err.Error(), "http2: Transport: cannot retry err ["); ok {
		if cause, _, ok := strings.Cut(inner, "] after Request.Body was written"); ok {
			return errors.New(cause)
		}
	}
	return err
}

// grpcTimeout encodes d as a grpc-timeout header: at most eight digits and
// a unit.
func grpcTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	for _, u := range []struct {
		unit string
		d    time.Duration
	}{{"n", time.Nanosecond}, {"u", time.Microsecond}, {"m", time.Millisecond}, {"S", time.Second}, {"M", time.Minute}} {
		if v := (d + u.d - 1) / u.d; v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + u.unit
		}
	}
	return strconv.FormatInt(int64(d/time.Hour)+1, 10) + "H"
}

const authenticateMethod = "/etcdserverpb.Auth/Authenticate"

// authenticate gets a token for the client's user name and password; an
// etcd whose auth is not enabled wants none.
func (c *client) authenticate(ctx context.Context) error {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	resp, err := c.call(ctx, authenticateMethod, appendAuthenticateRequest(nil, c.username, c.password))
	if errors.Is(err, errAuthNotEnabled) {
		none := ""
		c.token.Store(&none)
		return nil
	}
	if err != nil {
		return err
	}
	token, err := decodeAuthenticateResponse(resp)
	if err != nil {
		return Status{codeInternal, "malformed Authenticate answer"}
	}
	c.token.Store(&token)
	return nil
}

// close ends the client's connections, idle or not (a call still in flight
// fails), and any it would dial later.
func (c *client) close() {
	c.connMu.Lock()
	c.closed = true
	conns := make([]*trackedConn, 0, len(c.conns))
	for t := range c.conns {
		conns = append(conns, t)
	}
	c.connMu.Unlock()
	c.stop()
	c.transport.CloseIdleConnections()
	for _, t := range conns {
		_ = t.Close()
	}
}

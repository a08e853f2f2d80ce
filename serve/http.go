package serve

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eru-extend/resources/types"
)

// nodeActions are the POST /v1/nodes/{id}:action operations.
// (":heartbeat" is the node's own, see heartbeat.go).
var nodeActions = []string{"drain", "cancel-drain", "isolate", "retire", "revoke", "admit", "end-session"}

// Handler is the daemon's HTTP API: /metrics, /healthz, /readyz and the
// operator API under /v1/. token is the bearer token operator writes need
// ("" makes the API read-only). Every request, whatever its path, passes
// through admission first.
func (d *Daemon) Handler(token string) http.Handler {
	stamps := newStamper(time.Now)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/clock", d.timed(routeClock, d.counted(routeClock, http.HandlerFunc(stamps.clock))))
	heartbeat := d.timed(routeHeartbeat, d.heartbeat(stamps, token))
	mux.Handle("GET /metrics", d.timed(routeMetrics, d.counted(routeMetrics, d.metricsHandler())))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", d.readyz)
	op := func(route string, takes []string, args argsOf) http.Handler {
		return d.timed(route, d.operator(route, d.name, takes, token, args))
	}
	// Pools are the storage plugin's: their commands run as `storage`,
	// whichever binary started the daemon.
	poolOp := func(route string, takes []string, args argsOf) http.Handler {
		return d.timed(route, d.operator(route, "storage", takes, token, args))
	}
	mux.Handle("GET /v1/nodes", op("GET /v1/nodes", reads, func(r *http.Request, _ opBody) ([]string, error) {
		args := []string{"nodes", "list"}
		if s := r.URL.Query().Get("status"); s != "" {
			args = append(args, "--status", s)
		}
		return args, nil
	}))
	mux.Handle("GET /v1/nodes/{id}", op("GET /v1/nodes/{id}", reads, func(r *http.Request, _ opBody) ([]string, error) {
		id, err := pathID(r.PathValue("id"))
		return []string{"nodes", "get", id}, err
	}))
	action := op(routeNodeAction, mutatingFields, func(r *http.Request, body opBody) ([]string, error) {
		seg := r.PathValue("action")
		i := strings.LastIndexByte(seg, ':')
		if i < 0 || !contains(nodeActions, seg[i+1:]) {
			return nil, types.Errorf(types.NotFound, "no operation %q: want /v1/nodes/{id}:%s", seg, strings.Join(nodeActions, "|"))
		}
		id, err := pathID(seg[:i])
		if err != nil {
			return nil, err
		}
		return append([]string{"nodes", seg[i+1:], id}, body.mutating()...), nil
	})
	mux.Handle("POST /v1/nodes/{action}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.PathValue("action"), ":heartbeat") {
			heartbeat.ServeHTTP(w, r)
			return
		}
		action.ServeHTTP(w, r)
	}))
	mux.Handle("GET /v1/overcommit/defaults", op("GET /v1/overcommit/defaults", reads, func(*http.Request, opBody) ([]string, error) {
		return []string{"overcommit", "get-defaults"}, nil
	}))
	mux.Handle("PUT /v1/overcommit/defaults", op("PUT /v1/overcommit/defaults", ratioFields, func(_ *http.Request, body opBody) ([]string, error) {
		if body.cpu == "" || body.memory == "" {
			// The command's own refusal names its flags, which an HTTP
			// client has none of.
			return nil, types.Invalid("PUT /v1/overcommit/defaults replaces both ratios: give cpu and memory")
		}
		return append(append([]string{"overcommit", "set-defaults"}, body.ratios()...), body.mutating()...), nil
	}))
	mux.Handle("GET /v1/overcommit/nodes/{id}", op("GET /v1/overcommit/nodes/{id}", reads, func(r *http.Request, _ opBody) ([]string, error) {
		id, err := pathID(r.PathValue("id"))
		return []string{"overcommit", "get-node", id}, err
	}))
	mux.Handle("PUT /v1/overcommit/nodes/{id}", op("PUT /v1/overcommit/nodes/{id}", ratioFields, func(r *http.Request, body opBody) ([]string, error) {
		id, err := pathID(r.PathValue("id"))
		return append(append([]string{"overcommit", "set-node", id}, body.ratios()...), body.mutating()...), err
	}))
	mux.Handle("DELETE /v1/overcommit/nodes/{id}", op("DELETE /v1/overcommit/nodes/{id}", mutatingFields, func(r *http.Request, body opBody) ([]string, error) {
		id, err := pathID(r.PathValue("id"))
		return append([]string{"overcommit", "set-node", id}, body.mutating()...), err // no ratio: both follow the defaults
	}))
	mux.Handle("GET /v1/pools", poolOp("GET /v1/pools", reads, func(*http.Request, opBody) ([]string, error) {
		return []string{"pools", "list"}, nil
	}))
	mux.Handle("GET /v1/pools/{id}", poolOp("GET /v1/pools/{id}", reads, func(r *http.Request, _ opBody) ([]string, error) {
		id, err := pathArg("pool", r.PathValue("id"))
		return []string{"pools", "get", id}, err
	}))
	mux.Handle("GET /v1/pools/{id}/objects", poolOp("GET /v1/pools/{id}/objects", reads, func(r *http.Request, _ opBody) ([]string, error) {
		id, err := pathArg("pool", r.PathValue("id"))
		args := []string{"pools", "objects", id}
		if n := r.URL.Query().Get("node"); n != "" {
			args = append(args, "--node", n)
		}
		return args, err
	}))
	mux.Handle("PUT /v1/pools/{id}/capacity", poolOp("PUT /v1/pools/{id}/capacity", capacityFields, func(r *http.Request, body opBody) ([]string, error) {
		id, err := pathArg("pool", r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		if body.capacity == "" {
			return nil, types.Invalid("body: capacity is missing (bytes, or a size such as \"300G\")")
		}
		if body.ifVersion == "" {
			// The command's own refusal names its flag (--if-version),
			// which an HTTP client has none of.
			return nil, types.Invalid("body: if_version is missing: PUT /v1/pools/{id}/capacity sets the capacity only at the version read (GET /v1/pools/%s)", id)
		}
		if strings.HasPrefix(body.capacity, "-") {
			// The command line would read it as a flag, and refuse a flag
			// the HTTP client never gave.
			return nil, types.Invalid("body: capacity %q is not a size (bytes > 0, or a size such as \"300G\")", body.capacity)
		}
		return append([]string{"pools", "set-capacity", id, body.capacity}, body.mutating()...), nil
	}))
	mux.Handle("POST /v1/pools/{action}", poolOp(routeDeclareLost, mutatingFields, func(r *http.Request, body opBody) ([]string, error) {
		id, ok := strings.CutSuffix(r.PathValue("action"), ":declare-lost")
		if !ok {
			return nil, types.Errorf(types.NotFound, "no operation %q: want /v1/pools/{id}:declare-lost", r.PathValue("action"))
		}
		id, err := pathArg("pool", id)
		return append([]string{"pools", "declare-lost", id}, body.mutating()...), err
	}))
	mux.Handle("GET /v1/objects/{id}", poolOp("GET /v1/objects/{id}", reads, func(r *http.Request, _ opBody) ([]string, error) {
		id, err := pathArg("object", r.PathValue("id"))
		return []string{"pools", "object", id}, err
	}))
	return d.admitted(mux)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pathID refuses a node id the command line would read as a flag.
func pathID(id string) (string, error) { return pathArg("node", id) }

// pathArg refuses an id (of a node, a pool, an object) that the command
// line would read as a flag; the command checks the rest.
func pathArg(what, id string) (string, error) {
	if id == "" || strings.HasPrefix(id, "-") {
		return "", types.Invalid("%s id %q is not a %s name", what, id, what)
	}
	return id, nil
}

func (d *Daemon) readyz(w http.ResponseWriter, r *http.Request) {
	if d.cache == nil {
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	if !d.cache.Ready() {
		http.Error(w, "cache not synced with etcd", http.StatusServiceUnavailable)
		return
	}
	if err := d.cache.Reachable(r.Context(), time.Second); err != nil {
		http.Error(w, "etcd unreachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// Headers naming the priority level and flow schema of every HTTP answer.
const (
	HeaderLevel  = "X-Eru-PF-Priority-Level"
	HeaderSchema = "X-Eru-PF-Flow-Schema"
)

// admitted passes every HTTP request through admission: a rejection is
// 429 with Retry-After; every answer, admitted or not, names the level and
// schema it was classified at.
func (d *Daemon) admitted(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		adm, rej := d.admit(r.Context(), Request{Kind: "http", Path: r.URL.Path, Caller: caller(r)})
		if rej != nil && r.Context().Err() != nil {
			// Its client went away while it waited: nobody refused it and
			// nobody reads an answer (the socket's "withdrawn").
			_, pattern := mux.Handler(r)
			d.metrics.requests.WithLabelValues(routeOf(r, pattern), "withdrawn").Inc()
			return
		}
		if rej != nil {
			pfHeaders(w, rej.Level, rej.Schema)
			w.Header().Set("Retry-After", strconv.Itoa(rej.seconds()))
			_, pattern := mux.Handler(r)
			d.metrics.requests.WithLabelValues(routeOf(r, pattern), "rejected").Inc()
			writeError(w, http.StatusTooManyRequests, string(types.ResourceExhausted), rej.message())
			return
		}
		defer adm.Release()
		pfHeaders(w, adm.Level, adm.Schema)
		// A path that is not in canonical form ("//v1/nodes",
		// "/v1/./nodes") gets the JSON 404 of a path no route has, not
		// the mux's redirect (an HTML body a client may follow with its
		// method and body).
		if h, pattern := mux.Handler(r); pattern == "" || r.URL.Path != path.Clean(r.URL.Path) {
			noRoute(w, r, h)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// noRoute answers a request no route takes as every other error is
// answered, in JSON: 404 not_found for a path no route has, 405 (with
// Allow) for a method the path's routes do not take. h is the mux's own
// answer, which says which of the two it is.
func noRoute(w http.ResponseWriter, r *http.Request, h http.Handler) {
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		allow := probe.header.Get("Allow")
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "unimplemented", fmt.Sprintf("%s %s: this path takes %s", r.Method, r.URL.Path, allow))
		return
	}
	writeError(w, http.StatusNotFound, string(types.NotFound), fmt.Sprintf("no route %s %s (docs/serve.md lists the operator API)", r.Method, r.URL.Path))
}

// statusProbe keeps the status and headers a handler answers, dropping its
// body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }

func pfHeaders(w http.ResponseWriter, level, schema string) {
	if level != "" {
		w.Header().Set(HeaderLevel, level)
	}
	if schema != "" {
		w.Header().Set(HeaderSchema, schema)
	}
}

// The routes whose label is not their mux pattern: one pattern takes
// both node actions and heartbeats, another the pools' declare-lost.
const (
	routeClock       = "GET /v1/clock"
	routeMetrics     = "GET /metrics"
	routeHeartbeat   = "POST /v1/nodes/{id}:heartbeat"
	routeNodeAction  = "POST /v1/nodes/{id}:action"
	routeDeclareLost = "POST /v1/pools/{id}:declare-lost"
)

// routeOf is the route label of a request the mux matched to pattern:
// the label its handler counts and times it under, so that a route's
// rejections and withdrawals are series of the same route as its answers
// ("unmatched" for a path no route has).
func routeOf(r *http.Request, pattern string) string {
	switch pattern {
	case "":
		return "unmatched"
	case "POST /v1/nodes/{action}":
		if strings.HasSuffix(r.URL.Path, ":heartbeat") {
			return routeHeartbeat
		}
		return routeNodeAction
	case "POST /v1/pools/{action}":
		return routeDeclareLost
	}
	return pattern
}

// counted counts the answers of a route that always answers ok.
func (d *Daemon) counted(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		d.metrics.requests.WithLabelValues(route, "ok").Inc()
	})
}

// timed records an admitted request's latency by route.
func (d *Daemon) timed(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		d.metrics.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// caller names the HTTP peer: its certificate's CN, else its address.
func caller(r *http.Request) string {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return "cn:" + r.TLS.PeerCertificates[0].Subject.CommonName
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	return "addr:" + host
}

// operator runs one operator command through the command tree, JSON out,
// error classes mapped to HTTP statuses as gRPC gateways map them.
// A write route takes the fields it names (takes, nil for a read); its
// body is decoded once, before anything runs.
func (d *Daemon) operator(route, bin string, takes []string, token string, argsOf argsOf) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		result := "ok"
		defer func() { d.metrics.requests.WithLabelValues(route, result).Inc() }()
		write := takes != nil
		if write && !authorized(w, r, token) {
			result = "refused"
			return
		}
		var body opBody
		err := checkQuery(r, route)
		if err == nil && write {
			body, err = decodeBody(r.Body, route, takes)
		}
		var args []string
		if err == nil {
			args, err = argsOf(r, body)
		}
		if err != nil {
			result = "failed"
			class := types.ClassOf(err)
			writeError(w, httpStatus(class), string(class), err.Error())
			return
		}
		args = append(args, "-o", "json")
		code, out, stderr := d.run(d.options(d.cfg, d.linearizable()), bin, args, nil)
		d.log.Info("operator call", "route", route, "peer", caller(r), "code", code)
		if code == 0 {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
			return
		}
		result = "failed"
		class, msg := classOf(code, string(stderr))
		writeError(w, httpStatus(class), string(class), msg)
	}
}

// queryParams are the query parameters of the routes that take any.
var queryParams = map[string][]string{
	"GET /v1/nodes":              {"status"},
	"GET /v1/pools/{id}/objects": {"node"},
}

// checkQuery refuses a query parameter the route does not take, one given
// twice, or a query that does not parse, as a body field is refused:
// dropped, `?stauts=DRAINED` would list every node and a write's
// `?if_version=4` would run unguarded.
func checkQuery(r *http.Request, route string) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return types.Invalid("query: %s", err.Error())
	}
	takes := queryParams[route]
	for _, name := range types.SortedKeys(q) {
		if !slices.Contains(takes, name) {
			if len(takes) == 0 {
				return types.Invalid("unknown query parameter %q: %s takes none", name, route)
			}
			return types.Invalid("unknown query parameter %q: %s takes %s", name, route, strings.Join(takes, ", "))
		}
		if n := len(q[name]); n > 1 {
			return types.Invalid("query parameter %q given %d times: want it once", name, n)
		}
	}
	return nil
}

// authorized checks a write's bearer token, answering the refusal when it
// is missing or wrong, or when the daemon has none (read-only).
func authorized(w http.ResponseWriter, r *http.Request, token string) bool {
	if token == "" {
		writeError(w, http.StatusForbidden, string(types.PermissionDenied), "the operator API is read-only: serve.token_file is not set")
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
		writeError(w, http.StatusUnauthorized, string(types.Unauthenticated), "a write needs the bearer token of serve.token_file")
		return false
	}
	return true
}

// classOf recovers an operator command's error class from its exit status
// and its one line's message.
func classOf(code int, line string) (types.Class, string) {
	line = strings.TrimSpace(line)
	for _, c := range []types.Class{types.InvalidArgument, types.NotFound, types.FailedPrecondition, types.Aborted, types.AlreadyExists,
		types.Unavailable, types.ResourceExhausted, types.PermissionDenied, types.Unauthenticated, types.DataLoss, types.DeadlineExceeded, types.OutcomeUnknown} {
		if c.ExitCode() == code {
			if i := strings.Index(line, ": "+string(c)+": "); i >= 0 {
				return c, line[i+len(c)+4:]
			}
			return c, line
		}
	}
	return types.Internal, line
}

func httpStatus(c types.Class) int {
	switch c {
	case types.InvalidArgument, types.FailedPrecondition:
		return http.StatusBadRequest
	case types.NotFound:
		return http.StatusNotFound
	case types.Aborted, types.AlreadyExists:
		return http.StatusConflict
	case types.ResourceExhausted:
		return http.StatusTooManyRequests
	case types.Unavailable, types.OutcomeUnknown:
		return http.StatusServiceUnavailable
	case types.PermissionDenied:
		return http.StatusForbidden
	case types.Unauthenticated:
		return http.StatusUnauthorized
	case types.DeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

// HTTPFiles is what the HTTP listener takes from the files the serve
// section names: the operator API's bearer token ("" for none: the API is
// read-only) and, for HTTPS, the TLS configuration (nil for plain HTTP).
type HTTPFiles struct {
	Token string
	TLS   *tls.Config
}

// ReadHTTPFiles reads serve.token_file and the serve.tls files of the config
// file. The daemon reads them before it creates anything: a file that is
// missing, empty or not what its key wants is the operator's configuration
// error (invalid_argument, as for the etcd TLS files), named by its key and
// path on one line, not a reason to retry.
func (c Config) ReadHTTPFiles(file string) (HTTPFiles, error) {
	var f HTTPFiles
	bad := func(format string, args ...any) error {
		return types.Errorf(types.InvalidArgument, "config %s: "+format, append([]any{file}, args...)...)
	}
	if c.TokenFile != "" {
		data, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return HTTPFiles{}, bad("serve.token_file: %w", err)
		}
		if f.Token = strings.TrimSpace(string(data)); f.Token == "" {
			return HTTPFiles{}, bad("serve.token_file: %s is empty", c.TokenFile)
		}
	}
	if c.TLS.Cert == "" {
		return f, nil
	}
	certPEM, err := os.ReadFile(c.TLS.Cert)
	if err != nil {
		return HTTPFiles{}, bad("serve.tls.cert: %w", err)
	}
	keyPEM, err := os.ReadFile(c.TLS.Key)
	if err != nil {
		return HTTPFiles{}, bad("serve.tls.key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return HTTPFiles{}, bad("serve.tls.cert %s, serve.tls.key %s: %s", c.TLS.Cert, c.TLS.Key, oneLine(err))
	}
	f.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.TLS.ClientCA != "" {
		pem, err := os.ReadFile(c.TLS.ClientCA)
		if err != nil {
			return HTTPFiles{}, bad("serve.tls.client_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return HTTPFiles{}, bad("serve.tls.client_ca: %s: no certificate in it", c.TLS.ClientCA)
		}
		f.TLS.ClientCAs, f.TLS.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return f, nil
}

// ListenHTTP serves the handler on addr (HTTPS when files has a TLS
// configuration, mTLS when it asks for client certificates) until the
// server is shut down; it returns once listening.
func (d *Daemon) ListenHTTP(addr string, files HTTPFiles) (*http.Server, net.Listener, error) {
	srv := &http.Server{
		Handler:           d.Handler(files.Token),
		ReadHeaderTimeout: 10 * time.Second,
		// What net/http reports itself (TLS handshake errors, a handler's
		// superfluous WriteHeader, a panic in one) goes to the daemon's
		// log, in its format, instead of bare lines through package log.
		ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
		// net/http would answer `OPTIONS *` itself, past flow control and
		// without the priority headers: the handler answers it like any
		// other path.
		DisableGeneralOptionsHandler: true,
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("serve.http %s: %w", addr, err)
	}
	if files.TLS != nil {
		ln = tls.NewListener(ln, files.TLS)
	}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln, nil
}

// shutdownHTTP stops the HTTP server within grace.
func shutdownHTTP(srv *http.Server, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

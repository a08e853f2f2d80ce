package etcdstore

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// probeTimeout bounds the look diagnose takes at an endpoint.
const probeTimeout = 500 * time.Millisecond

// diagnose says why endpoints cannot be reached, when the etcd client
// itself only reports that its deadline passed: it connects to the first
// endpoint and, when TLS is in use, shakes hands and waits briefly for the
// server to refuse the client's certificate.
func diagnose(endpoints []string, cfg *tls.Config, timeout time.Duration) string {
	if len(endpoints) == 0 {
		return "no endpoint"
	}
	host, secure := endpoints[0], cfg != nil
	if u, err := url.Parse(endpoints[0]); err == nil && u.Host != "" {
		host, secure = u.Host, secure || u.Scheme == "https"
	}
	conn, err := net.DialTimeout("tcp", host, timeout)
	if err != nil {
		return opError(err)
	}
	defer conn.Close()
	if !secure {
		return "the port answers, but etcd did not"
	}
	c := cfg.Clone()
	if c == nil {
		c = &tls.Config{}
	}
	if c.ServerName == "" {
		c.ServerName, _, _ = net.SplitHostPort(host)
	}
	c.NextProtos = []string{"h2"}
	tc := tls.Client(conn, c)
	_ = tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		return "TLS: " + opError(err)
	}
	// In TLS 1.3 the server judges the client certificate after the
	// client's handshake is done; its refusal comes as the first read.
	if _, err := tc.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		return "TLS: " + opError(err)
	}
	return "TLS handshake succeeded, but etcd did not answer"
}

func opError(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		err = sys.Err
	}
	return strings.TrimSpace(err.Error())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

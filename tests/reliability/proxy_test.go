package reliability_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stall says what a slowProxy holds back.
type stall int

const (
	// stallEverything delays every byte in both directions: etcd is
	// reachable but nothing, not even the connection's handshake, comes
	// through in time.
	stallEverything stall = iota
	// stallRequests lets the HTTP/2 connection come up (the client's preface
	// and connection-level frames pass at once, the server's bytes are never
	// held) and delays what the client sends from its first request frame
	// on: a connected etcd that is slow to answer.
	stallRequests
	// stallWrites is stallRequests from the first frame that carries a
	// write on: the request body of a Txn that puts a guard marker
	// (<prefix>/guards/...), which every write attempt does and no read.
	// The verb's reads and its guard lease's grant answer in time, so the
	// write is sent and arrives late. (Delaying from the client's second
	// request stream held the lease grant back instead: the verb failed
	// before sending any write, and a write landing late went unseen.)
	stallWrites
)

// slowProxy is a TCP proxy in front of an etcd that delays byte streams
// the way a congested network does: every chunk arrives, in order, late by
// the delay in force when it was read — even after its sender has gone.
type slowProxy struct {
	ln     net.Listener
	target string
	mode   stall
	delay  atomic.Int64 // nanoseconds
	open   atomic.Int64 // connections not yet fully closed
	seen   atomic.Int64 // connections accepted
	held   atomic.Int64 // connections whose write stallWrites held back
}

// newSlowProxy proxies to the etcd at endpoint (http://host:port) until
// the test ends.
func newSlowProxy(t testing.TB, endpoint string, mode stall, delay time.Duration) *slowProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &slowProxy{ln: ln, target: u.Host, mode: mode}
	p.delay.Store(int64(delay))
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.seen.Add(1)
			p.open.Add(1)
			wg.Go(func() { p.serve(conn) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return p
}

// Endpoint is the address the plugins are configured with.
func (p *slowProxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

// SetDelay changes the delay of bytes read from now on.
func (p *slowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// WaitIdle waits until every connection has been closed on both sides, so
// that every byte the plugins sent has reached etcd.
func (p *slowProxy) WaitIdle(t testing.TB, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return p.open.Load() == 0 }, within, 50*time.Millisecond,
		"%d proxied connections still open", p.open.Load())
}

func (p *slowProxy) serve(client net.Conn) {
	defer p.open.Add(-1)
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	var wg sync.WaitGroup
	switch p.mode {
	case stallEverything:
		wg.Go(func() { p.delayed(server, client, nil) })
		wg.Go(func() { p.delayed(client, server, nil) })
	case stallRequests, stallWrites:
		wg.Go(func() { p.handshakeThenDelay(server, client) })
		wg.Go(func() {
			_, _ = io.Copy(client, server)
			closeWrite(client)
		})
	}
	wg.Wait()
}

type chunk struct {
	data []byte
	due  time.Time
}

// delayed copies src to dst, first then what src holds, each chunk written
// when its delay has passed; when src ends and all is written, it closes
// dst's writing side.
func (p *slowProxy) delayed(dst net.Conn, src io.Reader, first []byte) {
	queue := make(chan chunk, 1<<12)
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := false
		for c := range queue {
			time.Sleep(time.Until(c.due))
			if !failed {
				_, err := dst.Write(c.data)
				failed = err != nil
			}
		}
		closeWrite(dst)
	}()
	if first != nil {
		queue <- chunk{first, time.Now().Add(time.Duration(p.delay.Load()))}
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{bytes.Clone(buf[:n]), time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			break
		}
	}
	close(queue)
	<-done
}

// handshakeThenDelay passes the client's HTTP/2 preface and its
// connection-level frames (stream 0: SETTINGS, PING, WINDOW_UPDATE) at once
// and delays everything from the first frame of a request stream on
// (stallRequests), or from the HEADERS of the first request whose body is
// a write (stallWrites). A stream's HEADERS carry its grpc-timeout, and
// etcd starts that clock when they arrive: a write whose headers came in
// time and whose body came late would be refused by that clock alone, not
// by the guard the test is about. So under stallWrites the frames from a
// request's HEADERS on are kept (in order: HPACK needs it) until its first
// DATA frame shows whether it is a write, then sent at once or delayed
// whole.
func (p *slowProxy) handshakeThenDelay(server, client net.Conn) {
	r := bufio.NewReader(client)
	preface := make([]byte, 24)
	if _, err := io.ReadFull(r, preface); err != nil {
		closeWrite(server)
		return
	}
	if _, err := server.Write(preface); err != nil {
		return
	}
	var kept []byte    // frames kept from a request's HEADERS on
	var keptFor uint32 // that request's stream; 0 when nothing is kept
	for {
		frame := make([]byte, 9)
		if _, err := io.ReadFull(r, frame); err != nil {
			_, _ = server.Write(kept)
			closeWrite(server)
			return
		}
		length := int(frame[0])<<16 | int(frame[1])<<8 | int(frame[2])
		stream := binary.BigEndian.Uint32(frame[5:9]) & 0x7fffffff
		frame = append(frame, make([]byte, length)...)
		if _, err := io.ReadFull(r, frame[9:]); err != nil {
			_, _ = server.Write(kept)
			closeWrite(server)
			return
		}
		if stream != 0 && p.mode == stallRequests {
			p.delayed(server, r, frame)
			return
		}
		if keptFor == 0 && stream != 0 && frame[3] == 1 { // a request's HEADERS
			keptFor = stream
		}
		if keptFor == 0 {
			if _, err := server.Write(frame); err != nil {
				return
			}
			continue
		}
		kept = append(kept, frame...)
		if stream != keptFor || frame[3] != 0 { // not yet its first DATA
			continue
		}
		if carriesWrite(frame) {
			p.held.Add(1)
			p.delayed(server, r, kept)
			return
		}
		if _, err := server.Write(kept); err != nil {
			return
		}
		kept, keptFor = nil, 0
	}
}

// carriesWrite reports whether an HTTP/2 frame is a DATA frame (type 0)
// whose payload names a guard marker: a write attempt's Txn.
func carriesWrite(frame []byte) bool {
	return frame[3] == 0 && bytes.Contains(frame[9:], []byte("/guards/"))
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

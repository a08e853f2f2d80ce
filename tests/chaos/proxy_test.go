package chaos_test

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// faults is how often a chaosProxy misbehaves.
type faults struct {
	// cut is the chance that a client chunk carrying a write (or the fence
	// of one) costs the connection: half the time the chunk is forwarded
	// and the connection cut a moment later (the write lands, its answer
	// is likely lost), half the time it is dropped and the connection cut
	// at once (the write never arrives).
	cut float64
	// delay is the chance that an answer chunk is held back, by up to
	// maxDelay; later chunks of the connection wait behind it.
	delay    float64
	maxDelay time.Duration
}

// chaosProxy forwards TCP connections to one etcd member, with faults.
type chaosProxy struct {
	ln     net.Listener
	target string
	f      faults
	cuts   atomic.Int64
	drops  atomic.Int64
	delays atomic.Int64

	mu     sync.Mutex
	open   map[net.Conn]func() // client side -> closes both sides
	closed bool
}

func newChaosProxy(t *testing.T, endpoint string, f faults) *chaosProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &chaosProxy{ln: ln, target: u.Host, f: f, open: map[net.Conn]func(){}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		p.closed = true
		for _, closeBoth := range p.open {
			closeBoth()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *chaosProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

// writeMark is in every write transaction of the store: the key of the
// attempt's marker.
var writeMark = []byte("/guards/")

func (p *chaosProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		return
	}
	defer server.Close()
	closeBoth := func() {
		_ = client.Close()
		_ = server.Close()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.open[client] = closeBoth
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.open, client)
		p.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Go(func() { p.answers(client, server) })
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if bytes.Contains(buf[:n], writeMark) && rand.Float64() < p.f.cut {
				if rand.IntN(2) == 0 {
					p.drops.Add(1)
					closeBoth()
					break
				}
				p.cuts.Add(1)
				_, _ = server.Write(buf[:n])
				time.AfterFunc(time.Duration(rand.IntN(20))*time.Millisecond, closeBoth)
				break
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if tc, ok := server.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	wg.Wait()
}

// answers copies the member's answers to the client, holding some back.
func (p *chaosProxy) answers(client, server net.Conn) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	queue := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := false
		for c := range queue {
			time.Sleep(time.Until(c.due))
			if !failed {
				_, err := client.Write(c.data)
				failed = err != nil
			}
		}
		_ = client.Close()
	}()
	var due time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			now := time.Now()
			if due.Before(now) {
				due = now
			}
			if rand.Float64() < p.f.delay {
				p.delays.Add(1)
				due = due.Add(time.Duration(rand.Int64N(int64(p.f.maxDelay))))
			}
			queue <- chunk{bytes.Clone(buf[:n]), due}
		}
		if err != nil {
			break
		}
	}
	close(queue)
	<-done
}

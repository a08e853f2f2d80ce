package etcdstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

// loss says what a cutProxy loses of the write it catches.
type loss int32

const (
	pass        loss = iota
	answerLost       // the write reaches etcd, its answer does not come back; the connection is cut
	requestLost      // the write never reaches etcd; the connection is cut
	answerHeld       // the write reaches etcd, nothing comes back on that connection ever again
)

// cutProxy is a TCP proxy in front of etcd that, when armed, catches the
// next write transaction (the first bytes from a client that carry a write
// marker) and loses its request or its answer.
type cutProxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Int32
	caught  atomic.Int32
	cutWait time.Duration
}

func newCutProxy(t *testing.T, endpoint string) *cutProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: u.Host, cutWait: 300 * time.Millisecond}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *cutProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) arm(l loss) { p.armed.Store(int32(l)) }

func (p *cutProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	var mute atomic.Bool // server -> client bytes dropped
	cut := func() {
		time.Sleep(p.cutWait)
		_ = client.Close()
		_ = server.Close()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && !mute.Load() {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if bytes.Contains(chunk, []byte("/guards/")) {
				switch l := loss(p.armed.Load()); l {
				case answerLost, answerHeld:
					if p.armed.CompareAndSwap(int32(l), int32(pass)) {
						p.caught.Add(1)
						mute.Store(true)
						if l == answerLost {
							go cut()
						}
					}
				case requestLost:
					if p.armed.CompareAndSwap(int32(l), int32(pass)) {
						p.caught.Add(1)
						go cut()
						_, _ = io.Copy(io.Discard, client)
						<-done
						return
					}
				}
			}
			if _, werr := server.Write(chunk); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = server.Close()
	<-done
}

// counterStore opens a store through the proxy, under a prefix of its own.
func counterStore(t *testing.T, endpoint string) *etcdstore.Store {
	t.Helper()
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{
		Endpoints: []string{endpoint}, Prefix: fmt.Sprintf("/outcome-%d", time.Now().UnixNano()), DialTimeout: 2 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// increment adds one to /counter, counting the decisions made.
func increment(ctx context.Context, s store.Store, calls *int) error {
	return store.Update(ctx, s, []string{"/counter"}, func(tx *store.Tx) error {
		*calls++
		n := 0
		if v, ok := tx.Get("/counter"); ok {
			n, _ = strconv.Atoi(string(v))
		}
		tx.Put("/counter", []byte(strconv.Itoa(n+1)))
		return nil
	})
}

func counter(t *testing.T, s store.Store) string {
	t.Helper()
	v, _, err := store.Get(context.Background(), s, "/counter")
	require.NoError(t, err)
	return string(v)
}

func TestAWriteWhoseAnswerIsLostIsResolved(t *testing.T) {
	t.Parallel() // its own prefix or its own server
	e := storetest.SharedEtcd(t)

	t.Run("a write that landed and whose answer was cut off succeeds, applied once", func(t *testing.T) {
		p := newCutProxy(t, e.Endpoint)
		s := counterStore(t, p.endpoint())
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		calls := 0
		require.NoError(t, increment(ctx, s, &calls)) // connect and warm up
		p.arm(answerLost)
		calls = 0
		require.NoError(t, increment(ctx, s, &calls))
		require.EqualValues(t, 1, p.caught.Load(), "the proxy lost an answer")
		require.Equal(t, 1, calls, "not retried: the first attempt was found to have landed")
		require.Equal(t, "2", counter(t, s))
	})

	t.Run("a write lost on its way is found not to have landed, and retried", func(t *testing.T) {
		p := newCutProxy(t, e.Endpoint)
		s := counterStore(t, p.endpoint())
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		p.arm(requestLost)
		calls := 0
		require.NoError(t, increment(ctx, s, &calls))
		require.EqualValues(t, 1, p.caught.Load(), "the proxy lost a request")
		require.Equal(t, 2, calls, "retried once")
		require.Equal(t, "1", counter(t, s))
	})

	t.Run("one transaction lost on its way is a definite failure", func(t *testing.T) {
		p := newCutProxy(t, e.Endpoint)
		s := counterStore(t, p.endpoint())
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/warm", Value: []byte("1")}}))
		p.arm(requestLost)
		err := s.Txn(ctx, nil, []store.Op{{Key: "/counter", Value: []byte("1")}})
		require.ErrorIs(t, err, store.ErrNotApplied)
		require.Equal(t, types.Unavailable, types.ClassOf(err))
		require.Contains(t, err.Error(), "etcd "+p.endpoint()+": ")
		require.Equal(t, "", counter(t, s))
	})

	t.Run("a write that cannot be checked within the budget says its outcome is unknown", func(t *testing.T) {
		p := newCutProxy(t, e.Endpoint)
		s := counterStore(t, p.endpoint())
		calls := 0
		require.NoError(t, increment(context.Background(), s, &calls))
		p.arm(answerHeld)
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := increment(ctx, s, &calls)
		require.Error(t, err)
		require.Less(t, time.Since(start), 2500*time.Millisecond, "answers within its budget")
		require.Equal(t, types.OutcomeUnknown, types.ClassOf(err), "%v", err)
		require.Equal(t, 13, types.ClassOf(err).ExitCode())
		require.Contains(t, err.Error(), "could not be checked")
		require.Equal(t, "2", counter(t, counterStoreAt(t, e.Endpoint, s)), "it had landed: unknown was the truthful answer")
	})
}

// counterStoreAt opens a direct store on the prefix of s.
func counterStoreAt(t *testing.T, endpoint string, s *etcdstore.Store) store.Store {
	t.Helper()
	d, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{endpoint}, Prefix: s.Prefix(), DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestOneStoreServesConcurrentWritesLongAfterItsFirstCall(t *testing.T) {
	t.Parallel() // its own prefix or its own server
	e := storetest.SharedEtcd(t)
	s := counterStore(t, e.Endpoint)
	short := func(budget time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		calls := 0
		return increment(ctx, s, &calls)
	}
	require.NoError(t, short(time.Second))
	time.Sleep(3 * time.Second) // past the first call's deadline and any lease it had
	const workers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				errs <- short(10 * time.Second) // contention is not under test
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, strconv.Itoa(1+workers*each), counter(t, s))
}

func TestMarkersAreBookkeepingThatExpires(t *testing.T) {
	e := storetest.SharedEtcd(t)
	s := counterStore(t, e.Endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	calls := 0
	require.NoError(t, increment(ctx, s, &calls))

	raw, err := e.Client(t).Get(context.Background(), s.Prefix()+"/guards/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, raw.Kvs, 1, "one marker for the one attempt")
	require.NotZero(t, raw.Kvs[0].Lease, "the marker is bound to a lease")
	ttl, err := e.Client(t).TimeToLive(context.Background(), clientv3.LeaseID(raw.Kvs[0].Lease))
	require.NoError(t, err)
	require.Greater(t, ttl.GrantedTTL, int64(3), "the lease outlasts the 3s budget")
	require.LessOrEqual(t, ttl.GrantedTTL, int64(5), "and not by much")

	snap, err := s.Read(context.Background(), nil, []string{"/"})
	require.NoError(t, err)
	require.Len(t, snap.Items, 1, "a range over everything sees the record and not the marker")
	require.Contains(t, snap.Items, "/counter")
}

package etcdstore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/types"
)

// fakeEtcd is an HTTP/2 (h2c) server answering every call with answer: a
// stand-in for etcd where an answer etcd would not give is wanted.
func fakeEtcd(t *testing.T, answer http.HandlerFunc) string {
	srv := httptest.NewUnstartedServer(answer)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// grpcFrame is msg in gRPC's length-prefixed frame.
func grpcFrame(msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
}

// Messages of etcd's answers, encoded by hand: a transaction that
// succeeded, a lease of ID 1 for 10s, an Authenticate of token "secret-token".
var (
	txnSucceeded = []byte{0x10, 0x01}
	leaseGranted = []byte{0x10, 0x01, 0x18, 0x0a}
	authAnswer   = append([]byte{0x12, byte(len("secret-token"))}, "secret-token"...)
)

// answerGRPC writes a gRPC answer: headers, msg framed, trailers.
func answerGRPC(w http.ResponseWriter, msg []byte, code, message string) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(grpcFrame(msg))
	w.Header().Set("Grpc-Status", code)
	w.Header().Set("Grpc-Message", message)
}

func TestAnAnswerThatIsNotAGRPCAnswerIsAnError(t *testing.T) {
	cases := []struct {
		name   string
		answer http.HandlerFunc
		want   string
	}{
		{"a redirect to another server", nil, "unexpected HTTP status 307"},
		{"an HTTP error that is not gRPC's, with a gRPC status of OK", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Grpc-Status", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(grpcFrame(txnSucceeded))
		}, "unexpected HTTP status 503"},
		{"an answer that is not gRPC's, with a gRPC status of OK", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Grpc-Status", "0")
			_, _ = w.Write(grpcFrame(txnSucceeded))
		}, `content type "text/html"`},
		{"no gRPC status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			_, _ = w.Write(grpcFrame(txnSucceeded))
		}, "without sending trailers"},
		{"no message", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "0")
		}, "malformed answer"},
		{"two messages", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			_, _ = w.Write(append(grpcFrame(txnSucceeded), grpcFrame(txnSucceeded)...))
			w.Header().Set("Grpc-Status", "0")
		}, "malformed answer"},
		{"a compressed message", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			b := grpcFrame(txnSucceeded)
			b[0] = 1
			_, _ = w.Write(b)
			w.Header().Set("Grpc-Status", "0")
		}, "malformed answer"},
		{"a message cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			_, _ = w.Write(grpcFrame(txnSucceeded)[:6])
			w.Header().Set("Grpc-Status", "0")
		}, "malformed answer"},
		{"a status message of several lines", func(w http.ResponseWriter, r *http.Request) {
			answerGRPC(w, nil, "13", "first%0Asecond%0D%0Athird")
		}, "first second  third"},
	}
	for _, c := range cases {
		t.Run(c.name+" fails a read in one line, and the call goes nowhere else", func(t *testing.T) {
			var elsewhere atomic.Int64
			other := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				answerGRPC(w, txnSucceeded, "0", "")
			})
			answer := c.answer
			if answer == nil {
				answer = func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, other+r.URL.Path, http.StatusTemporaryRedirect)
				}
			}
			s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{fakeEtcd(t, answer)}, Prefix: "/p", DialTimeout: time.Second})
			require.NoError(t, err)
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err = s.Read(ctx, []string{"/k"}, nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "\n")
			require.Equal(t, types.Unavailable, types.ClassOf(err))
			require.Zero(t, elsewhere.Load())
		})
	}
}

func TestARedirectCarriesNeitherTheWriteNorTheTokenElsewhere(t *testing.T) {
	t.Parallel() // its own prefix or its own server
	var elsewhere atomic.Int64
	var leaked atomic.Bool
	other := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		leaked.Store(r.Header.Get("Token") != "")
		answerGRPC(w, txnSucceeded, "0", "")
	})
	endpoint := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/etcdserverpb.Auth/Authenticate":
			answerGRPC(w, authAnswer, "0", "")
		case "/etcdserverpb.Lease/LeaseGrant":
			answerGRPC(w, leaseGranted, "0", "")
		default:
			http.Redirect(w, r, other+r.URL.Path, http.StatusPermanentRedirect)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{endpoint}, Prefix: "/p", Username: "eru", Password: "pw", DialTimeout: time.Second})
	require.NoError(t, err)
	defer s.Close()
	err = s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("v")}})
	require.Error(t, err, "a write answered with a redirect is not written")
	require.Equal(t, types.OutcomeUnknown, types.ClassOf(err), "its fence was redirected too: %v", err)
	require.NotContains(t, err.Error(), "secret-token")
	require.Zero(t, elsewhere.Load(), "the write went to the redirect's target (with its token: %v)", leaked.Load())
}

func TestAWriteAnsweredWithAnHTTPErrorIsNeverReportedWritten(t *testing.T) {
	t.Parallel() // its own prefix or its own server
	endpoint := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/etcdserverpb.Lease/LeaseGrant" {
			answerGRPC(w, leaseGranted, "0", "")
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Grpc-Status", "0")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write(grpcFrame(txnSucceeded))
	})
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{endpoint}, Prefix: "/p", DialTimeout: time.Second})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("v")}})
	require.Error(t, err)
	require.Equal(t, types.OutcomeUnknown, types.ClassOf(err), "%v", err)
	require.True(t, strings.Contains(err.Error(), "unexpected HTTP status 502"), "%v", err)
}

// refusingH2 is an h2c server that reads each call whole, counts it, and
// resets its stream with code instead of answering (the peer says the
// stream was in error after it had the whole request).
func refusingH2(t *testing.T, code http2.ErrCode) (endpoint string, calls *atomic.Int64) {
	calls = &atomic.Int64{}
	endpoint = serveTCP(t, func(c net.Conn) {
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, preface); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		if fr.WriteSettings() != nil {
			return
		}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() && fr.WriteSettingsAck() != nil {
					return
				}
			case *http2.DataFrame:
				if f.StreamEnded() {
					calls.Add(1)
					if fr.WriteRSTStream(f.StreamID, code) != nil {
						return
					}
				}
			}
		}
	})
	return endpoint, calls
}

func TestACallEtcdHadWholeIsNeverSentAgainByTheTransport(t *testing.T) {
	t.Parallel() // its own servers, and mostly waiting
	for _, code := range []http2.ErrCode{http2.ErrCodeProtocol, http2.ErrCodeRefusedStream} {
		t.Run("after a reset with "+code.String()+" a read was sent only as often as the store sent it, and failed", func(t *testing.T) {
			endpoint, calls := refusingH2(t, code)
			s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{endpoint}, Prefix: "/p", DialTimeout: time.Second})
			require.NoError(t, err)
			defer s.Close()
			// The store itself sends a read again after an Unavailable;
			// each of its sends is counted once, while what the transport
			// would send again on its own is not.
			sends := etcdstore.CountSends(s)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err = s.Read(ctx, []string{"/k"}, nil)
			require.Error(t, err)
			require.Equal(t, types.Unavailable, types.ClassOf(err))
			require.Positive(t, calls.Load())
			require.Equal(t, sends(), calls.Load(), "every request on the wire is one the store sent: %v", err)
			require.Regexp(t, `connection error: stream error: stream ID \d+; `+code.String()+`; received from peer`, err.Error())
			require.NotContains(t, err.Error(), "GetBody")
		})
	}
}

// TestAFreshClientsReadIsRetriedAfterAnElection: the first read of a
// process (no connection yet) that a member answers with etcd's "leader
// changed" or "no leader" is sent again, on the next member in turn, as a
// live client's read is, within its time.
func TestAFreshClientsReadIsRetriedAfterAnElection(t *testing.T) {
	t.Parallel() // its own fake members, and mostly waiting
	for _, message := range []string{"etcdserver: leader changed", "etcdserver: no leader"} {
		t.Run("a lone member answering "+message+" once is asked again and answers", func(t *testing.T) {
			var asked atomic.Int64
			only := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
				if asked.Add(1) == 1 {
					answerGRPC(w, nil, "14", message)
					return
				}
				answerGRPC(w, txnSucceeded, "0", "")
			})
			s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{only}, Prefix: "/p", DialTimeout: 2 * time.Second})
			require.NoError(t, err)
			defer s.Close()
			_, err = s.Read(context.Background(), []string{"/k"}, nil)
			require.NoError(t, err)
			require.Equal(t, int64(2), asked.Load())
		})
	}
	t.Run("beside a member answering no leader, every fresh client's read is answered by the other", func(t *testing.T) {
		var electing, answering atomic.Int64
		first := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
			electing.Add(1)
			answerGRPC(w, nil, "14", "etcdserver: no leader")
		})
		second := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
			answering.Add(1)
			answerGRPC(w, txnSucceeded, "0", "")
		})
		// Each fresh client starts at a member picked at random: clients
		// are made until some first read went to the electing member (one
		// in two does; 64 all missing it is a chance of 2^-64).
		processes := 0
		for electing.Load() == 0 && processes < 64 {
			s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{first, second}, Prefix: "/p", DialTimeout: 2 * time.Second})
			require.NoError(t, err)
			_, err = s.Read(context.Background(), []string{"/k"}, nil)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			processes++
		}
		require.Positive(t, electing.Load(), "a first read went to the electing member")
		require.Equal(t, int64(processes), answering.Load(), "every read was answered by the other")
	})
	for _, c := range []struct {
		dial, election time.Duration
	}{
		{2 * time.Second, 600 * time.Millisecond},
		{500 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("with a dial timeout of %v, a read through an election of %v is answered after it", c.dial, c.election), func(t *testing.T) {
			var first atomic.Int64 // unix nanos of the first request
			only := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
				first.CompareAndSwap(0, time.Now().UnixNano())
				if time.Since(time.Unix(0, first.Load())) < c.election {
					answerGRPC(w, nil, "14", "etcdserver: no leader")
					return
				}
				answerGRPC(w, txnSucceeded, "0", "")
			})
			s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{only}, Prefix: "/p", DialTimeout: c.dial})
			require.NoError(t, err)
			defer s.Close()
			_, err = s.Read(context.Background(), []string{"/k"}, nil)
			require.NoError(t, err)
		})
	}
	t.Run("a lone member still electing past the read's time fails it, naming etcd's answer", func(t *testing.T) {
		var asked atomic.Int64
		only := fakeEtcd(t, func(w http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			answerGRPC(w, nil, "14", "etcdserver: no leader")
		})
		s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{only}, Prefix: "/p", DialTimeout: time.Second})
		require.NoError(t, err)
		defer s.Close()
		start := time.Now()
		_, err = s.Read(context.Background(), []string{"/k"}, nil)
		took := time.Since(start)
		require.ErrorContains(t, err, "no leader")
		require.NotContains(t, err.Error(), "\n")
		require.Equal(t, types.Unavailable, types.ClassOf(err))
		require.Less(t, took, 1500*time.Millisecond, "bounded by the dial timeout of 1s")
		require.Greater(t, took, 500*time.Millisecond, "asking until little of it was left")
		require.GreaterOrEqual(t, asked.Load(), int64(3), "asked again and again (eight times on an idle machine)")
	})
}

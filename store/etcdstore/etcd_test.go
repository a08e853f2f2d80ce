package etcdstore_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

func TestContract(t *testing.T) {
	t.Parallel() // its own prefix or its own server
	e := storetest.SharedEtcd(t)
	prefix := fmt.Sprintf("/contract-%d", time.Now().UnixNano())
	storetest.Run(t, func(t *testing.T, name string) store.Store {
		s, err := etcdstore.Open(context.Background(), etcdstore.Config{
			Endpoints: []string{e.Endpoint}, Prefix: prefix + "/" + name, DialTimeout: 2 * time.Second,
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, 5*time.Second)
}

func TestADeadEtcdFailsFastNamingTheEndpoint(t *testing.T) {
	start := time.Now()
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{
		Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/x", DialTimeout: 500 * time.Millisecond,
	})
	require.NoError(t, err, "the client connects lazily")
	defer s.Close()
	_, err = s.Read(context.Background(), []string{"/a"}, nil)
	require.Error(t, err)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, types.Unavailable, types.ClassOf(err))
	require.Contains(t, err.Error(), "etcd http://127.0.0.1:1: unreachable: no connection within 500ms")
}

func TestAConflictComesBackWithTheCurrentValues(t *testing.T) {
	e := storetest.SharedEtcd(t)
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: fmt.Sprintf("/reread-%d", time.Now().UnixNano()), DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("theirs")}}))
	snap, err := s.TxnOrRead(ctx, []store.Cond{{Key: "/k"}}, []store.Op{{Key: "/k", Value: []byte("mine")}}, []string{"/k", "/other"})
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, "theirs", string(snap.Items["/k"].Value))
	require.NotContains(t, snap.Items, "/other")
	snap, err = s.TxnOrRead(ctx, []store.Cond{{Key: "/k", ModRevision: snap.Items["/k"].ModRevision}}, []store.Op{{Key: "/k", Value: []byte("mine")}}, []string{"/k"})
	require.NoError(t, err)
	require.Nil(t, snap)
}

func TestHalfTheCredentialsIsRefusedNamingTheMissingHalf(t *testing.T) {
	cases := []struct {
		name, user, password, want string
	}{
		{"a user name without a password", "eru", "", "etcd.auth.password is missing (etcd.auth.username is set)"},
		{"a password without a user name", "", "secret", "etcd.auth.username is missing (etcd.auth.password is set)"},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused naming the missing key", func(t *testing.T) {
			_, err := etcdstore.Open(context.Background(), etcdstore.Config{
				Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/x", Username: c.user, Password: c.password, DialTimeout: time.Second,
			})
			require.Error(t, err)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "secret")
		})
	}
}

func TestADeadEndpointBesideALiveOneIsPassedOver(t *testing.T) {
	e := storetest.SharedEtcd(t)
	for _, endpoints := range [][]string{{"http://127.0.0.1:1", e.Endpoint}, {e.Endpoint, "http://127.0.0.1:1"}} {
		t.Run(fmt.Sprintf("with endpoints %v every call is answered", endpoints), func(t *testing.T) {
			s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: endpoints, Prefix: fmt.Sprintf("/failover-%d", time.Now().UnixNano()), DialTimeout: 2 * time.Second})
			require.NoError(t, err)
			defer s.Close()
			for i := range 6 { // every call takes the next endpoint in turn
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: fmt.Append(nil, i)}}))
				v, ok, err := store.Get(ctx, s, "/k")
				cancel()
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, fmt.Sprint(i), string(v))
			}
		})
	}
}

func TestAnAuthTokenEtcdNoLongerTakesIsRenewed(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a token to expire")
	}
	e, err := storetest.StartEtcd(t.TempDir(), func(cfg *embed.Config) { cfg.AuthTokenTTL = 1 })
	require.NoError(t, err)
	t.Cleanup(e.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	setup := e.Client(t)
	for _, step := range []func() error{
		func() error { _, err := setup.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := setup.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := setup.UserAdd(ctx, "eru", "eru-pw"); return err },
		func() error { _, err := setup.RoleAdd(ctx, "eru-rw"); return err },
		func() error {
			_, err := setup.RoleGrantPermission(ctx, "eru-rw", "/renew/", clientv3.GetPrefixRangeEnd("/renew/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := setup.UserGrantRole(ctx, "eru", "eru-rw"); return err },
		func() error { _, err := setup.AuthEnable(ctx); return err },
	} {
		require.NoError(t, step())
	}
	s, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: "/renew", Username: "eru", Password: "eru-pw", DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	calls := etcdstore.Record(s)
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("1")}}))
	time.Sleep(3 * time.Second) // the token expires after a second unused
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("2")}}), "written with a new token")
	v, _, err := store.Get(ctx, s, "/k")
	require.NoError(t, err)
	require.Equal(t, "2", string(v))
	authenticated := 0
	for _, c := range calls() {
		if c.Method == "/etcdserverpb.Auth/Authenticate" {
			authenticated++
		}
	}
	require.Equal(t, 1, authenticated, "authenticated again once, after the token expired")
}

// silentEndpoint is an endpoint whose connections open but never answer,
// as a stopped (SIGSTOP) member's do: its kernel still accepts them.
func silentEndpoint(t *testing.T) string { return serveTCP(t, nil) }

// serveTCP listens on loopback and runs serve on each connection it
// accepts (nil: holds the connection open and says nothing); at the test's
// end it closes the listener and every connection, and waits for serve to
// return. It answers the endpoint, http://host:port.
func serveTCP(t *testing.T, serve func(net.Conn)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		serving sync.WaitGroup
		conns   []net.Conn // the accept loop's until accepted is closed
	)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			if serve != nil {
				serving.Go(func() {
					defer c.Close()
					serve(c)
				})
			}
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-accepted // no connection comes after this
		for _, c := range conns {
			_ = c.Close()
		}
		serving.Wait()
	})
	return "http://" + l.Addr().String()
}

func TestAStoppedMemberBesideALiveOneIsPassedOverByAFreshClient(t *testing.T) {
	t.Parallel() // its own prefix or its own server
	e := storetest.SharedEtcd(t)
	silent := silentEndpoint(t)
	prefix := fmt.Sprintf("/stopped-%d", time.Now().UnixNano())
	for _, endpoints := range [][]string{{e.Endpoint, silent}, {silent, e.Endpoint}} {
		t.Run(fmt.Sprintf("with endpoints %v a fresh client's first read and write are answered", endpoints), func(t *testing.T) {
			for i := range 2 {
				s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: endpoints, Prefix: prefix, DialTimeout: 2 * time.Second})
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				if i == 0 {
					_, err = s.Read(ctx, []string{"/k"}, nil)
				} else {
					err = s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: []byte("v")}})
				}
				cancel()
				_ = s.Close()
				require.NoError(t, err)
			}
		})
	}
}

func TestCloseEndsAConnectionStillBeingMade(t *testing.T) {
	for _, scheme := range []string{"http", "https"} {
		t.Run("over "+scheme+" no goroutine of the store's outlives Close", func(t *testing.T) {
			endpoint := strings.Replace(silentEndpoint(t), "http", scheme, 1)
			before := runtime.NumGoroutine()
			s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{endpoint}, Prefix: "/x", DialTimeout: 20 * time.Second})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_, err = s.Read(ctx, []string{"/k"}, nil)
			cancel()
			require.Error(t, err)
			require.NoError(t, s.Close())
			// (Polled here: require.Eventually runs its own goroutines.)
			for end := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
			require.LessOrEqual(t, runtime.NumGoroutine(), before)
		})
	}
}

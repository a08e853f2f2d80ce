package etcdstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

func TestContract(t *testing.T) {
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

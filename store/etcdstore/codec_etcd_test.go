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
)

// TestEtcdsAnswersAreReadAsTheRuntimeReadsThem: the answers a real etcd
// gives to the requests the store sends — lease grants, writes with their
// compares and leased markers, reads of keys and prefixes, conflicts with
// their else-branch reads, counts and pinned reads of a large read,
// deletes — are read by the store's codec as the protobuf runtime reads
// them into etcd's generated types.
func TestEtcdsAnswersAreReadAsTheRuntimeReadsThem(t *testing.T) {
	e := storetest.SharedEtcd(t)
	s, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: fmt.Sprintf("/wire-%d", time.Now().UnixNano()), DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	calls := etcdstore.Record(s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/a", Value: []byte(`{"x":1}`)}, {Key: "/s", Value: []byte("x"), TTL: 5 * time.Second}}))
	snap, err := s.Read(ctx, []string{"/a", "/none"}, []string{"/"})
	require.NoError(t, err)
	require.Equal(t, `{"x":1}`, string(snap.Items["/a"].Value))
	require.Len(t, snap.Items, 2, "/a and /s, not the marker")
	conflict, err := s.TxnOrRead(ctx, []store.Cond{{Key: "/a"}}, []store.Op{{Key: "/a", Value: []byte("mine")}}, []string{"/a"})
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, `{"x":1}`, string(conflict.Items["/a"].Value))
	var names []string
	for i := range 2 * etcdstore.MaxTxnOps {
		names = append(names, fmt.Sprintf("%04d", i))
	}
	got := 0
	require.NoError(t, s.ReadNames(ctx, store.NameRead{Names: names, Under: []string{"/k/"}}, func(*store.Snapshot) error { return nil },
		func(snap *store.Snapshot, _ []int) error { got += len(snap.Items); return nil }))
	require.Zero(t, got, "no such names")
	require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/a", Delete: true}}))

	seen := map[string]int{}
	for _, c := range calls() {
		seen[c.Method]++
		require.NotNil(t, c.Answer, "%s answered", c.Method)
		require.NoError(t, etcdstore.ReadsAsTheRuntime(c.Method, c.Answer), "%s", c.Method)
	}
	require.Equal(t, 4, seen["/etcdserverpb.Lease/LeaseGrant"], "a guard lease for each of three writes, and the TTL's")
	require.GreaterOrEqual(t, seen["/etcdserverpb.KV/Txn"], 6)
}

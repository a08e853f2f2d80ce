package etcdstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/storetest"
)

// A key put with a TTL (an operator command's kept answer, a node's
// session) is bound to a lease; an Update whose attempts conflict must not
// leave a lease per attempt that did not land, holding nothing for its
// whole TTL.
func TestAnUpdateThatConflictedLeavesOnlyTheLeaseOfWhatLanded(t *testing.T) {
	t.Parallel() // its own server
	e, err := storetest.StartEtcd(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(e.Stop)
	client := e.Client(t)
	ctx := context.Background()
	for i, c := range []struct {
		name      string
		conflicts int
		ttl       time.Duration
	}{
		{"an update that conflicted once leaves one lease, the one its key holds", 1, 24 * time.Hour},
		{"an update that conflicted three times leaves one lease, the one its key holds", 3, 24 * time.Hour},
		{"a session's lease is shared by the attempts as well", 2, 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: []string{e.Endpoint}, Prefix: fmt.Sprintf("/lease-%d", i), DialTimeout: 2 * time.Second})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			before := leases(t, client)
			attempts := 0
			err = store.Update(ctx, s, []string{"/k"}, func(tx *store.Tx) error {
				attempts++
				if attempts <= c.conflicts {
					// Another writer moves the key read: this attempt conflicts.
					require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/k", Value: fmt.Appendf(nil, "theirs %d", attempts)}}))
				}
				tx.Put("/k", []byte("mine"))
				tx.PutTTL("/answer", []byte("kept"), c.ttl)
				return nil
			})
			require.NoError(t, err)
			require.Equal(t, c.conflicts+1, attempts)
			var added []clientv3.LeaseID
			for id := range leases(t, client) {
				if !before[id] {
					added = append(added, id)
				}
			}
			var ttls []int64
			for _, id := range added {
				ttl, err := client.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
				require.NoError(t, err)
				if ttl.GrantedTTL == int64(c.ttl.Seconds()) {
					ttls = append(ttls, ttl.GrantedTTL)
					require.Len(t, ttl.Keys, 1, "the lease holds the key put with it")
				}
			}
			require.Len(t, ttls, 1, "one lease of the key's TTL, not one per attempt")
		})
	}
}

// leases are the server's leases.
func leases(t *testing.T, c *clientv3.Client) map[clientv3.LeaseID]bool {
	t.Helper()
	resp, err := c.Leases(context.Background())
	require.NoError(t, err)
	out := map[clientv3.LeaseID]bool{}
	for _, l := range resp.Leases {
		out[l.ID] = true
	}
	return out
}

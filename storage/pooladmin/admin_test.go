package pooladmin

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

const gib = int64(1) << 30

// beforeUpdate is a store that runs hook once, just before the first read
// of named keys (the read of a store.Update), after the command's read of
// the whole state.
type beforeUpdate struct {
	store.Store
	once sync.Once
	hook func()
}

func (b *beforeUpdate) Read(ctx context.Context, keys, prefixes []string) (*store.Snapshot, error) {
	if len(keys) > 0 {
		b.once.Do(b.hook)
	}
	return b.Store.Read(ctx, keys, prefixes)
}

// nodeOps are the writes of a usage write that creates node's record with
// objects (id → bytes) in pool p: the record and the pool's counters, in
// one transaction as Admit lands them.
func nodeOps(t *testing.T, node string, objs map[string]int64, rec *pool.Record) []store.Op {
	n := storage.NewNode()
	n.Capacity.Pools = map[string]pool.Declaration{rec.ID: {Path: "/mnt/" + rec.ID}}
	n.Usage.PoolObjects = pool.Objects{}
	for id, b := range objs {
		n.Usage.PoolObjects[id] = pool.Object{Pool: rec.ID, Bytes: b, Held: true}
		rec.Reserved += b
		rec.Objects++
	}
	data, err := storage.Rules{}.Encode(n)
	require.NoError(t, err)
	prec, err := rec.Encode()
	require.NoError(t, err)
	return []store.Op{{Key: nodes.RecordPrefix("storage") + node, Value: data}, {Key: storage.PoolKey(rec.ID), Value: prec}}
}

// TestRepairCountsANodeRecordCreatedAfterItsRead: a node created with an
// object in the pool between the repair's read of every record and its
// transaction is counted, not erased from the pool's counters (which its
// own write moved, as every write of an object does).
func TestRepairCountsANodeRecordCreatedAfterItsRead(t *testing.T) {
	ctx := context.Background()
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "repair.db"), boltstore.Options{Prefix: "/eru", Create: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bolt.Close() })
	rec := pool.NewRecord("p", time.Now())
	rec.Capacity = new(1024 * gib)
	require.NoError(t, bolt.Txn(ctx, nil, nodeOps(t, "a", map[string]int64{"a1": 10 * gib}, rec)))
	s := &beforeUpdate{Store: bolt, hook: func() {
		require.NoError(t, bolt.Txn(ctx, nil, nodeOps(t, "b", map[string]int64{"b1": 20 * gib}, rec)))
	}}
	a := &Admin{Store: s}
	_, err = a.Repair(ctx, "p", nodes.Command{})
	require.NoError(t, err)

	check, err := (&Admin{Store: bolt}).Check(ctx)
	require.NoError(t, err)
	require.False(t, check.Drifted, "the repair left the pool's counters disagreeing with the records: %+v", check.Pools)
	data, ok, err := store.Get(ctx, bolt, storage.PoolKey("p"))
	require.NoError(t, err)
	require.True(t, ok)
	got, err := pool.DecodeRecord(data)
	require.NoError(t, err)
	require.Equal(t, 30*gib, got.Reserved, "node b's object must still reserve its bytes")
	require.Equal(t, int64(2), got.Objects)
}

// registered is the registration of node, isolated or not.
func registered(t *testing.T, node string, isolated bool) store.Op {
	reg := nodes.NewRegistration(node, time.Now())
	reg.Isolated = isolated
	data, err := json.Marshal(reg)
	require.NoError(t, err)
	return store.Op{Key: nodes.RegistrationKey(node), Value: data}
}

// TestDeclareLostSeesAMemberAddedAfterItsRead: a node that declares the
// pool, added between the command's read of every record and its
// transaction, is a member that is not isolated: the pool is not declared
// lost under it.
func TestDeclareLostSeesAMemberAddedAfterItsRead(t *testing.T) {
	ctx := context.Background()
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "lost.db"), boltstore.Options{Prefix: "/eru", Create: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bolt.Close() })
	rec := pool.NewRecord("p", time.Now())
	rec.Capacity = new(1024 * gib)
	require.NoError(t, bolt.Txn(ctx, nil, append(nodeOps(t, "a", map[string]int64{"a1": 10 * gib}, rec), registered(t, "a", true))))
	s := &beforeUpdate{Store: bolt, hook: func() {
		// add-node b declaring p: p's record exists, so only b's keys are written.
		ops := nodeOps(t, "b", nil, rec.Clone())
		require.NoError(t, bolt.Txn(ctx, nil, []store.Op{ops[0], registered(t, "b", false)}))
	}}
	_, err = (&Admin{Store: s}).DeclareLost(ctx, "p", nodes.Command{})
	require.Error(t, err, "pool p was declared lost while node b, not isolated, declares it")
	require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
	require.ErrorContains(t, err, "not isolated: b")
}

package nodes_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/types"
)

func TestForget(t *testing.T) {
	ctx := context.Background()
	t.Run("a registration no plugin has a record of is deleted with its session", func(t *testing.T) {
		r, _ := registry(t)
		_, err := r.Heartbeat(ctx, "n1", nodes.Measurement{}, time.Minute, 0, true, nodes.Command{})
		require.NoError(t, err)
		out, err := r.Forget(ctx, "n1", nodes.Command{})
		require.NoError(t, err)
		require.Equal(t, "n1", out.Value.NodeID)
		_, err = r.Get(ctx, "n1")
		require.Equal(t, types.NotFound, types.ClassOf(err))
		snap, err := r.Store.Read(ctx, []string{nodes.SessionKey("n1")}, nil)
		require.NoError(t, err)
		_, ok := snap.Get(nodes.SessionKey("n1"))
		require.False(t, ok, "the session goes too")
	})
	t.Run("an unknown name is not_found", func(t *testing.T) {
		r, _ := registry(t)
		_, err := r.Forget(ctx, "ghost", nodes.Command{})
		require.Equal(t, types.NotFound, types.ClassOf(err))
	})
	t.Run("a node with a plugin record is refused, naming the plugin", func(t *testing.T) {
		r, _ := registry(t)
		put(t, r.Store, nodes.RecordPrefix("compute")+"n1", overcommit.Node{Capacity: overcommit.Amount{CPUMillis: 1000}})
		put(t, r.Store, nodes.RegistrationKey("n1"), nodes.NewRegistration("n1", time.Unix(0, 0)))
		_, err := r.Forget(ctx, "n1", nodes.Command{})
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
		require.ErrorContains(t, err, "the compute plugin still has a record of it")
	})
	t.Run("a node with a plugin record and no registration is refused, naming the plugin, not not_found", func(t *testing.T) {
		r, _ := registry(t)
		put(t, r.Store, nodes.RecordPrefix("compute")+"legacy", overcommit.Node{Capacity: overcommit.Amount{CPUMillis: 1000}})
		_, err := r.Forget(ctx, "legacy", nodes.Command{})
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
		require.ErrorContains(t, err, "node legacy is READY: the compute plugin still has a record of it")
	})
	t.Run("a node both plugins record is refused, naming both in the plural", func(t *testing.T) {
		r, _ := registry(t)
		put(t, r.Store, nodes.RecordPrefix("compute")+"n1", overcommit.Node{Capacity: overcommit.Amount{CPUMillis: 1000}})
		put(t, r.Store, nodes.RecordPrefix("storage")+"n1", storage.NewNode())
		put(t, r.Store, nodes.RegistrationKey("n1"), nodes.NewRegistration("n1", time.Unix(0, 0)))
		_, err := r.Forget(ctx, "n1", nodes.Command{})
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
		require.ErrorContains(t, err, "the compute and storage plugins still have records of it")
	})
	t.Run("a RETIRED tombstone is refused", func(t *testing.T) {
		r, _ := registry(t)
		reg := nodes.NewRegistration("n1", time.Unix(0, 0))
		reg.Admission = nodes.Retired
		put(t, r.Store, nodes.RegistrationKey("n1"), reg)
		_, err := r.Forget(ctx, "n1", nodes.Command{})
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
		require.ErrorContains(t, err, "tombstone")
	})
}

func TestHeartbeatOfAnUnknownName(t *testing.T) {
	ctx := context.Background()
	r, _ := registry(t)
	t.Run("is not_found without register, and writes nothing", func(t *testing.T) {
		_, err := r.Heartbeat(ctx, "phantom", nodes.Measurement{}, time.Minute, 0, false, nodes.Command{})
		require.Equal(t, types.NotFound, types.ClassOf(err))
		views, err := r.List(ctx, "")
		require.NoError(t, err)
		require.Empty(t, views)
	})
	t.Run("registers the node with register", func(t *testing.T) {
		out, err := r.Heartbeat(ctx, "phantom", nodes.Measurement{}, time.Minute, 0, true, nodes.Command{})
		require.NoError(t, err)
		require.Equal(t, int64(1), out.Value.Version)
	})
	t.Run("registers a node some plugin has a record of without register", func(t *testing.T) {
		put(t, r.Store, nodes.RecordPrefix("compute")+"legacy", overcommit.Node{Capacity: overcommit.Amount{CPUMillis: 1000}})
		_, err := r.Heartbeat(ctx, "legacy", nodes.Measurement{}, time.Minute, 0, false, nodes.Command{})
		require.NoError(t, err)
	})
}

func TestUnregisteredNodes(t *testing.T) {
	ctx := context.Background()
	r, clock := registry(t)
	r.Policy.RequireSession = true
	put(t, r.Store, nodes.RecordPrefix("compute")+"legacy", overcommit.Node{Capacity: overcommit.Amount{CPUMillis: 1000}})

	t.Run("a node with a record and no registration is listed at version 0, placeable as the verbs see it", func(t *testing.T) {
		views, err := r.List(ctx, "")
		require.NoError(t, err)
		require.Len(t, views, 1)
		require.Equal(t, "legacy", views[0].NodeID)
		require.Equal(t, int64(0), views[0].Version)
		require.Equal(t, nodes.StatusReady, views[0].Status)
		require.True(t, views[0].Schedulable)
	})
	t.Run("a command that changes nothing stores nothing", func(t *testing.T) {
		_, err := r.CancelDrain(ctx, "legacy", nodes.Command{})
		require.NoError(t, err)
		snap, err := r.Store.Read(ctx, []string{nodes.RegistrationKey("legacy")}, nil)
		require.NoError(t, err)
		_, ok := snap.Get(nodes.RegistrationKey("legacy"))
		require.False(t, ok)
	})
	t.Run("the first operator write creates the registration", func(t *testing.T) {
		clock.Advance(time.Minute)
		out, err := r.Drain(ctx, "legacy", nodes.Command{})
		require.NoError(t, err)
		require.Equal(t, int64(1), out.Value.Version)
		require.Equal(t, clock.Now(), out.Value.CreatedAt)
		require.Equal(t, []string{"node is drained", "node is syncing: no session has reported yet"}, out.Value.UnschedulableReasons)
	})
	t.Run("a drained node says drained when a status above DRAINED shows", func(t *testing.T) {
		out, err := r.Revoke(ctx, "legacy", nodes.Command{})
		require.NoError(t, err)
		require.Equal(t, nodes.StatusRevoked, out.Value.Status)
		require.Equal(t, []string{"node is revoked", "node is drained", "node is syncing: no session has reported yet"}, out.Value.UnschedulableReasons)
	})
}

func TestLedgerSnapshot(t *testing.T) {
	for _, c := range []struct {
		name    string
		ledger  types.Amounts
		set     types.Amounts
		changed bool
		want    types.Amounts
	}{
		{"setting the same ledger changes nothing", types.Amounts{"storage": 5}, types.Amounts{"storage": 5}, false, types.Amounts{"storage": 5}},
		{"zero components are the same as absent", types.Amounts{"storage": 5}, types.Amounts{"storage": 5, "volume:/d": 0}, false, types.Amounts{"storage": 5}},
		{"a larger snapshot restores what a decrease drew", types.Amounts{"storage": 2}, types.Amounts{"storage": 5}, true, types.Amounts{"storage": 5}},
		{"an empty snapshot forgets the ledger", types.Amounts{"storage": 2}, types.Amounts{}, true, nil},
		{"a snapshot on an empty ledger sets it", nil, types.Amounts{"storage": 1}, true, types.Amounts{"storage": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := nodes.NewRegistration("n1", time.Unix(0, 0))
			if c.ledger != nil {
				require.NoError(t, r.Release("storage", c.ledger))
			}
			require.Equal(t, c.changed, r.SetLedger("storage", c.set))
			require.Equal(t, c.want, r.Ledger("storage"))
		})
	}
}

func TestAddingStartsANewLife(t *testing.T) {
	shaped := func() *nodes.Entry {
		reg := nodes.NewRegistration("n1", time.Unix(0, 0))
		reg.Drain, reg.Isolated, reg.Admission = true, true, nodes.Revoked
		require.NoError(t, reg.Release("storage", types.Amounts{"storage": 5}))
		require.NoError(t, reg.Release("compute", types.Amounts{"cpu_millis": 5}))
		return &nodes.Entry{Reg: reg}
	}
	t.Run("with no other plugin record, the registration starts fresh", func(t *testing.T) {
		e := shaped()
		require.NoError(t, e.Adding("storage", false))
		require.True(t, e.Reg.Pristine())
	})
	t.Run("with another plugin's record, only this plugin's ledger is forgotten", func(t *testing.T) {
		e := shaped()
		require.NoError(t, e.Adding("storage", true))
		require.True(t, e.Reg.Drain)
		require.Nil(t, e.Reg.Ledger("storage"))
		require.Equal(t, types.Amounts{"cpu_millis": 5}, e.Reg.Ledger("compute"))
	})
	t.Run("a RETIRED tombstone is refused", func(t *testing.T) {
		e := shaped()
		e.Reg.Admission = nodes.Retired
		err := e.Adding("storage", false)
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
		require.ErrorContains(t, err, "node is RETIRED")
	})
}

package nodes_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// registry is a registry of both plugins on a fresh embedded store whose
// clock (sessions' expiry included) is clock.
func registry(t *testing.T) (*nodes.Registry, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "store.db"), boltstore.Options{Prefix: "/eru", Create: true, Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return &nodes.Registry{
		Store:     s,
		Resources: []nodes.Resource{engine.Registered(storage.Rules{}), engine.Registered(overcommit.Rules{})},
		Clock:     clock.Now,
	}, clock
}

func put(t *testing.T, s store.Store, key string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, s.Txn(context.Background(), nil, []store.Op{{Key: key, Value: data}}))
}

func TestHeartbeatIncarnations(t *testing.T) {
	ctx := context.Background()
	r, clock := registry(t)
	beat := func(boot string) *nodes.View {
		t.Helper()
		out, err := r.Heartbeat(ctx, "n1", nodes.Measurement{BootID: boot}, 30*time.Second, 0, true, nodes.Command{})
		require.NoError(t, err)
		return out.Value
	}

	t.Run("the first heartbeat registers the node and starts its first incarnation", func(t *testing.T) {
		v := beat("boot-a")
		require.Equal(t, int64(1), v.Incarnation)
		require.True(t, v.Session.Live)
		require.Equal(t, nodes.StatusReady, v.Status)
	})
	t.Run("the same boot id keeps the incarnation and the version", func(t *testing.T) {
		before, err := r.Get(ctx, "n1")
		require.NoError(t, err)
		v := beat("boot-a")
		require.Equal(t, int64(1), v.Incarnation)
		require.Equal(t, before.Version, v.Version, "heartbeats do not move the registration version")
		require.Equal(t, before.Observation.Version+1, v.Observation.Version)
	})
	t.Run("a session not renewed within its ttl expires and the node is UNAVAILABLE", func(t *testing.T) {
		clock.Advance(31 * time.Second)
		v, err := r.Get(ctx, "n1")
		require.NoError(t, err)
		require.False(t, v.Session.Live)
		require.Equal(t, nodes.StatusUnavailable, v.Status)
	})
	t.Run("isolating the dead node, then a new boot starts a new incarnation that clears isolation", func(t *testing.T) {
		iso, err := r.Isolate(ctx, "n1", nodes.Command{})
		require.NoError(t, err)
		require.True(t, iso.Value.Node.Isolated)
		v := beat("boot-b")
		require.Equal(t, int64(2), v.Incarnation)
		require.False(t, v.Isolated)
		require.Equal(t, int64(1), v.IsolatedIncarnation, "the record says which incarnation was isolated")
		require.Equal(t, nodes.StatusReady, v.Status)
	})
}

func TestCommandReplay(t *testing.T) {
	ctx := context.Background()
	r, clock := registry(t)
	_, err := r.Heartbeat(ctx, "n1", nodes.Measurement{}, time.Second, 0, true, nodes.Command{})
	require.NoError(t, err)
	drain := nodes.Command{ID: "c1", Args: "nodes drain n1"}

	first, err := r.Drain(ctx, "n1", drain)
	require.NoError(t, err)
	require.True(t, first.Value.Drain)

	t.Run("a replay answers the first answer byte for byte and writes nothing", func(t *testing.T) {
		_, err := r.CancelDrain(ctx, "n1", nodes.Command{})
		require.NoError(t, err)
		clock.Advance(time.Hour)
		again, err := r.Drain(ctx, "n1", drain)
		require.NoError(t, err)
		require.Equal(t, first.JSON, again.JSON)
		require.Equal(t, first.Value.Version, again.Value.Version, "the typed answer is the kept one")
		now, err := r.Get(ctx, "n1")
		require.NoError(t, err)
		require.False(t, now.Drain, "the replay did not drain the node again")
	})
	t.Run("the same id with other arguments is already_exists", func(t *testing.T) {
		_, err := r.Drain(ctx, "n1", nodes.Command{ID: "c1", Args: "nodes drain n1 --if-version=3"})
		require.Equal(t, types.AlreadyExists, types.ClassOf(err))
	})
	t.Run("a kept answer is forgotten after 24 hours", func(t *testing.T) {
		clock.Advance(nodes.CommandTTL)
		again, err := r.Drain(ctx, "n1", drain)
		require.NoError(t, err)
		require.Greater(t, again.Value.Version, first.Value.Version, "the command ran again")
	})
	t.Run("a stale --if-version is aborted", func(t *testing.T) {
		v := int64(1)
		_, err := r.Drain(ctx, "n1", nodes.Command{IfVersion: &v})
		require.Equal(t, types.Aborted, types.ClassOf(err))
	})
}

func TestIsolateFigures(t *testing.T) {
	ctx := context.Background()
	r, _ := registry(t)
	n := storage.NewNode()
	n.Capacity.Volumes = map[string]int64{"/data0": 100, "/data1": 100}
	n.Capacity.Storage = 300
	n.Usage.Volumes = map[string]int64{"/data0": 10, "/data1": 0}
	n.Usage.Storage = 20
	put(t, r.Store, nodes.RecordPrefix("storage")+"n1", n)
	put(t, r.Store, nodes.RecordPrefix("compute")+"n1", overcommit.Node{Capacity: overcommit.Amount{CPUMillis: 8000}, Usage: overcommit.Amount{CPUMillis: 3000, MemoryBytes: 7}})
	put(t, r.Store, nodes.RegistrationKey("n1"), nodes.NewRegistration("n1", time.Unix(0, 0)))

	out, err := r.Isolate(ctx, "n1", nodes.Command{})
	require.NoError(t, err)
	require.JSONEq(t, `{"released_volumes": 1, "released_storage_bytes": 20, "released_pool_objects": 0, "released_pool_bytes": 0, "released_cpu_millis": 3000, "released_memory_bytes": 7}`,
		string(mustJSON(t, figuresOf(out.Value))))
	require.Contains(t, string(out.JSON), `"released_volumes":1,"released_storage_bytes":20,"released_pool_objects":0,"released_pool_bytes":0,"released_cpu_millis":3000,"released_memory_bytes":7}`,
		"each plugin's figures, in the plugins' order")

	t.Run("isolating again releases nothing and still names every figure", func(t *testing.T) {
		again, err := r.Isolate(ctx, "n1", nodes.Command{})
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"released_volumes": 0, "released_storage_bytes": 0, "released_pool_objects": 0, "released_pool_bytes": 0, "released_cpu_millis": 0, "released_memory_bytes": 0}, figuresOf(again.Value))
	})
	t.Run("the answer reads back as it was written", func(t *testing.T) {
		var back nodes.IsolateResult
		require.NoError(t, json.Unmarshal(out.JSON, &back))
		require.Equal(t, figuresOf(out.Value), figuresOf(&back))
		require.Equal(t, out.Value.Node.Version, back.Node.Version)
	})
}

func figuresOf(r *nodes.IsolateResult) map[string]int64 {
	out := map[string]int64{}
	for _, f := range r.Figures {
		out[f.Name] = f.Value
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

func TestRecordRemoved(t *testing.T) {
	ctx := context.Background()
	remove := func(t *testing.T, s store.Store, plugin string) {
		t.Helper()
		plugins := []nodes.Resource{engine.Registered(storage.Rules{}), engine.Registered(overcommit.Rules{})}
		keys := append([]string{nodes.RecordPrefix(plugin) + "n1"}, nodes.RecordKeys("n1", plugin, plugins)...)
		require.NoError(t, store.Update(ctx, s, keys, func(tx *store.Tx) error {
			tx.Delete(nodes.RecordPrefix(plugin) + "n1")
			return nodes.RecordRemoved(tx, "n1", plugin, plugins)
		}))
	}
	seed := func(t *testing.T, reg *nodes.Registration, plugins ...string) *nodes.Registry {
		t.Helper()
		r, _ := registry(t)
		for _, p := range plugins {
			put(t, r.Store, nodes.RecordPrefix(p)+"n1", map[string]any{})
		}
		put(t, r.Store, nodes.RegistrationKey("n1"), reg)
		return r
	}

	t.Run("the last plugin record takes the registration with it", func(t *testing.T) {
		r := seed(t, nodes.NewRegistration("n1", time.Unix(0, 0)), "compute")
		remove(t, r.Store, "compute")
		_, err := r.Get(ctx, "n1")
		require.Equal(t, types.NotFound, types.ClassOf(err))
	})
	t.Run("another plugin's record keeps the registration whole, ledger included, for core's undo", func(t *testing.T) {
		reg := nodes.NewRegistration("n1", time.Unix(0, 0))
		require.NoError(t, reg.Release("compute", types.Amounts{"cpu_millis": 1000}))
		require.NoError(t, reg.Release("storage", types.Amounts{"storage": 5}))
		r := seed(t, reg, "compute", "storage")
		remove(t, r.Store, "compute")
		v, err := r.Get(ctx, "n1")
		require.NoError(t, err)
		require.Contains(t, v.Released, "compute")
		require.Contains(t, v.Released, "storage")
		require.Equal(t, int64(1), v.Version, "the registration is untouched")
	})
	for _, c := range []struct {
		name  string
		shape func(r *nodes.Registration)
	}{
		{"a drained registration outlives its last record", func(r *nodes.Registration) { r.Drain = true }},
		{"an isolated registration outlives its last record", func(r *nodes.Registration) { r.Isolated = true }},
		{"a registration with a ledger outlives its last record", func(r *nodes.Registration) { require.NoError(t, r.Release("compute", types.Amounts{"cpu_millis": 1})) }},
		{"a revoked registration outlives its last record", func(r *nodes.Registration) { r.Admission = nodes.Revoked }},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := nodes.NewRegistration("n1", time.Unix(0, 0))
			c.shape(reg)
			r := seed(t, reg, "compute")
			remove(t, r.Store, "compute")
			v, err := r.Get(ctx, "n1")
			require.NoError(t, err)
			require.Equal(t, reg.Drain, v.Drain)
			require.Equal(t, reg.Isolated, v.Isolated)
			require.Equal(t, reg.Admission, v.Admission)
			require.Equal(t, len(reg.Released), len(v.Released))
		})
	}
	t.Run("a retired tombstone stays for ever", func(t *testing.T) {
		reg := nodes.NewRegistration("n1", time.Unix(0, 0))
		reg.Admission = nodes.Retired
		r := seed(t, reg, "compute")
		remove(t, r.Store, "compute")
		v, err := r.Get(ctx, "n1")
		require.NoError(t, err)
		require.Equal(t, nodes.StatusRetired, v.Status)
	})
}

package nodes_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/types"
)

func TestStatusFirstMatchWins(t *testing.T) {
	requireSession := nodes.Policy{RequireSession: true}
	for _, c := range []struct {
		name   string
		reg    nodes.Registration
		live   bool
		holds  bool
		policy nodes.Policy
		want   nodes.Status
	}{
		{name: "a fresh admitted node is READY", want: nodes.StatusReady},
		{name: "retirement wins over everything", reg: nodes.Registration{Admission: nodes.Retired, Isolated: true, Drain: true}, want: nodes.StatusRetired},
		{name: "revocation wins over isolation and drain", reg: nodes.Registration{Admission: nodes.Revoked, Isolated: true, Drain: true}, want: nodes.StatusRevoked},
		{name: "an isolated node is UNAVAILABLE even with a live session", reg: nodes.Registration{Isolated: true, Drain: true}, live: true, want: nodes.StatusUnavailable},
		{name: "a node whose session expired is UNAVAILABLE", reg: nodes.Registration{SessionEver: true, Drain: true}, want: nodes.StatusUnavailable},
		{name: "a draining node holding nothing is DRAINED", reg: nodes.Registration{Drain: true}, want: nodes.StatusDrained},
		{name: "a draining node still holding usage is DRAINING", reg: nodes.Registration{Drain: true}, holds: true, want: nodes.StatusDraining},
		{name: "drain wins over syncing", reg: nodes.Registration{Drain: true}, holds: true, policy: requireSession, want: nodes.StatusDraining},
		{name: "a node that never reported is SYNCING when sessions are required", policy: requireSession, want: nodes.StatusSyncing},
		{name: "a node that never reported is READY when sessions are not required", want: nodes.StatusReady},
		{name: "a node with a live session is READY when sessions are required", reg: nodes.Registration{SessionEver: true}, live: true, policy: requireSession, want: nodes.StatusReady},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := c.reg
			if reg.Admission == "" {
				reg.Admission = nodes.Admitted
			}
			require.Equal(t, c.want, reg.Status(c.live, c.holds, c.policy))
		})
	}
}

func TestRefusal(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	tolerance := nodes.Policy{ClockSkewTolerance: 500 * time.Millisecond}
	for _, c := range []struct {
		name string
		reg  *nodes.Registration
		live bool
		want string
	}{
		{name: "a node the registry never saw may take work", reg: nil, want: ""},
		{name: "a ready node may take work", reg: &nodes.Registration{Admission: nodes.Admitted}, want: ""},
		{name: "a draining node may not", reg: &nodes.Registration{Admission: nodes.Admitted, Drain: true}, want: "node is draining"},
		{name: "an isolated node may not", reg: &nodes.Registration{Admission: nodes.Admitted, Isolated: true}, want: "node is isolated"},
		{name: "an expired session may not", reg: &nodes.Registration{Admission: nodes.Admitted, SessionEver: true}, want: "node is unavailable: its session expired"},
		{name: "tight memory may not", live: true, reg: &nodes.Registration{Admission: nodes.Admitted, SessionEver: true,
			Observation: &nodes.Observation{MemoryTight: &nodes.MemoryTight{Since: time.Unix(60, 0)}}}, want: "node memory is tight since 1970-01-01T00:01:00Z"},
		{name: "a clock beyond tolerance may not", live: true, reg: &nodes.Registration{Admission: nodes.Admitted, SessionEver: true,
			Observation: &nodes.Observation{Clock: nodes.Clock{Synchronization: nodes.ClockSynchronized, MaxErrorMs: ms(501)}}}, want: "node clock exceeds tolerance: SYNCHRONIZED, max error 501ms > 500ms"},
		{name: "a clock within tolerance may", live: true, reg: &nodes.Registration{Admission: nodes.Admitted, SessionEver: true,
			Observation: &nodes.Observation{Clock: nodes.Clock{Synchronization: nodes.ClockSynchronized, MaxErrorMs: ms(500)}}}, want: ""},
		{name: "an unsynchronised clock may not", live: true, reg: &nodes.Registration{Admission: nodes.Admitted, SessionEver: true,
			Observation: &nodes.Observation{Clock: nodes.Clock{Synchronization: nodes.ClockUnsynchronized}}}, want: "node clock exceeds tolerance: UNSYNCHRONIZED"},
		{name: "an unsynchronised clock names its error", live: true, reg: &nodes.Registration{Admission: nodes.Admitted, SessionEver: true,
			Observation: &nodes.Observation{Clock: nodes.Clock{Synchronization: nodes.ClockUnsynchronized, MaxErrorMs: ms(16000)}}}, want: "node clock exceeds tolerance: UNSYNCHRONIZED, max error 16s > 500ms"},
		{name: "every reason that holds is named, admission first", live: true, reg: &nodes.Registration{Admission: nodes.Revoked, Drain: true, Isolated: true, SessionEver: true,
			Observation: &nodes.Observation{MemoryTight: &nodes.MemoryTight{Since: time.Unix(0, 0)}, Clock: nodes.Clock{Synchronization: nodes.ClockUnsynchronized}}},
			want: "node is revoked; node is isolated; node is draining; node memory is tight since 1970-01-01T00:00:00Z; node clock exceeds tolerance: UNSYNCHRONIZED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, c.reg.Refusal(c.live, tolerance))
		})
	}
}

func TestAbsorb(t *testing.T) {
	for _, c := range []struct {
		name         string
		isolated     bool
		ledger       types.Amounts
		old, next    types.Amounts
		want         types.Amounts
		wantLedger   types.Amounts
		changed      bool
		refusedClass types.Class
	}{
		{name: "with no ledger a write lands as it is",
			old: types.Amounts{"cpu_millis": 2000}, next: types.Amounts{"cpu_millis": 1000}, want: types.Amounts{"cpu_millis": 1000}},
		{name: "a decrease is taken from the ledger first",
			ledger: types.Amounts{"cpu_millis": 3000}, old: types.Amounts{"cpu_millis": 1000}, next: types.Amounts{"cpu_millis": -1000},
			want: types.Amounts{"cpu_millis": 1000}, wantLedger: types.Amounts{"cpu_millis": 1000}, changed: true},
		{name: "a decrease beyond the ledger takes the rest from live usage and empties the ledger",
			ledger: types.Amounts{"cpu_millis": 1000}, old: types.Amounts{"cpu_millis": 3000}, next: types.Amounts{"cpu_millis": 0},
			want: types.Amounts{"cpu_millis": 1000}, wantLedger: nil, changed: true},
		{name: "an increase leaves the ledger alone",
			ledger: types.Amounts{"cpu_millis": 1000}, old: types.Amounts{"cpu_millis": 0}, next: types.Amounts{"cpu_millis": 500},
			want: types.Amounts{"cpu_millis": 500}, wantLedger: types.Amounts{"cpu_millis": 1000}},
		{name: "each component draws on its own ledger entry",
			ledger: types.Amounts{"volume:/data0": 10}, old: types.Amounts{"volume:/data0": 0, "storage": 5}, next: types.Amounts{"volume:/data0": -10, "storage": 0},
			want: types.Amounts{"volume:/data0": 0, "storage": 0}, wantLedger: nil, changed: true},
		{name: "an isolated node refuses growth",
			isolated: true, old: types.Amounts{"cpu_millis": 0}, next: types.Amounts{"cpu_millis": 1}, refusedClass: types.FailedPrecondition},
		{name: "an isolated node takes decreases",
			isolated: true, ledger: types.Amounts{"cpu_millis": 1000}, old: types.Amounts{"cpu_millis": 0}, next: types.Amounts{"cpu_millis": -1000},
			want: types.Amounts{"cpu_millis": 0}, wantLedger: nil, changed: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := nodes.NewRegistration("n1", time.Unix(0, 0))
			reg.Isolated = c.isolated
			if c.ledger != nil {
				require.NoError(t, reg.Release("compute", c.ledger))
			}
			got, changed, err := reg.Absorb("compute", c.old, c.next)
			if c.refusedClass != "" {
				require.Equal(t, c.refusedClass, types.ClassOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			require.Equal(t, c.changed, changed)
			require.Equal(t, c.wantLedger, reg.Ledger("compute"))
		})
	}
}

func TestRelease(t *testing.T) {
	t.Run("released usage adds up in the plugin's ledger", func(t *testing.T) {
		reg := nodes.NewRegistration("n1", time.Unix(0, 0))
		require.NoError(t, reg.Release("storage", types.Amounts{"storage": 5, "volume:/d": 5}))
		require.NoError(t, reg.Release("storage", types.Amounts{"storage": 2}))
		require.Equal(t, types.Amounts{"storage": 7, "volume:/d": 5}, reg.Ledger("storage"))
	})
	for _, c := range []struct {
		name  string
		first types.Amounts
	}{
		{"a ledger past 2^53 is refused and left as it was", types.Amounts{"storage": types.MaxExact - 1}},
		{"a ledger past int64 is refused and left as it was", types.Amounts{"storage": math.MaxInt64}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := nodes.NewRegistration("n1", time.Unix(0, 0))
			reg.Released = map[string]types.Amounts{"storage": c.first}
			err := reg.Release("storage", types.Amounts{"storage": 2, "volume:/d": 2})
			require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
			require.EqualError(t, err, "the storage isolation ledger would hold more than 2^53 (9007199254740992) of a component: let core remove the workloads of the last isolation first")
			require.Equal(t, c.first, reg.Ledger("storage"))
		})
	}
}

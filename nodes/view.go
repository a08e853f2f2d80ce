package nodes

import (
	"encoding/json"
	"time"

	"github.com/eru-extend/resources/types"
)

// Resource is what the registry needs of one resource plugin's node records,
// whatever their shape.
type Resource interface {
	Name() string
	// RecordPrefix is where the plugin keeps its node records: the record
	// of node n is at RecordPrefix()+n.
	RecordPrefix() string
	// SharedKeys are store keys the plugin's summaries read.
	SharedKeys() []string
	// Summary decodes a record: capacity and usage as the plugin answers
	// them, and the usage it holds, flattened.
	Summary(record []byte, shared map[string][]byte) (capacity, usage any, held types.Amounts, err error)
	// Release returns the record with its usage zeroed and what it held.
	Release(record []byte) ([]byte, types.Amounts, error)
	// LedgerView renders released amounts in the plugin's usage shape.
	LedgerView(a types.Amounts) any
	// IsolationFigures are the plugin's counts in isolate's answer, every
	// one of them, in a fixed order (zero for no amounts).
	IsolationFigures(a types.Amounts) []types.Figure
}

// View is a registration as `nodes get` prints it.
type View struct {
	NodeID    string    `json:"node_id"`
	Admission Admission `json:"admission"`
	Status    Status    `json:"status"`
	// Schedulable says whether the node may take new work now; when it may
	// not, UnschedulableReasons names every reason that holds.
	Schedulable          bool                       `json:"schedulable"`
	UnschedulableReasons []string                   `json:"unschedulable_reasons"`
	Drain                bool                       `json:"drain"`
	Isolated             bool                       `json:"isolated"`
	IsolatedIncarnation  int64                      `json:"isolated_incarnation"`
	Incarnation          int64                      `json:"incarnation"`
	BootID               string                     `json:"boot_id"`
	Version              int64                      `json:"registration_version"`
	CreatedAt            time.Time                  `json:"created_at"`
	UpdatedAt            time.Time                  `json:"updated_at"`
	Session              SessionView                `json:"session"`
	Observation          *Observation               `json:"observation,omitempty"`
	Released             map[string]any             `json:"released"`
	Resources            map[string]ResourceSummary `json:"resources"`
	// HoldsUsage says whether some plugin records usage on the node (what
	// DRAINED and retirement look at); the view shows it as the status.
	HoldsUsage bool `json:"-"`
}

// SessionView is the session part of a View: live, since and expires_at
// are shown only while the session is live.
type SessionView struct {
	Live      bool       `json:"live,omitempty"`
	Ever      bool       `json:"ever"`
	Since     *time.Time `json:"since,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	LastSeen  *time.Time `json:"last_seen,omitempty"`
}

// ResourceSummary is one plugin's capacity and usage of the node.
type ResourceSummary struct {
	Capacity any `json:"capacity"`
	Usage    any `json:"usage"`
}

// nodeState is everything known of one node in a snapshot.
type nodeState struct {
	reg     *Registration
	session *Session
	records map[string][]byte // plugin name -> record
	holds   bool              // some plugin records usage (set by view)
	// virtual: the node has plugin records and no registration; like the
	// placement verbs, the view lets it take work.
	virtual bool
}

// DecodeRegistration decodes a stored registration of node (node only names
// it in the error), for a cache that decodes registrations ahead of reads.
func DecodeRegistration(node string, data []byte) (*Registration, error) {
	return decodeRegistration(node, data)
}

// decodeRegistration reads a stored registration.
func decodeRegistration(node string, data []byte) (*Registration, error) {
	if r, ok := decodeRegistrationFast(data); ok {
		return r, nil
	}
	r := &Registration{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, types.Wrap(types.Internal, err, "registration of node "+node+" is corrupt")
	}
	return r, nil
}

// unregistered is how the registry sees a node some plugin has a record of
// but that has no registration (written by another plugin, or before the
// registry existed): admitted and ready, at version 0. The first operator
// write on it stores it, in that write's transaction.
func unregistered(node string, now time.Time) *Registration {
	return &Registration{NodeID: node, Admission: Admitted, CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
}

// readState extracts one node's state from a snapshot (or a transaction's
// view of one).
func readState(node string, get func(string) ([]byte, bool), plugins []Resource) (*nodeState, error) {
	st := &nodeState{records: map[string][]byte{}}
	if data, ok := get(RegistrationKey(node)); ok {
		reg, err := decodeRegistration(node, data)
		if err != nil {
			return nil, err
		}
		st.reg = reg
	}
	if data, ok := get(SessionKey(node)); ok {
		s := &Session{}
		if err := json.Unmarshal(data, s); err == nil {
			st.session = s
		}
	}
	for _, p := range plugins {
		if data, ok := get(p.RecordPrefix() + node); ok {
			st.records[p.Name()] = data
		}
	}
	return st, nil
}

// view renders a node's state, and notes in st.holds whether any plugin
// records usage on the node.
func (st *nodeState) view(plugins []Resource, shared map[string][]byte, p Policy) (*View, error) {
	reg := st.reg
	if st.virtual {
		p.RequireSession = false
	}
	live := st.session != nil
	v := &View{
		NodeID:              reg.NodeID,
		Admission:           reg.Admission,
		Drain:               reg.Drain,
		Isolated:            reg.Isolated,
		IsolatedIncarnation: reg.IsolatedIncarnation,
		Incarnation:         reg.Incarnation,
		BootID:              reg.BootID,
		Version:             reg.Version,
		CreatedAt:           reg.CreatedAt,
		UpdatedAt:           reg.UpdatedAt,
		Session:             SessionView{Live: live, Ever: reg.SessionEver, LastSeen: reg.LastSeen},
		Released:            map[string]any{},
		Resources:           map[string]ResourceSummary{},
	}
	if live {
		since, exp := st.session.Since, st.session.ExpiresAt
		v.Session.Since, v.Session.ExpiresAt = &since, &exp
		if reg.Observation != nil {
			obs := *reg.Observation
			obs.Clock.ExceedsTolerance = obs.ClockExceeds(p.ClockSkewTolerance)
			v.Observation = &obs
		}
	}
	holds := false
	for _, pl := range plugins {
		if a := reg.Ledger(pl.Name()); len(a) > 0 {
			v.Released[pl.Name()] = pl.LedgerView(a)
		}
		data, ok := st.records[pl.Name()]
		if !ok {
			continue
		}
		capacity, usage, held, err := pl.Summary(data, shared)
		if err != nil {
			return nil, types.Wrap(types.Internal, err, pl.Name()+" record of node "+reg.NodeID)
		}
		v.Resources[pl.Name()] = ResourceSummary{Capacity: capacity, Usage: usage}
		if !held.IsZero() {
			holds = true
		}
	}
	st.holds = holds
	v.HoldsUsage = holds
	v.Status = reg.Status(live, holds, p)
	v.UnschedulableReasons = reasonsOf(reg, live, holds, p)
	v.Schedulable = len(v.UnschedulableReasons) == 0
	return v, nil
}

// reasonsOf lists why the node may not take new work (never nil, so the
// view always shows the list); a drained node (drain set, no usage held)
// says drained, whatever status comes first in the table.
func reasonsOf(reg *Registration, live, holds bool, p Policy) []string {
	out := append([]string{}, reg.Reasons(live, p)...)
	if reg.Drain && !holds {
		for i, r := range out {
			if r == "node is draining" {
				out[i] = "node is drained"
			}
		}
	}
	return out
}

// sharedOf collects the plugins' shared keys from a snapshot.
func sharedOf(plugins []Resource, get func(string) ([]byte, bool)) map[string][]byte {
	out := map[string][]byte{}
	for _, pl := range plugins {
		for _, k := range pl.SharedKeys() {
			if v, ok := get(k); ok {
				out[k] = v
			}
		}
	}
	return out
}

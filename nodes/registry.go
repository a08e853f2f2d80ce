package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// Registry runs the operator commands of the node registry against a store.
type Registry struct {
	Store     store.Store
	Resources []Resource
	Policy    Policy
	Clock     types.Clock
}

// nodeKeys are the keys one node's operator command reads.
func (r *Registry) nodeKeys(node string) []string {
	keys := []string{RegistrationKey(node), SessionKey(node)}
	for _, p := range r.Resources {
		keys = append(keys, p.RecordPrefix()+node)
	}
	return append(keys, r.sharedKeys()...)
}

func (r *Registry) sharedKeys() []string {
	var keys []string
	for _, p := range r.Resources {
		for _, k := range p.SharedKeys() {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// Get reads one node's registration.
func (r *Registry) Get(ctx context.Context, node string) (*View, error) {
	snap, err := r.Store.Read(ctx, r.nodeKeys(node), nil)
	if err != nil {
		return nil, err
	}
	st, err := readState(node, snap.Get, r.Resources)
	if err != nil {
		return nil, err
	}
	if st.reg == nil {
		if len(st.records) == 0 {
			return nil, notFound(node)
		}
		st.reg, st.virtual = unregistered(node, time.Time{}), true
	}
	return st.view(r.Resources, sharedOf(r.Resources, snap.Get), r.Policy)
}

func notFound(node string) error {
	return types.Errorf(types.NotFound, "node %s is not registered and no plugin has a record of it", node)
}

// List reads every node the registry or any plugin knows, ordered by node
// id, keeping those of the given status when one is given. A node with a
// plugin record and no registration is listed as unregistered (version 0).
func (r *Registry) List(ctx context.Context, status Status) ([]*View, error) {
	prefixes := []string{RegistrationPrefix, SessionPrefix}
	for _, p := range r.Resources {
		prefixes = append(prefixes, p.RecordPrefix())
	}
	snap, err := r.Store.Read(ctx, r.sharedKeys(), prefixes)
	if err != nil {
		return nil, err
	}
	shared := sharedOf(r.Resources, snap.Get)
	names := map[string]bool{}
	for _, prefix := range append([]string{RegistrationPrefix}, recordPrefixes(r.Resources)...) {
		for _, it := range snap.Under(prefix) {
			names[strings.TrimPrefix(it.Key, prefix)] = true
		}
	}
	views := []*View{}
	for _, node := range types.SortedKeys(names) {
		st, err := readState(node, snap.Get, r.Resources)
		if err != nil {
			return nil, err
		}
		if st.reg == nil {
			st.reg, st.virtual = unregistered(node, time.Time{}), true
		}
		v, err := st.view(r.Resources, shared, r.Policy)
		if err != nil {
			return nil, err
		}
		if status == "" || v.Status == status {
			views = append(views, v)
		}
	}
	return views, nil
}

func recordPrefixes(plugins []Resource) []string {
	out := make([]string, 0, len(plugins))
	for _, p := range plugins {
		out = append(out, p.RecordPrefix())
	}
	return out
}

// load reads a registration inside a command's transaction, checks the
// version the command expects, and renders the record before. A node some
// plugin has a record of but that has no registration gets one, stored by
// the command if it changes anything.
func (r *Registry) load(tx *store.Tx, node string, cmd Command, now time.Time) (*nodeState, map[string][]byte, *View, error) {
	st, err := readState(node, tx.Get, r.Resources)
	if err != nil {
		return nil, nil, nil, err
	}
	if st.reg == nil {
		if len(st.records) == 0 {
			return nil, nil, nil, notFound(node)
		}
		st.reg, st.virtual = unregistered(node, now), true
	}
	if err := cmd.CheckVersion("node "+node+" registration", st.reg.Version); err != nil {
		return nil, nil, nil, err
	}
	shared := sharedOf(r.Resources, tx.Get)
	before, err := st.view(r.Resources, shared, r.Policy)
	return st, shared, before, err
}

// change runs a transition on an existing registration as one command:
// decide returns whether it changed anything; the answer is the record
// after.
func (r *Registry) change(ctx context.Context, node string, cmd Command, decide func(st *nodeState, holds bool, status Status) (bool, error)) (Answer[*View], error) {
	now := r.Clock.Now()
	return Run(ctx, r.Store, cmd, r.nodeKeys(node), now, func(tx *store.Tx) (*View, error) {
		st, shared, before, err := r.load(tx, node, cmd, now)
		if err != nil {
			return nil, err
		}
		records := maps.Clone(st.records)
		changed, err := decide(st, st.holds, before.Status)
		if err != nil {
			return nil, err
		}
		if !changed {
			return before, nil
		}
		for _, p := range r.Resources {
			if data, ok := st.records[p.Name()]; ok && !bytes.Equal(data, records[p.Name()]) {
				tx.Put(p.RecordPrefix()+node, data)
			}
		}
		st.reg.touch(now)
		if err := putRegistration(tx, st.reg); err != nil {
			return nil, err
		}
		st.virtual = false
		return st.view(r.Resources, shared, r.Policy)
	})
}

func putRegistration(tx *store.Tx, reg *Registration) error {
	data, err := json.Marshal(reg)
	if err != nil {
		return err
	}
	tx.Put(RegistrationKey(reg.NodeID), data)
	return nil
}

func refuse(node string, status Status, why string) error {
	return types.Errorf(types.FailedPrecondition, "node %s is %s: %s", node, status, why)
}

// Drain stops new work landing on the node; it reaches DRAINED by itself
// once the node holds no usage.
func (r *Registry) Drain(ctx context.Context, node string, cmd Command) (Answer[*View], error) {
	return r.change(ctx, node, cmd, func(st *nodeState, _ bool, status Status) (bool, error) {
		if st.reg.Admission == Retired {
			return false, refuse(node, status, "a retired node cannot be drained")
		}
		if st.reg.Drain {
			return false, nil
		}
		st.reg.Drain = true
		return true, nil
	})
}

// CancelDrain lets the node take new work again.
func (r *Registry) CancelDrain(ctx context.Context, node string, cmd Command) (Answer[*View], error) {
	return r.change(ctx, node, cmd, func(st *nodeState, _ bool, status Status) (bool, error) {
		if st.reg.Admission == Retired {
			return false, refuse(node, status, "a retired node cannot take work again")
		}
		if !st.reg.Drain {
			return false, nil
		}
		st.reg.Drain = false
		return true, nil
	})
}

// Retire ends the node for good, leaving a RETIRED tombstone. Only a
// drained node holding no usage, or an isolated one, may be retired;
// retiring a retired node answers the tombstone.
func (r *Registry) Retire(ctx context.Context, node string, cmd Command) (Answer[*View], error) {
	return r.change(ctx, node, cmd, func(st *nodeState, holds bool, status Status) (bool, error) {
		switch {
		case st.reg.Admission == Retired:
			return false, nil
		case st.reg.Isolated, st.reg.Drain && !holds:
			st.reg.Admission = Retired
			return true, r.retireRecords(node, st)
		case st.reg.Drain:
			return false, refuse(node, status, "it still holds usage; retire it once it is DRAINED, or isolate it")
		default:
			return false, refuse(node, status, "only a drained node with no usage, or an isolated one, can be retired")
		}
	})
}

// Revoke withdraws the node's admission: no placement, heartbeats refused.
func (r *Registry) Revoke(ctx context.Context, node string, cmd Command) (Answer[*View], error) {
	return r.change(ctx, node, cmd, func(st *nodeState, _ bool, status Status) (bool, error) {
		switch st.reg.Admission {
		case Retired:
			return false, refuse(node, status, "a retired node cannot be revoked")
		case Revoked:
			return false, nil
		}
		st.reg.Admission = Revoked
		return true, nil
	})
}

// Admit restores a revoked node's admission.
func (r *Registry) Admit(ctx context.Context, node string, cmd Command) (Answer[*View], error) {
	return r.change(ctx, node, cmd, func(st *nodeState, _ bool, status Status) (bool, error) {
		switch st.reg.Admission {
		case Retired:
			return false, refuse(node, status, "a retired node cannot be admitted again")
		case Admitted:
			return false, nil
		}
		st.reg.Admission = Admitted
		return true, nil
	})
}

// Isolate records that the node's host is gone: refused while its session
// is live; in one transaction every plugin's usage on the node moves into
// the registration's ledger. Isolating an isolated node releases nothing.
func (r *Registry) Isolate(ctx context.Context, node string, cmd Command) (Answer[*IsolateResult], error) {
	now := r.Clock.Now()
	return Run(ctx, r.Store, cmd, r.nodeKeys(node), now, func(tx *store.Tx) (*IsolateResult, error) {
		st, shared, before, err := r.load(tx, node, cmd, now)
		if err != nil {
			return nil, err
		}
		switch {
		case st.reg.Admission == Retired:
			return nil, refuse(node, before.Status, "a retired node cannot be isolated")
		case st.session != nil:
			return nil, refuse(node, before.Status, fmt.Sprintf("its session is live until %s; isolate a node only once its host is gone", st.session.ExpiresAt.UTC().Format(time.RFC3339)))
		case st.reg.Isolated:
			res := &IsolateResult{Node: before}
			for _, p := range r.Resources {
				res.Figures = append(res.Figures, p.IsolationFigures(nil)...)
			}
			return res, nil
		}
		res := &IsolateResult{}
		for _, p := range r.Resources {
			res.Figures = append(res.Figures, p.IsolationFigures(nil)...)
		}
		for _, p := range r.Resources {
			data, ok := st.records[p.Name()]
			if !ok {
				continue
			}
			next, held, err := p.Release(data)
			if err != nil {
				return nil, types.Wrap(types.Internal, err, p.Name()+" record of node "+node)
			}
			if held.IsZero() && bytes.Equal(next, data) {
				continue
			}
			if err := st.reg.Release(p.Name(), held); err != nil {
				return nil, refuse(node, before.Status, err.Error())
			}
			tx.Put(p.RecordPrefix()+node, next)
			res.add(p.IsolationFigures(held))
			if rf, ok := p.(releasedFigures); ok {
				res.add(rf.ReleasedFigures(data, next))
			}
			st.records[p.Name()] = next
		}
		st.reg.Isolated = true
		st.reg.IsolatedIncarnation = st.reg.Incarnation
		st.reg.touch(now)
		if err := putRegistration(tx, st.reg); err != nil {
			return nil, err
		}
		st.virtual = false
		if res.Node, err = st.view(r.Resources, shared, r.Policy); err != nil {
			return nil, err
		}
		return res, nil
	})
}

// Heartbeat refreshes the node's session for ttl and records what was
// measured on its host. A node some plugin records but that never
// registered is registered by its first heartbeat; a name no plugin knows
// is not_found unless register is set. A new boot id starts a new
// incarnation, which clears isolation. Retired and revoked nodes are
// refused.
func (r *Registry) Heartbeat(ctx context.Context, node string, m Measurement, ttl time.Duration, memoryTight int64, register bool, cmd Command) (Answer[*View], error) {
	if _, err := SessionTTL(ttl); err != nil {
		return Answer[*View]{}, err
	}
	now := r.Clock.Now()
	return Run(ctx, r.Store, cmd, r.nodeKeys(node), now, func(tx *store.Tx) (*View, error) {
		st, err := readState(node, tx.Get, r.Resources)
		if err != nil {
			return nil, err
		}
		if st.reg == nil {
			if len(st.records) == 0 && !register {
				return nil, types.Errorf(types.NotFound, "node %s is not registered and no plugin has a record of it: add it to core first, or register it on purpose (heartbeat --register)", node)
			}
			st.reg = NewRegistration(node, now)
		} else if err := cmd.CheckVersion("node "+node+" registration", st.reg.Version); err != nil {
			return nil, err
		}
		reg := st.reg
		switch reg.Admission {
		case Retired:
			return nil, refuse(node, StatusRetired, "a retired node cannot report again; a new host takes a new node name")
		case Revoked:
			return nil, refuse(node, StatusRevoked, "its admission is revoked; admit it first")
		}
		if m.BootID != "" && m.BootID != reg.BootID {
			reg.BootID = m.BootID
			reg.Incarnation++
			reg.Isolated = false
			reg.touch(now)
		}
		reg.SessionEver = true
		seen := now.UTC()
		reg.LastSeen = &seen
		reg.Observation = m.observe(reg.Observation, now, memoryTight)

		session := Session{Since: now.UTC(), ExpiresAt: now.Add(ttl).UTC()}
		if st.session != nil {
			session.Since = st.session.Since
		}
		data, err := json.Marshal(session)
		if err != nil {
			return nil, err
		}
		tx.PutTTL(SessionKey(node), data, ttl)
		st.session = &session
		if err := putRegistration(tx, reg); err != nil {
			return nil, err
		}
		return st.view(r.Resources, sharedOf(r.Resources, tx.Get), r.Policy)
	})
}

// Forget deletes the registration and session of a node no plugin has a
// record of (a name registered by a heartbeat and never added, or left by a
// removed node): a node with a plugin record must be removed through core
// first, and a RETIRED tombstone stays for ever. The answer is the record
// as it was.
func (r *Registry) Forget(ctx context.Context, node string, cmd Command) (Answer[*View], error) {
	now := r.Clock.Now()
	return Run(ctx, r.Store, cmd, r.nodeKeys(node), now, func(tx *store.Tx) (*View, error) {
		st, err := readState(node, tx.Get, r.Resources)
		if err != nil {
			return nil, err
		}
		if st.reg == nil {
			if len(st.records) == 0 {
				return nil, notFound(node)
			}
			st.reg, st.virtual = unregistered(node, now), true
		}
		if err := cmd.CheckVersion("node "+node+" registration", st.reg.Version); err != nil {
			return nil, err
		}
		before, err := st.view(r.Resources, sharedOf(r.Resources, tx.Get), r.Policy)
		if err != nil {
			return nil, err
		}
		if names := types.SortedKeys(st.records); len(names) > 0 {
			holders := "the " + names[0] + " plugin still has a record"
			if len(names) > 1 {
				holders = "the " + strings.Join(names, " and ") + " plugins still have records"
			}
			return nil, refuse(node, before.Status, holders+" of it; remove the node through core first")
		}
		if st.reg.Admission == Retired {
			return nil, refuse(node, before.Status, "a retired node's tombstone stays for ever, so its name never comes back")
		}
		tx.Delete(RegistrationKey(node))
		tx.Delete(SessionKey(node))
		return before, nil
	})
}

// releasedFigures is implemented by a plugin whose records keep use rights
// an isolation releases in place, outside the ledger (storage's pool
// objects): it counts them for the isolate answer.
type releasedFigures interface {
	ReleasedFigures(before, after []byte) []types.Figure
}

// retiring is implemented by a plugin whose records keep something a
// retirement ends in the same transaction (storage's pool declarations).
type retiring interface {
	Retiring(data []byte) ([]byte, error)
}

// retireRecords lets every plugin end what its record of a retiring node
// keeps; change writes the records that changed.
func (r *Registry) retireRecords(node string, st *nodeState) error {
	for _, p := range r.Resources {
		rp, ok := p.(retiring)
		data, has := st.records[p.Name()]
		if !ok || !has {
			continue
		}
		next, err := rp.Retiring(data)
		if err != nil {
			return types.Wrap(types.Internal, err, p.Name()+" record of node "+node)
		}
		st.records[p.Name()] = next
	}
	return nil
}

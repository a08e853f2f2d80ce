// Package pooladmin is the `storage pools …` operator commands' work on the
// store (docs/pools.md): it reads the pool records and the storage node
// records in one consistent read, hands them to the pure decisions of
// storage/pool, and writes pool records back under compares on every
// record the decision read.
package pooladmin

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// Admin runs the pool commands on one store.
type Admin struct {
	Store store.Store
	Clock types.Clock
}

func (a *Admin) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

// state is one consistent read of every pool, every storage node record
// and every registration.
type state struct {
	pools   map[string]*pool.Record
	nodes   map[string]*storage.Node
	entries map[string]*nodes.Entry
	// keys are every key read, for a write that must compare on all of
	// them.
	keys []string
}

var recordPrefix = nodes.RecordPrefix("storage")

// read reads the state in one snapshot.
func (a *Admin) read(ctx context.Context) (*state, error) {
	snap, err := a.Store.Read(ctx, nil, []string{storage.PoolPrefix, recordPrefix, nodes.RegistrationPrefix})
	if err != nil {
		return nil, err
	}
	return decodeState(snap.Get, func(prefix string) []string {
		var out []string
		for _, it := range snap.Under(prefix) {
			out = append(out, it.Key)
		}
		return out
	})
}

// decodeState decodes what get reads under the keys list names.
func decodeState(get func(string) ([]byte, bool), list func(prefix string) []string) (*state, error) {
	st := &state{pools: map[string]*pool.Record{}, nodes: map[string]*storage.Node{}, entries: map[string]*nodes.Entry{}}
	for _, k := range list(storage.PoolPrefix) {
		data, ok := get(k)
		if !ok {
			continue
		}
		rec, err := pool.DecodeRecord(data)
		if err != nil {
			return nil, types.Wrap(types.DataLoss, err, "pool record "+k)
		}
		st.pools[rec.ID] = rec
		st.keys = append(st.keys, k)
	}
	for _, k := range list(recordPrefix) {
		name := strings.TrimPrefix(k, recordPrefix)
		data, ok := get(k)
		if strings.Contains(name, "/") || !ok {
			continue
		}
		n, err := storage.DecodeNode(data)
		if err != nil {
			return nil, types.Wrap(types.DataLoss, err, "storage record of node "+name)
		}
		st.nodes[name] = n
		st.keys = append(st.keys, k)
	}
	for name := range st.nodes {
		e, err := nodes.ReadEntry(name, get)
		if err != nil {
			return nil, err
		}
		st.entries[name] = e
		// The registration and the session are read (ReadEntry), so a
		// transaction over this state names both, present or not.
		st.keys = append(st.keys, nodes.Keys(name)...)
	}
	return st, nil
}

// objects are every node's pool objects.
func (st *state) objects() map[string]pool.Objects {
	out := map[string]pool.Objects{}
	for name, n := range st.nodes {
		if objs := n.Objects(); len(objs) > 0 {
			out[name] = objs
		}
	}
	return out
}

// members are the nodes that declare pool id: not retired, their
// declarations in their capacity.
func (st *state) members(id string) []pool.Member {
	var out []pool.Member
	for _, name := range slices.Sorted(maps.Keys(st.nodes)) {
		e := st.entries[name]
		if e.Retired() {
			continue
		}
		if _, ok := st.nodes[name].Capacity.Pools[id]; ok {
			out = append(out, pool.Member{Node: name, Isolated: e.Isolated()})
		}
	}
	return out
}

// view is pool rec as printed, with its attachments.
func (st *state) view(rec *pool.Record) pool.View {
	var atts []pool.Attachment
	for _, m := range st.members(rec.ID) {
		n := st.nodes[m.Node]
		var check *pool.PathCheck
		if e := st.entries[m.Node]; e.Reg != nil && e.Reg.Observation != nil {
			if c, ok := e.Reg.Observation.Pools[rec.ID]; ok {
				check = &pool.PathCheck{Available: c.Available, Reason: c.Reason}
			}
		}
		if att, ok := pool.AttachmentOf(m.Node, rec, n.Declarations(), check, n.Objects()); ok {
			atts = append(atts, att)
		}
	}
	return pool.NewView(rec, atts)
}

// List is `storage pools list`.
type List struct {
	Pools []pool.View `json:"pools"`
}

// List answers every pool, by id.
func (a *Admin) List(ctx context.Context) (List, error) {
	st, err := a.read(ctx)
	if err != nil {
		return List{}, err
	}
	out := List{Pools: []pool.View{}}
	for _, id := range slices.Sorted(maps.Keys(st.pools)) {
		out.Pools = append(out.Pools, st.view(st.pools[id]))
	}
	return out, nil
}

// Get answers one pool; not_found when it was never declared.
func (a *Admin) Get(ctx context.Context, id string) (pool.View, error) {
	if err := pool.ValidID(id); err != nil {
		return pool.View{}, err
	}
	st, err := a.read(ctx)
	if err != nil {
		return pool.View{}, err
	}
	rec, ok := st.pools[id]
	if !ok {
		return pool.View{}, notFound(id)
	}
	return st.view(rec), nil
}

func notFound(id string) error {
	return types.Errorf(types.NotFound, "pool %s was never declared (a node declares it with \"pools\": [\"%s:/mount/path\"])", id, id)
}

// SetCapacity replaces a pool's capacity under cmd's version guard
// (mandatory).
func (a *Admin) SetCapacity(ctx context.Context, id string, size int64, cmd nodes.Command) (nodes.Answer[pool.View], error) {
	if err := pool.ValidID(id); err != nil {
		return nodes.Answer[pool.View]{}, err
	}
	if cmd.IfVersion == nil {
		return nodes.Answer[pool.View]{}, types.Invalid("pool %s: --if-version is mandatory for set-capacity (read the version with `storage pools get %s`)", id, id)
	}
	st, err := a.read(ctx)
	if err != nil {
		return nodes.Answer[pool.View]{}, err
	}
	return nodes.Run(ctx, a.Store, cmd, []string{storage.PoolKey(id)}, a.now(), func(tx *store.Tx) (pool.View, error) {
		rec, err := getRecord(tx, id)
		if err != nil {
			return pool.View{}, err
		}
		next, err := pool.SetCapacity(rec, size, cmd.IfVersion)
		if err != nil {
			return pool.View{}, err
		}
		if err := putRecord(tx, next); err != nil {
			return pool.View{}, err
		}
		return st.view(next), nil
	})
}

// getRecord reads pool id's record in a transaction.
func getRecord(tx *store.Tx, id string) (*pool.Record, error) {
	data, ok := tx.Get(storage.PoolKey(id))
	if !ok {
		return nil, notFound(id)
	}
	rec, err := pool.DecodeRecord(data)
	if err != nil {
		return nil, types.Wrap(types.DataLoss, err, "pool record "+id)
	}
	return rec, nil
}

// putRecord writes rec.
func putRecord(tx *store.Tx, rec *pool.Record) error {
	data, err := rec.Encode()
	if err != nil {
		return types.Wrap(types.Internal, err, "pool "+rec.ID)
	}
	tx.Put(storage.PoolKey(rec.ID), data)
	return nil
}

// Lost is `storage pools declare-lost`'s answer.
type Lost struct {
	Pool pool.View `json:"pool"`
	pool.LostCounts
}

// DeclareLost declares a pool lost: every member isolated (or none), under
// compares on every node record and registration read.
func (a *Admin) DeclareLost(ctx context.Context, id string, cmd nodes.Command) (nodes.Answer[Lost], error) {
	if err := pool.ValidID(id); err != nil {
		return nodes.Answer[Lost]{}, err
	}
	for {
		st, err := a.read(ctx)
		if err != nil {
			return nodes.Answer[Lost]{}, err
		}
		keys := dedupe(append([]string{storage.PoolKey(id)}, st.keys...))
		answer, err := a.declareLost(ctx, id, cmd, keys)
		if !errors.Is(err, errUnreadHolder) {
			return answer, err
		}
	}
}

// declareLost is one transaction of DeclareLost over keys.
func (a *Admin) declareLost(ctx context.Context, id string, cmd nodes.Command, keys []string) (nodes.Answer[Lost], error) {
	return nodes.Run(ctx, a.Store, cmd, keys, a.now(), func(tx *store.Tx) (Lost, error) {
		st, err := decodeState(tx.Get, func(prefix string) []string { return under(keys, prefix) })
		if err != nil {
			return Lost{}, err
		}
		rec, err := getRecord(tx, id)
		if err != nil {
			return Lost{}, err
		}
		// A member added since the state was read (a new record
		// declaring the pool) is read again, not passed over.
		if err := a.checkHolders(ctx, id, keys, true); err != nil {
			return Lost{}, err
		}
		if err := cmd.CheckVersion("pool "+id, rec.Version); err != nil {
			return Lost{}, err
		}
		next, counts, err := pool.DeclareLost(rec, st.members(id), st.objects(), a.now())
		if err != nil {
			return Lost{}, err
		}
		if err := putRecord(tx, next); err != nil {
			return Lost{}, err
		}
		return Lost{Pool: st.view(next), LostCounts: counts}, nil
	})
}

// Objects is `storage pools objects`'s answer.
type Objects struct {
	Objects []pool.ObjectView `json:"objects"`
}

// Objects lists a pool's objects, narrowed to a node when node is not "".
func (a *Admin) Objects(ctx context.Context, id, node string) (Objects, error) {
	if err := pool.ValidID(id); err != nil {
		return Objects{}, err
	}
	st, err := a.read(ctx)
	if err != nil {
		return Objects{}, err
	}
	if _, ok := st.pools[id]; !ok {
		return Objects{}, notFound(id)
	}
	return Objects{Objects: pool.ListObjects(id, node, st.objects(), st.pools)}, nil
}

// Object answers one object; not_found when no node record keeps it.
func (a *Admin) Object(ctx context.Context, id string) (pool.ObjectView, error) {
	if err := pool.ValidObjectID(id); err != nil {
		return pool.ObjectView{}, err
	}
	st, err := a.read(ctx)
	if err != nil {
		return pool.ObjectView{}, err
	}
	for _, o := range pool.ListObjects("", "", st.objects(), st.pools) {
		if o.ID == id {
			return o, nil
		}
	}
	return pool.ObjectView{}, types.Errorf(types.NotFound, "no node record keeps pool object %s", id)
}

// Check is `storage pools check`'s answer.
type Check struct {
	Pools   []pool.Drift `json:"pools"`
	Drifted bool         `json:"drifted"`
}

// Check recomputes every pool's counters from one read.
func (a *Admin) Check(ctx context.Context) (Check, error) {
	st, err := a.read(ctx)
	if err != nil {
		return Check{}, err
	}
	out := Check{Pools: pool.Check(st.pools, st.objects())}
	if out.Pools == nil {
		out.Pools = []pool.Drift{}
	}
	for _, d := range out.Pools {
		out.Drifted = out.Drifted || d.Drifted()
	}
	return out, nil
}

// Repair writes a pool's recomputed counters, under compares that no node
// record changed since the read they were recomputed from.
func (a *Admin) Repair(ctx context.Context, id string, cmd nodes.Command) (nodes.Answer[pool.Drift], error) {
	if err := pool.ValidID(id); err != nil {
		return nodes.Answer[pool.Drift]{}, err
	}
	for {
		st, err := a.read(ctx)
		if err != nil {
			return nodes.Answer[pool.Drift]{}, err
		}
		keys := dedupe(append([]string{storage.PoolKey(id)}, st.keys...))
		answer, err := a.repair(ctx, id, cmd, keys)
		if !errors.Is(err, errUnreadHolder) {
			return answer, err
		}
	}
}

// errUnreadHolder ends a pool command's transaction that found, after its
// read, a node record keeping objects of the pool (or declaring it) that
// the transaction does not read (created since the state was read): the
// command reads again.
var errUnreadHolder = errors.New("a node record of the pool was not read by the command")

// repair is one transaction of Repair over keys.
func (a *Admin) repair(ctx context.Context, id string, cmd nodes.Command, keys []string) (nodes.Answer[pool.Drift], error) {
	return nodes.Run(ctx, a.Store, cmd, keys, a.now(), func(tx *store.Tx) (pool.Drift, error) {
		st, err := decodeState(tx.Get, func(prefix string) []string { return under(keys, prefix) })
		if err != nil {
			return pool.Drift{}, err
		}
		rec, err := getRecord(tx, id)
		if err != nil {
			return pool.Drift{}, err
		}
		// The compares cover the records read; a record created since
		// with objects in the pool moved the pool's counters (every
		// write of an object does), so its compare fails once the record
		// exists. One created before this attempt's read is found here.
		if err := a.checkHolders(ctx, id, keys, false); err != nil {
			return pool.Drift{}, err
		}
		for _, d := range pool.Check(map[string]*pool.Record{id: rec}, st.objects()) {
			if d.Pool != id {
				continue
			}
			if d.Drifted() {
				if err := putRecord(tx, pool.Repair(rec, d)); err != nil {
					return pool.Drift{}, err
				}
			}
			return d, nil
		}
		return pool.Drift{Pool: id}, nil
	})
}

// checkHolders scans the storage node records now, after the transaction's
// read, for one keys do not name that keeps an object living in or moving
// to pool id, or declares it when declares is set (or that cannot be
// decoded): errUnreadHolder.
func (a *Admin) checkHolders(ctx context.Context, id string, keys []string, declares bool) error {
	snap, err := a.Store.Read(ctx, nil, []string{recordPrefix})
	if err != nil {
		return err
	}
	named := map[string]bool{}
	for _, k := range keys {
		named[k] = true
	}
	for _, it := range snap.Under(recordPrefix) {
		if named[it.Key] || strings.Contains(strings.TrimPrefix(it.Key, recordPrefix), "/") {
			continue
		}
		n, err := storage.DecodeNode(it.Value)
		if err != nil {
			return errUnreadHolder
		}
		if _, ok := n.Capacity.Pools[id]; ok && declares {
			return errUnreadHolder
		}
		for _, obj := range n.Objects() {
			if obj.Pool == id || obj.MovingTo == id {
				return errUnreadHolder
			}
		}
	}
	return nil
}

// under are the keys of list below prefix, in order.
func under(list []string, prefix string) []string {
	var out []string
	for _, k := range list {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return dedupe(out)
}

func dedupe(keys []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

package storage

import (
	"crypto/rand"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/types"
)

// Pool volumes in workloads: bindings, calculate-deploy's plans, and the
// authoritative admission of set-node-resource-usage (docs/pools.md).

// splitPoolBindings takes the pool bindings out of a list of volume
// bindings: they are never placed on a local device.
func splitPoolBindings(list []string, signed bool) ([]*pool.Binding, []string, error) {
	var pools []*pool.Binding
	var rest []string
	for _, s := range list {
		src, _, _ := strings.Cut(s, ":")
		if !pool.IsPoolSource(src) {
			rest = append(rest, s)
			continue
		}
		b, err := pool.ParseBinding(s, signed)
		if err != nil {
			return nil, nil, err
		}
		pools = append(pools, b)
	}
	return pools, rest, nil
}

// pairPools reconciles the pool bindings of the request and limit lists:
// an object reserves what the request asks, so a limit names the same
// bindings (source and destination) in the same order.
func pairPools(req, lim []*pool.Binding, hasReq, hasLim bool) ([]*pool.Binding, error) {
	switch {
	case !hasReq:
		return lim, nil
	case !hasLim:
		return req, nil
	}
	if len(req) != len(lim) {
		return nil, errInvalid("volumes-request has %d pool volumes, volumes %d: a pool volume reserves its request, name it in both or in one", len(req), len(lim))
	}
	for i := range req {
		if req[i].SourceString() != lim[i].SourceString() || req[i].Destination != lim[i].Destination {
			return nil, errInvalid("pool volume %d: request %s and limit %s differ", i+1, req[i], lim[i])
		}
	}
	return req, nil
}

// oneAttachPerObject refuses a workload that names one existing object in
// two pool bindings: an object is one volume, mounted once, and its bytes
// are reserved once.
func oneAttachPerObject(bindings []*pool.Binding) error {
	first := map[string]*pool.Binding{}
	for _, b := range bindings {
		if b.Object == "" {
			continue
		}
		if prev, ok := first[b.Object]; ok {
			return errInvalid("pool object %s is attached twice, at %s and %s: a workload attaches an object once", b.Object, prev.Destination, b.Destination)
		}
		first[b.Object] = b
	}
	return nil
}

// PlacementReads are the records calculate-deploy reads besides the node's:
// every pool record, and every storage node record when a binding attaches
// an existing object (to find it).
func (Rules) PlacementReads(w *WorkloadRequest) (keys, prefixes []string) {
	if len(w.Pools) == 0 {
		return nil, nil
	}
	prefixes = []string{PoolPrefix}
	for _, b := range w.Pools {
		if b.Object != "" {
			return nil, append(prefixes, nodes.RecordPrefix("storage"))
		}
	}
	return nil, prefixes
}

// poolRecords decodes the pool records a placement read.
func poolRecords(shared map[string][]byte) (map[string]*pool.Record, error) {
	out := map[string]*pool.Record{}
	for k, v := range shared {
		id, ok := strings.CutPrefix(k, PoolPrefix)
		if !ok {
			continue
		}
		rec, err := pool.DecodeRecord(v)
		if err != nil {
			return nil, types.Wrap(types.DataLoss, err, "pool record "+id)
		}
		out[id] = rec
	}
	return out, nil
}

// reach is the node's attachments: declared pools, available unless lost
// or the last heartbeat found the path failing (checks).
func (n *Node) reach(pools map[string]*pool.Record, checks map[string]nodes.PoolCheck) map[string]bool {
	out := map[string]bool{}
	for id := range n.Capacity.Pools {
		rec := pools[id]
		c, checked := checks[id]
		out[id] = (rec == nil || !rec.Lost()) && (!checked || c.Available)
	}
	return out
}

// unavailable is the refusal of pool id through this node's unavailable
// attachment, saying why: the pool's loss, or what the node's last
// heartbeat found at its path.
func unavailable(id string, rec *pool.Record, checks map[string]nodes.PoolCheck) error {
	if rec != nil && rec.Lost() {
		return types.Errorf(types.FailedPrecondition, "this node's attachment to pool %s is unavailable: pool %s was declared lost at %s", id, id, rec.LostAt.UTC().Format(time.RFC3339))
	}
	return types.Errorf(types.FailedPrecondition, "this node's attachment to pool %s is unavailable: its last heartbeat found %s", id, checks[id].Reason)
}

// pathChecks are the pool path checks of the registration among what was
// read (nil when the node never heartbeat).
func pathChecks(node string, get func(string) ([]byte, bool)) map[string]nodes.PoolCheck {
	e, err := nodes.ReadEntry(node, get)
	if err != nil || e.Reg == nil || e.Reg.Observation == nil {
		return nil
	}
	return e.Reg.Observation.Pools
}

// sharedChecks finds the node's path checks among a placement's reads.
func sharedChecks(shared map[string][]byte) map[string]nodes.PoolCheck {
	for k := range shared {
		if name, ok := strings.CutPrefix(k, nodes.RegistrationPrefix); ok {
			return pathChecks(name, func(key string) ([]byte, bool) { v, ok := shared[key]; return v, ok })
		}
	}
	return nil
}

// poolOf resolves the pool of a binding on this node.
func (n *Node) poolOf(b *pool.Binding) (string, error) {
	id := b.Pool
	if id == "" {
		if id = n.Declarations().Default(); id == "" {
			return "", errInvalid("pool volume %s names no pool and this node has no default pool", b)
		}
	}
	if _, ok := n.Capacity.Pools[id]; !ok {
		return "", types.Errorf(types.FailedPrecondition, "this node does not declare pool %s", id)
	}
	return id, nil
}

// deployPools plans the pool volumes of count workloads: new objects are
// checked against their pools' free space (count × bytes) and given fresh
// ids; an attach (count 1) takes the object's size. It fills each
// workload's pool plans and returns each workload's engine volumes.
func (n *Node) deployPools(w *WorkloadRequest, count int, shared map[string][]byte, wls []*Workload) ([][]string, error) {
	out := make([][]string, len(wls))
	if len(w.Pools) == 0 {
		return out, nil
	}
	pools, err := poolRecords(shared)
	if err != nil {
		return nil, err
	}
	checks := sharedChecks(shared)
	reach := n.reach(pools, checks)
	ids := make([]string, len(w.Pools))
	perWorkload := map[string]int64{}
	attached := map[int]pool.Object{}
	holders := map[int]string{}
	for i, b := range w.Pools {
		id, err := n.poolOf(b)
		if err != nil {
			return nil, err
		}
		ids[i] = id
		if b.Object == "" {
			perWorkload[id] += b.Size
			continue
		}
		if count != 1 {
			return nil, errInvalid("pool volume %s attaches an existing object: deploy_count must be 1, not %d", b, count)
		}
		holder, obj, ok := findObject(shared, b.Object)
		if !ok {
			return nil, types.Errorf(types.NotFound, "pool object %s does not exist", b.Object)
		}
		if obj.Pool != id {
			return nil, errInvalid("pool object %s lives in pool %s, not %s", b.Object, obj.Pool, id)
		}
		if err := pool.CheckAttach(b.Object, obj, holder, false, reach, pools[obj.Pool]); err != nil {
			return nil, err
		}
		attached[i], holders[i] = obj, holder
	}
	for _, id := range slices.Sorted(maps.Keys(perWorkload)) {
		rec := pools[id]
		if rec == nil {
			return nil, types.Errorf(types.FailedPrecondition, "pool %s has no record", id)
		}
		if !reach[id] {
			return nil, unavailable(id, rec, checks)
		}
		if err := pool.RoomFor(rec, count, perWorkload[id]); err != nil {
			return nil, err
		}
	}
	for k, wl := range wls {
		wl.PoolPlanRequest, wl.PoolPlanLimit = pool.Plans{}, pool.Plans{}
		for i, b := range w.Pools {
			object, bytes := b.Object, b.Size
			if obj, ok := attached[i]; ok {
				bytes = obj.Bytes
			} else if object, err = pool.MintObjectID(rand.Reader); err != nil {
				return nil, types.Wrap(types.Internal, err, "pool volume")
			}
			plan := pool.Plan{Pool: ids[i], Object: object, Bytes: bytes, From: holders[i]}
			wl.PoolPlanRequest[b.String()] = plan
			wl.PoolPlanLimit[b.String()] = plan
			out[k] = append(out[k], b.EngineForm(n.Capacity.Pools[ids[i]].Path, object, bytes))
		}
	}
	return out, nil
}

// findObject looks for a pool object in the storage node records read.
func findObject(shared map[string][]byte, id string) (string, pool.Object, bool) {
	prefix := nodes.RecordPrefix("storage")
	for _, k := range slices.Sorted(maps.Keys(shared)) {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok || strings.Contains(name, "/") {
			continue
		}
		n, err := DecodeNode(shared[k])
		if err != nil {
			continue
		}
		if obj, ok := n.Usage.PoolObjects[id]; ok {
			return name, obj, true
		}
	}
	return "", pool.Object{}, false
}

// poolChange is the pool part of a usage write, computed with the rest of
// the usage and admitted in the node's transaction (Link), where the pool
// records are read.
type poolChange struct {
	change pool.Change
	// attaching are the objects the write attaches, with the node each is
	// taken from (its record is read and written too).
	attaching map[string]string
	restore   bool
}

// poolChangeOf builds the pool part of a usage write from its stored-form
// objects (a snapshot or a resource) or the workloads' plans.
func poolChangeOf(objs pool.Objects, workloads []*Workload, delta, incr bool) (*poolChange, error) {
	pc := &poolChange{change: pool.Change{Mode: pool.Absolute, Objects: map[string]pool.Amount{}, Unheld: map[string]bool{}}, attaching: map[string]string{}, restore: !delta}
	if delta {
		pc.change.Mode = pool.Decr
		if incr {
			pc.change.Mode = pool.Incr
		}
	}
	for id, obj := range objs {
		pc.change.Objects[id] = pool.Amount{Pool: obj.Pool, Bytes: obj.Bytes}
		if !delta && !obj.Held {
			pc.change.Unheld[id] = true
		}
	}
	var plans []pool.Plans
	for _, w := range workloads {
		plans = append(plans, w.PoolPlanRequest)
		for key, p := range w.PoolPlanRequest {
			if delta && incr && attaches(key, p) {
				pc.attaching[p.Object] = p.From
			}
		}
	}
	if len(plans) > 0 {
		sum, err := pool.SumPlans(plans...)
		if err != nil {
			return nil, err
		}
		maps.Copy(pc.change.Objects, sum)
		for id := range pc.attaching {
			// An attach takes the object as it is: its size is the object's.
			a := pc.change.Objects[id]
			a.Bytes = 0
			pc.change.Objects[id] = a
		}
	}
	return pc, nil
}

// attaches reports whether a pool plan attaches an existing object: a
// binding naming the object, planned by calculate-deploy with the node it
// takes the object from. The same binding in a realloc's delta carries no
// node: it resizes the object the workload already holds by its signed
// bytes.
func attaches(key string, p pool.Plan) bool {
	if p.From == "" {
		return false
	}
	b, err := pool.ParseBinding(key, true)
	return err == nil && b.Object != ""
}

// sources are the other nodes whose records the write reads and may
// write: those its attaches take objects from, and those a restore gives
// attached objects back to (pool.Donors).
func (pc *poolChange) sources(before *Node) []string {
	set := map[string]bool{}
	for _, from := range pc.attaching {
		set[from] = true
	}
	if pc.restore {
		for _, d := range pool.Donors(before.Usage.PoolObjects, pc.change) {
			set[d] = true
		}
	}
	delete(set, "")
	return slices.Sorted(maps.Keys(set))
}

// linkedPoolKeys are the keys the admission of a usage write reads: the
// records of every pool it touches (every pool an object of the record
// before or after lives in or moves to, every pool the change names) and of
// the nodes it attaches from. A record written verbatim (a fix,
// set-node-resource-info) names its pools only in after.
func linkedPoolKeys(before, after *Node) []string {
	pools := map[string]bool{}
	for _, objs := range []pool.Objects{before.Usage.PoolObjects, after.Usage.PoolObjects} {
		for _, obj := range objs {
			pools[obj.Pool] = true
			if obj.MovingTo != "" {
				pools[obj.MovingTo] = true
			}
		}
	}
	var keys []string
	if pc := after.pending; pc != nil {
		for _, a := range pc.change.Objects {
			pools[a.Pool] = true
		}
		for _, from := range pc.sources(before) {
			keys = append(keys, nodes.RecordPrefix("storage")+from)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(pools)) {
		keys = append(keys, PoolKey(id))
	}
	return keys
}

// admitPools runs the admission of a usage write (pool.Admit) on the pool
// records and holder records the transaction read: it returns the node's
// record with its objects after, and the pool and holder records to write.
func admitPools(l engine.Link, before, after *Node, holders map[string]*Node) (*Node, map[string][]byte, error) {
	pc := after.pending
	if pc == nil {
		if maps.EqualFunc(before.Usage.PoolObjects, after.Usage.PoolObjects, func(a, b pool.Object) bool { return a == b }) {
			return after, nil, nil
		}
		// A record written verbatim (set-node-resource-info, a fix): its
		// objects are a restore whose counters move by the derived delta.
		pc = &poolChange{change: pool.Change{Mode: pool.Absolute, Objects: map[string]pool.Amount{}, Unheld: map[string]bool{}}, restore: true}
		for id, obj := range after.Usage.PoolObjects {
			pc.change.Objects[id] = pool.Amount{Pool: obj.Pool, Bytes: obj.Bytes}
			if !obj.Held {
				pc.change.Unheld[id] = true
			}
		}
	}
	pools := map[string]*pool.Record{}
	for _, k := range linkedPoolKeys(before, after) {
		id, ok := strings.CutPrefix(k, PoolPrefix)
		if !ok {
			continue
		}
		if data, ok := l.Get(k); ok {
			rec, err := pool.DecodeRecord(data)
			if err != nil {
				return nil, nil, types.Wrap(types.DataLoss, err, "pool record "+id)
			}
			pools[id] = rec
		}
	}
	others := map[string]pool.Objects{}
	for name, h := range holders {
		others[name] = h.Usage.PoolObjects
	}
	w := pool.Write{
		Node: l.Node, Isolated: l.Isolated, Reach: after.reach(pools, pathChecks(l.Node, l.Get)), Before: before.Usage.PoolObjects,
		Change: pc.change, Attaching: slices.Sorted(maps.Keys(pc.attaching)), From: pc.attaching, Others: others, Pools: pools, Restore: pc.restore,
	}
	if w.Before == nil {
		w.Before = pool.Objects{}
	}
	out, err := pool.Admit(w)
	if err != nil {
		return nil, nil, err
	}
	next := after.Clone()
	next.pending = nil
	next.Usage.PoolObjects = out.After
	if len(next.Usage.PoolObjects) == 0 {
		next.Usage.PoolObjects = nil
	}
	puts := map[string][]byte{}
	for id, rec := range out.Pools {
		data, err := rec.Encode()
		if err != nil {
			return nil, nil, types.Wrap(types.Internal, err, "pool "+id)
		}
		puts[PoolKey(id)] = data
	}
	for name, objs := range out.Others {
		h := holders[name].Clone()
		h.Usage.PoolObjects = objs
		if len(objs) == 0 {
			h.Usage.PoolObjects = nil
		}
		data, err := Rules{}.Encode(h)
		if err != nil {
			return nil, nil, err
		}
		puts[nodes.RecordPrefix("storage")+name] = data
	}
	return next, puts, nil
}

// poolChange is the pool part of a usage write, from the same source the
// rest of the change came from: the objects of a stored-form resource (a
// rollback snapshot), or the workloads' pool plans. A request-form change
// says nothing of pools. A delta without objects changes none.
func (c *UsageChange) poolChange() (*poolChange, error) {
	var objs pool.Objects
	switch c.form {
	case types.RequestForm:
		return nil, nil
	case types.StoredForm:
		objs = c.change.PoolObjects
	}
	pc, err := poolChangeOf(objs, c.workloads, c.delta, c.incr)
	if err != nil {
		return nil, err
	}
	if c.delta && len(pc.change.Objects) == 0 {
		return nil, nil
	}
	return pc, nil
}

// unreachable is what a node draws on when a pool binding cannot go there
// (no default pool, a pool it does not declare, an attachment its last
// heartbeat found failing): it has no slot.
const unreachable = ""

// Draws are the pools a workload of w takes new objects from on this node.
// A pool whose path the node's last heartbeat found failing is
// unreachable: calculate-deploy and the usage write would refuse it, so the
// capacity query deals its slots to the other nodes.
func (Rules) Draws(n *Node, w *WorkloadRequest, reg *nodes.Entry) []string {
	var checks map[string]nodes.PoolCheck
	if reg != nil && reg.Reg != nil && reg.Reg.Observation != nil {
		checks = reg.Reg.Observation.Pools
	}
	var out []string
	attachHere := true
	for _, b := range w.Pools {
		id, err := n.poolOf(b)
		c, checked := checks[id]
		reached := err == nil && (!checked || c.Available)
		if b.Object != "" {
			// An attach takes no slot of its pool, but only a node that
			// reaches the pool can take the object (CheckAttach).
			attachHere = attachHere && reached
			continue
		}
		if !reached {
			id = unreachable
		}
		out = append(out, id)
	}
	if !attachHere {
		// After the new objects' draws, so that their order is kept.
		out = append(out, unreachable)
	}
	return out
}

// Apportion deals each pool's slots (floor(free / bytes asked in it per
// workload)) round-robin among the candidate nodes, after each node's own
// limit: core sums the capacities, so Σ over nodes never exceeds what a
// pool holds. A request that attaches an existing object fits at most
// once.
func (Rules) Apportion(w *WorkloadRequest, names []string, draws [][]string, limits []int, env types.Env) []int {
	out := slices.Clone(limits)
	if len(w.Pools) == 0 {
		return out
	}
	attach := false
	for _, b := range w.Pools {
		attach = attach || b.Object != ""
	}
	pools, err := poolRecords(env.Shared)
	if err != nil {
		return make([]int, len(limits))
	}
	for _, b := range w.Pools {
		if rec := pools[b.Pool]; b.Object != "" && (rec == nil || rec.Lost()) {
			// The object is LOST (or its pool unknown): no node attaches it.
			return make([]int, len(limits))
		}
	}
	perWorkload := map[string]int64{}
	cands := make([]pool.Candidate, 0, len(names))
	for i, name := range names {
		limit := limits[i]
		if attach {
			limit = min(limit, 1)
		}
		mine := map[string]int64{}
		for j, id := range draws[i] {
			if j < len(w.Pools) {
				mine[id] += newObjectSize(w, j)
			}
		}
		for id, b := range mine {
			perWorkload[id] = max(perWorkload[id], b)
		}
		cands = append(cands, pool.Candidate{Node: name, Limit: limit, Pools: draws[i]})
	}
	slots := map[string]int{}
	for id, b := range perWorkload {
		if id != unreachable {
			slots[id] = pool.Slots(pools[id], true, b)
		}
	}
	got := pool.Apportion(cands, slots)
	for i, name := range names {
		out[i] = got[name]
	}
	return out
}

// newObjectSize is the size of the j-th new-object binding of w.
func newObjectSize(w *WorkloadRequest, j int) int64 {
	k := 0
	for _, b := range w.Pools {
		if b.Object != "" {
			continue
		}
		if k == j {
			return b.Size
		}
		k++
	}
	return 0
}

// ReallocReads are the records calculate-realloc reads besides the node's:
// every pool record (a pool volume's growth is admitted against it).
func (Rules) ReallocReads() (keys, prefixes []string) { return nil, []string{PoolPrefix} }

// reallocPools resizes a workload's pool volumes by the request's deltas,
// matched by destination: the growths (and new volumes) in one pool are
// admitted together against its room (and again at the usage write), a
// shrink always passes, the object id is kept; a
// volume shrunk to nothing goes, and a new one is a new object. It fills
// the new workload's pool plans and the delta's signed ones, and answers
// the engine volumes and whether a pool volume came or went.
func (n *Node) reallocPools(old *Workload, req *WorkloadRequest, shared map[string][]byte, wl, delta *Workload) ([]string, bool, bool, error) {
	wl.PoolPlanRequest, wl.PoolPlanLimit = pool.Plans{}, pool.Plans{}
	delta.PoolPlanRequest, delta.PoolPlanLimit = pool.Plans{}, pool.Plans{}
	if len(old.PoolPlanRequest) == 0 && len(req.Pools) == 0 {
		return nil, false, false, nil
	}
	pools, err := poolRecords(shared)
	if err != nil {
		return nil, false, false, err
	}
	type entry struct {
		binding *pool.Binding
		plan    pool.Plan
	}
	var cur []entry
	grows, changed := false, false
	for _, key := range slices.Sorted(maps.Keys(old.PoolPlanRequest)) {
		b, err := pool.ParseBinding(key, true)
		if err != nil {
			return nil, false, false, err
		}
		plan := n.livesIn(old.PoolPlanRequest[key])
		// A move changed the object's pool, and so its source on the
		// engine: the workload must be given its new path.
		changed = changed || plan.Pool != old.PoolPlanRequest[key].Pool
		cur = append(cur, entry{b, plan})
	}
	// growth sums the bytes each pool is asked for, checked against its
	// room once every binding is read (as the usage write will).
	growth := map[string]int64{}
	for _, d := range req.Pools {
		i := slices.IndexFunc(cur, func(e entry) bool {
			return e.binding.Destination == d.Destination && (d.Pool == "" || d.Pool == e.plan.Pool || d.Pool == e.binding.Pool)
		})
		if i < 0 {
			if d.Size <= 0 || d.Object != "" {
				return nil, false, false, errInvalid("pool volume %s: the workload has no pool volume at %s to resize", d, d.Destination)
			}
			id, err := n.poolOf(d)
			if err != nil {
				return nil, false, false, err
			}
			if pools[id] == nil {
				return nil, false, false, types.Errorf(types.FailedPrecondition, "pool %s has no record", id)
			}
			growth[id] += d.Size
			object, err := pool.MintObjectID(rand.Reader)
			if err != nil {
				return nil, false, false, types.Wrap(types.Internal, err, "pool volume")
			}
			nb := *d
			cur = append(cur, entry{&nb, pool.Plan{Pool: id, Object: object, Bytes: d.Size}})
			delta.PoolPlanRequest[nb.String()] = pool.Plan{Pool: id, Object: object, Bytes: d.Size}
			grows, changed = true, true
			continue
		}
		e := cur[i]
		if d.Size == 0 {
			continue
		}
		if obj, ok := n.Usage.PoolObjects[e.plan.Object]; ok && obj.MovingTo != "" {
			return nil, false, false, types.Errorf(types.Unavailable, "object %s is moving to pool %s (command %s); resize it once the move settles", e.plan.Object, obj.MovingTo, obj.MoveCommandID)
		}
		if d.Size > 0 {
			rec := pools[e.plan.Pool]
			if rec == nil {
				return nil, false, false, types.Errorf(types.FailedPrecondition, "pool %s has no record", e.plan.Pool)
			}
			if rec.Lost() {
				return nil, false, false, types.Errorf(types.FailedPrecondition, "object %s is LOST: pool %s was declared lost", e.plan.Object, e.plan.Pool)
			}
			growth[e.plan.Pool] += d.Size
			grows = true
		}
		size := max(e.plan.Bytes+d.Size, 0)
		step := size - e.plan.Bytes
		nb := *e.binding
		if nb.Object == "" {
			nb.Size = size
		}
		delta.PoolPlanRequest[nb.String()] = pool.Plan{Pool: e.plan.Pool, Object: e.plan.Object, Bytes: step}
		if size == 0 {
			cur = slices.Delete(cur, i, i+1)
			changed = true
			continue
		}
		cur[i] = entry{&nb, pool.Plan{Pool: e.plan.Pool, Object: e.plan.Object, Bytes: size}}
	}
	for _, id := range slices.Sorted(maps.Keys(growth)) {
		if err := pool.Room(pools[id], growth[id]); err != nil {
			return nil, false, false, err
		}
	}
	var volumes []string
	for _, e := range cur {
		wl.PoolPlanRequest[e.binding.String()] = e.plan
		wl.PoolPlanLimit[e.binding.String()] = e.plan
		path := ""
		if d, ok := n.Capacity.Pools[e.plan.Pool]; ok {
			path = d.Path
		}
		volumes = append(volumes, e.binding.EngineForm(path, e.plan.Object, e.plan.Bytes))
	}
	delta.PoolPlanLimit = maps.Clone(delta.PoolPlanRequest)
	return volumes, grows, changed, nil
}

// livesIn is a workload's pool plan with the pool its object lives in now:
// the node's record says (a `pools move` changes it there, not in the
// workload's plan); an object the record lacks keeps the plan's.
func (n *Node) livesIn(p pool.Plan) pool.Plan {
	if obj, ok := n.Usage.PoolObjects[p.Object]; ok {
		p.Pool = obj.Pool
	}
	return p
}

// recomputeObjects derives the node's pool objects from its workloads'
// plans and lists every disagreement with the record: an object the
// workloads do not hold (an orphan of a half-failed deploy), one they hold
// that the record lacks, one with other bytes. An object the record has
// lives in the record's pool (a move changes it there, not in the plans).
// An object the record keeps
// unheld (released by an isolation) is not the workloads' to claim: it is
// no diff while they still list it, nor when they no longer do.
func (n *Node) recomputeObjects(list []*Workload) (pool.Objects, []string, error) {
	var plans []pool.Plans
	for _, w := range list {
		plans = append(plans, w.PoolPlanRequest)
	}
	sum, err := pool.SumPlans(plans...)
	if err != nil {
		return nil, nil, err
	}
	have := n.Usage.PoolObjects
	out := pool.Objects{}
	var diffs []string
	for _, id := range slices.Sorted(maps.Keys(sum)) {
		a := sum[id]
		obj, ok := have[id]
		switch {
		case !ok:
			diffs = append(diffs, "pool object "+id+" in pool "+a.Pool+": workloads hold "+itoa(a.Bytes)+" bytes, the node's record has no such object")
			out[id] = pool.Object{Pool: a.Pool, Bytes: a.Bytes, Held: true}
		case !obj.Held:
			out[id] = obj
		case obj.Bytes != a.Bytes:
			// The record knows the object's pool (a move changes it there,
			// not in the workloads' plans): only its bytes are the plans'.
			diffs = append(diffs, "pool object "+id+" in pool "+obj.Pool+": workloads hold "+itoa(a.Bytes)+" bytes, the node's record "+itoa(obj.Bytes))
			obj.Bytes = a.Bytes
			out[id] = obj
		default:
			out[id] = obj
		}
	}
	for _, id := range have.IDs() {
		if _, ok := sum[id]; ok {
			continue
		}
		obj := have[id]
		if !obj.Held {
			out[id] = obj
			continue
		}
		diffs = append(diffs, "pool object "+id+" in pool "+obj.Pool+": the node's record holds "+itoa(obj.Bytes)+" bytes, no workload holds it")
	}
	if len(out) == 0 {
		out = nil
	}
	return out, diffs, nil
}

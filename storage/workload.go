package storage

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/eru-extend/resources/storage/pool"
	"github.com/eru-extend/resources/types"
)

// Workload is one workload's storage resource in stored form: returned by
// calculate-deploy and calculate-realloc, kept by core, handed back in
// workload_resource and workloads_resource.
type Workload struct {
	VolumesRequest    []*VolumeBinding
	VolumesLimit      []*VolumeBinding
	VolumePlanRequest VolumePlan
	VolumePlanLimit   VolumePlan
	StorageRequest    int64
	StorageLimit      int64
	DisksRequest      []Disk
	DisksLimit        []Disk
	// ZeroByte is set on a realloc delta only: the change, per device, of
	// the bindings charged no bytes (see Resource.ZeroByte). A stored
	// workload leaves it nil: its plan entries of 0 bytes are counted.
	ZeroByte map[string]int64
	// PoolPlanRequest and PoolPlanLimit are the workload's pool volumes:
	// binding (stored form) to pool, object and bytes (docs/pools.md).
	// Absent when the workload has none.
	PoolPlanRequest pool.Plans
	PoolPlanLimit   pool.Plans
}

// VolumePlan maps a binding's full form to where it was placed: one device
// and the bytes charged there (a realloc delta may name several).
type VolumePlan map[string]map[string]int64

// workloadJSON is the wire shape of a Workload.
type workloadJSON struct {
	VolumesRequest    []string   `json:"volumes_request"`
	VolumesLimit      []string   `json:"volumes_limit"`
	VolumePlanRequest VolumePlan `json:"volume_plan_request"`
	VolumePlanLimit   VolumePlan `json:"volume_plan_limit"`
	StorageRequest    int64      `json:"storage_request"`
	StorageLimit      int64      `json:"storage_limit"`
	DisksRequest      []Disk     `json:"disks_request"`
	DisksLimit        []Disk     `json:"disks_limit"`
	// Only in a realloc's delta_resource; core stores nothing of it.
	ZeroByte map[string]int64 `json:"zero_byte_bindings,omitempty"`
	// The pool plans, absent when the workload has no pool volume.
	PoolPlanRequest json.RawMessage `json:"pool_plan_request,omitempty"`
	PoolPlanLimit   json.RawMessage `json:"pool_plan_limit,omitempty"`
}

// MarshalJSON writes the stored form, with empty collections as {} and [].
func (w *Workload) MarshalJSON() ([]byte, error) {
	out := workloadJSON{
		VolumesRequest:    make([]string, 0, len(w.VolumesRequest)),
		VolumesLimit:      make([]string, 0, len(w.VolumesLimit)),
		VolumePlanRequest: w.VolumePlanRequest,
		VolumePlanLimit:   w.VolumePlanLimit,
		StorageRequest:    w.StorageRequest,
		StorageLimit:      w.StorageLimit,
		DisksRequest:      w.DisksRequest,
		DisksLimit:        w.DisksLimit,
		ZeroByte:          w.ZeroByte,
	}
	if len(w.PoolPlanRequest) > 0 || len(w.PoolPlanLimit) > 0 {
		var err error
		if out.PoolPlanRequest, err = json.Marshal(w.PoolPlanRequest); err != nil {
			return nil, err
		}
		if out.PoolPlanLimit, err = json.Marshal(w.PoolPlanLimit); err != nil {
			return nil, err
		}
	}
	for _, b := range w.VolumesRequest {
		out.VolumesRequest = append(out.VolumesRequest, b.String())
	}
	for _, b := range w.VolumesLimit {
		out.VolumesLimit = append(out.VolumesLimit, b.String())
	}
	if out.VolumePlanRequest == nil {
		out.VolumePlanRequest = VolumePlan{}
	}
	if out.VolumePlanLimit == nil {
		out.VolumePlanLimit = VolumePlan{}
	}
	if out.DisksRequest == nil {
		out.DisksRequest = []Disk{}
	}
	if out.DisksLimit == nil {
		out.DisksLimit = []Disk{}
	}
	return json.Marshal(out)
}

// DecodeWorkload reads one stored workload resource; null is an empty one.
func DecodeWorkload(raw json.RawMessage) (*Workload, error) {
	w := &Workload{}
	if types.IsNull(raw) {
		return w, nil
	}
	var in workloadJSON
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, errInvalid("workload resource: %v", err)
	}
	var err error
	if w.VolumesRequest, err = parseBindings(in.VolumesRequest, true); err != nil {
		return nil, errInvalid("workload resource: volumes_request: %v", err)
	}
	if w.VolumesLimit, err = parseBindings(in.VolumesLimit, true); err != nil {
		return nil, errInvalid("workload resource: volumes_limit: %v", err)
	}
	w.VolumePlanRequest, w.VolumePlanLimit = in.VolumePlanRequest, in.VolumePlanLimit
	w.StorageRequest, w.StorageLimit = in.StorageRequest, in.StorageLimit
	if w.DisksRequest, err = readDisks(in.DisksRequest, "disks_request"); err != nil {
		return nil, err
	}
	if w.DisksLimit, err = readDisks(in.DisksLimit, "disks_limit"); err != nil {
		return nil, err
	}
	for dev, n := range in.ZeroByte {
		if n > maxBytes || n < -maxBytes {
			return nil, errInvalid("workload resource: %s of %s: %d is out of range", ZeroByteKey, dev, n)
		}
	}
	w.ZeroByte = in.ZeroByte
	if w.PoolPlanRequest, err = pool.DecodePlans(in.PoolPlanRequest, true); err != nil {
		return nil, errInvalid("workload resource: pool_plan_request: %v", err)
	}
	if w.PoolPlanLimit, err = pool.DecodePlans(in.PoolPlanLimit, true); err != nil {
		return nil, errInvalid("workload resource: pool_plan_limit: %v", err)
	}
	for _, n := range []int64{w.StorageRequest, w.StorageLimit} {
		if n > maxBytes || n < -maxBytes {
			return nil, errInvalid("workload resource: storage %d is out of range", n)
		}
	}
	for _, plan := range []VolumePlan{w.VolumePlanRequest, w.VolumePlanLimit} {
		for key, devs := range plan {
			for dev, n := range devs {
				if n > maxBytes || n < -maxBytes {
					return nil, errInvalid("workload resource: plan of %s on %s: %d is out of range", key, dev, n)
				}
			}
		}
	}
	for _, d := range slices.Concat(w.DisksRequest, w.DisksLimit) {
		for i, q := range d.Quota() {
			if q > maxBytes || q < -maxBytes {
				return nil, errInvalid("workload resource: disk %s %s %d is out of range", d.Device, QuotaNames[i], q)
			}
		}
	}
	return w, nil
}

// readDisks reads a workload's disks. The upstream plugin writes a
// zero-quota entry with no device (and null mounts) for a binding on a
// device no disk covers: such entries charge nothing and are dropped. A
// quota without a device is refused.
func readDisks(in []Disk, what string) ([]Disk, error) {
	out := make([]Disk, 0, len(in))
	for _, d := range in {
		if d.Device == "" {
			if !d.Quota().IsZero() {
				return nil, errInvalid("workload resource: %s: a disk with no device holds quota %s", what, fmtQuota(d.Quota()))
			}
			continue
		}
		if d.Mounts == nil {
			d.Mounts = []string{}
		}
		out = append(out, d)
	}
	return out, nil
}

// DecodeWorkloads reads a list of stored workload resources; null entries
// (workloads with no storage resource) are skipped.
func DecodeWorkloads(raw json.RawMessage) ([]*Workload, error) {
	return types.DecodeEach(raw, "workloads_resource", DecodeWorkload)
}

func parseBindings(list []string, signed bool) ([]*VolumeBinding, error) {
	out := make([]*VolumeBinding, 0, len(list))
	for _, s := range list {
		b, err := ParseBinding(s, signed)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// sumWorkloads adds up what workloads hold on a node: their plans' bytes per
// device, their storage requests, their disks' request quotas, and the
// bindings charged no bytes per device. Every sum is checked: nothing may
// pass 2^53 (nor wrap around int64 and come back small).
func sumWorkloads(ws []*Workload) (Resource, error) {
	total := types0()
	zero := map[string]int64{}
	for _, w := range ws {
		for _, devs := range w.VolumePlanRequest {
			for dev, n := range devs {
				s, ok := sumSizes(total.Volumes[dev], n)
				if !ok {
					return Resource{}, errInvalid("workloads hold more than 8 PiB on %s", dev)
				}
				total.Volumes[dev] = s
				if n == 0 && w.ZeroByte == nil {
					zero[dev]++
				}
			}
		}
		for dev, n := range w.ZeroByte {
			s, ok := sumSizes(zero[dev], n)
			if !ok {
				return Resource{}, errInvalid("workloads hold too many bindings on %s", dev)
			}
			zero[dev] = s
		}
		s, ok := sumSizes(total.Storage, w.StorageRequest)
		if !ok {
			return Resource{}, errInvalid("workloads hold more than 8 PiB of storage")
		}
		total.Storage = s
		for _, d := range w.DisksRequest {
			cur := total.disk(d.Device)
			if cur == nil {
				total.Disks = append(total.Disks, Disk{Device: d.Device, Mounts: slices.Clone(d.Mounts)})
				cur = &total.Disks[len(total.Disks)-1]
			}
			q, add := cur.Quota(), d.Quota()
			for i := range q {
				s, ok := sumSizes(q[i], add[i])
				if !ok {
					return Resource{}, errInvalid("workloads hold more than 2^53 of %s on disk %s", QuotaNames[i], d.Device)
				}
				q[i] = s
			}
			cur.SetQuota(q)
		}
	}
	for dev, n := range zero {
		if n != 0 {
			if total.ZeroByte == nil {
				total.ZeroByte = map[string]int64{}
			}
			total.ZeroByte[dev] = n
		}
	}
	total.normalize()
	return total, nil
}

func types0() Resource { return Resource{Volumes: map[string]int64{}} }

// WorkloadRequest is what a person asks of storage for one workload
// (calculate-deploy's workload_resource_request, the capacity query's
// workload_resource), reconciled: request and limit describe the same
// bindings, each limit at least its request, storage totals including the
// bindings' sizes.
type WorkloadRequest struct {
	Request []*VolumeBinding
	Limit   []*VolumeBinding // Limit[i] matches Request[i]
	// Flat storage asked besides the bindings.
	FlatRequest, FlatLimit int64
	// Totals: flat plus the bindings' sizes.
	StorageRequest, StorageLimit int64
	// Pools are the pool volumes asked (docs/pools.md): not part of the
	// storage totals, never placed on a local device.
	Pools []*pool.Binding
}

// needsScheduling reports whether any binding needs a device or IO quota.
func (w *WorkloadRequest) needsScheduling() bool {
	for _, b := range w.Request {
		if b.NeedsScheduling() {
			return true
		}
	}
	return false
}

// IsEmpty reports whether the request asks nothing of storage.
func (w *WorkloadRequest) IsEmpty() bool {
	return len(w.Request) == 0 && len(w.Pools) == 0 && w.StorageRequest == 0 && w.StorageLimit == 0
}

// workloadKeys are the keys a workload request may carry (a function, so
// that no caller can change the list for the others).
func workloadKeys() []string {
	return []string{
		"volumes-request", "volume-request", "volumes", "volume", "volumes-limit", "volume-limit",
		"storage-request", "storage-limit", "storage",
	}
}

// ParseWorkloadRequest reads a workload request. signed allows negative
// sizes and quotas: a calculate-realloc request, whose values are deltas.
func ParseWorkloadRequest(raw json.RawMessage, signed bool) (*WorkloadRequest, error) {
	m, err := types.DecodeObject(raw, "workload request")
	if err != nil {
		return nil, err
	}
	if err := types.RefuseUnknown(m, "workload request", workloadKeys()...); err != nil {
		return nil, err
	}
	reqList, hasReq, err := oneOfLists(m, "volumes-request", "volume-request")
	if err != nil {
		return nil, err
	}
	limList, hasLim, err := oneOfLists(m, "volumes", "volume", "volumes-limit", "volume-limit")
	if err != nil {
		return nil, err
	}
	w := &WorkloadRequest{}
	reqPools, reqList, err := splitPoolBindings(reqList, signed)
	if err != nil {
		return nil, errInvalid("volumes-request: %v", err)
	}
	limPools, limList, err := splitPoolBindings(limList, signed)
	if err != nil {
		return nil, errInvalid("volumes: %v", err)
	}
	if w.Pools, err = pairPools(reqPools, limPools, hasReq, hasLim); err != nil {
		return nil, err
	}
	if err := oneAttachPerObject(w.Pools); err != nil {
		return nil, err
	}
	if w.Request, err = parseBindings(reqList, signed); err != nil {
		return nil, errInvalid("volumes-request: %v", err)
	}
	if w.Limit, err = parseBindings(limList, signed); err != nil {
		return nil, errInvalid("volumes: %v", err)
	}
	switch {
	case !hasReq:
		w.Request = cloneBindings(w.Limit)
	case !hasLim:
		w.Limit = cloneBindings(w.Request)
	}
	if w.Limit, err = pairLimits(w.Request, w.Limit); err != nil {
		return nil, err
	}
	if !signed {
		for i, b := range w.Request {
			if err := b.Validate(); err != nil {
				return nil, errInvalid("%v", err)
			}
			raiseLimit(b, w.Limit[i])
		}
		if err := oneMountPerDestination(w.Request, w.Pools); err != nil {
			return nil, err
		}
	}

	var hasFlatReq, hasFlatLim bool
	if raw, ok := m["storage"]; ok && !types.IsNull(raw) {
		n, err := parseSizeValue(raw, signed)
		if err != nil {
			return nil, errInvalid("storage: %v", err)
		}
		w.FlatRequest, w.FlatLimit, hasFlatReq, hasFlatLim = n, n, true, true
	}
	if raw, ok := m["storage-request"]; ok && !types.IsNull(raw) {
		n, err := parseSizeValue(raw, signed)
		if err != nil {
			return nil, errInvalid("storage-request: %v", err)
		}
		w.FlatRequest, hasFlatReq = n, true
	}
	if raw, ok := m["storage-limit"]; ok && !types.IsNull(raw) {
		n, err := parseSizeValue(raw, signed)
		if err != nil {
			return nil, errInvalid("storage-limit: %v", err)
		}
		w.FlatLimit, hasFlatLim = n, true
	}
	if hasFlatLim && !hasFlatReq {
		w.FlatRequest = w.FlatLimit
	}
	if !signed && w.FlatLimit < w.FlatRequest {
		w.FlatLimit = w.FlatRequest
	}
	if err := w.total(); err != nil {
		return nil, err
	}
	return w, nil
}

// total sets the storage totals: flat plus the bindings' sizes, once.
func (w *WorkloadRequest) total() error {
	var ok bool
	sizes := func(bs []*VolumeBinding) []int64 {
		out := make([]int64, 0, len(bs))
		for _, b := range bs {
			out = append(out, b.Size)
		}
		return out
	}
	if w.StorageRequest, ok = sumSizes(append([]int64{w.FlatRequest}, sizes(w.Request)...)...); !ok {
		return errInvalid("storage request adds up to more than 8 PiB")
	}
	if w.StorageLimit, ok = sumSizes(append([]int64{w.FlatLimit}, sizes(w.Limit)...)...); !ok {
		return errInvalid("storage limit adds up to more than 8 PiB")
	}
	if w.StorageLimit < w.StorageRequest && w.StorageRequest >= 0 {
		w.StorageLimit = w.StorageRequest
	}
	// The quotas of the bindings placed on one disk add up in the stored
	// disks_request/disks_limit, which must stay within 2^53 like every
	// stored figure: bound their totals (a realloc merge adds them too).
	for _, bs := range [][]*VolumeBinding{w.Request, w.Limit} {
		for i := range QuotaNames {
			vals := make([]int64, 0, len(bs))
			for _, b := range bs {
				vals = append(vals, b.Quota[i])
			}
			if _, ok := sumSizes(vals...); !ok {
				return errInvalid("volumes ask more than 2^53 of %s in total", QuotaNames[i])
			}
		}
	}
	return nil
}

func oneOfLists(m map[string]json.RawMessage, keys ...string) ([]string, bool, error) {
	var found string
	var list []string
	for _, k := range keys {
		raw, ok := m[k]
		if !ok || types.IsNull(raw) {
			continue
		}
		var this []string
		if err := json.Unmarshal(raw, &this); err != nil {
			var one string
			if json.Unmarshal(raw, &one) != nil {
				return nil, false, errInvalid("%s: want a list of volume bindings, got %s", k, clip(raw))
			}
			this = []string{one}
		}
		if len(this) == 0 {
			continue // an empty list is no list, as core's RawParams.OneOfStringSlice reads it
		}
		if found != "" {
			return nil, false, errInvalid("%s and %s both given: give the list once", found, k)
		}
		found, list = k, this
	}
	return list, found != "", nil
}

func cloneBindings(bs []*VolumeBinding) []*VolumeBinding {
	out := make([]*VolumeBinding, len(bs))
	for i, b := range bs {
		c := *b
		out[i] = &c
	}
	return out
}

// pairLimits orders limits to match requests by source, destination and
// flags, refusing lists that do not describe the same bindings.
func pairLimits(req, lim []*VolumeBinding) ([]*VolumeBinding, error) {
	if len(req) != len(lim) {
		return nil, errInvalid("volumes-request has %d bindings but volumes has %d: they must describe the same bindings", len(req), len(lim))
	}
	seen := map[identity]bool{}
	for _, b := range req {
		if seen[b.identity()] {
			return nil, errInvalid("volume %s:%s:%s is listed twice", b.Source, b.Destination, b.Flags)
		}
		seen[b.identity()] = true
	}
	used := make([]bool, len(lim))
	out := make([]*VolumeBinding, len(req))
	for i, r := range req {
		for j, l := range lim {
			if !used[j] && l.identity() == r.identity() {
				used[j], out[i] = true, l
				break
			}
		}
		if out[i] == nil {
			return nil, errInvalid("volume %s:%s:%s of volumes-request has no matching binding in volumes", r.Source, r.Destination, r.Flags)
		}
	}
	return out, nil
}

// raiseLimit lifts a limit's size and quotas to at least the request's.
func raiseLimit(req, lim *VolumeBinding) {
	lim.Size = max(lim.Size, req.Size)
	for i := range lim.Quota {
		lim.Quota[i] = max(lim.Quota[i], req.Quota[i])
	}
}

// EngineParams is what core hands the engine for a workload's storage.
type EngineParams struct {
	Volumes       []string          `json:"volumes"`
	VolumeChanged bool              `json:"volume_changed"`
	Storage       int64             `json:"storage"`
	IOPSOptions   map[string]string `json:"iops_options"`
}

// EngineParams derives the engine parameters of a stored workload: each
// limit binding applied to its plan, the storage limit, and the IO limits
// per disk.
func (w *Workload) EngineParams() (*EngineParams, error) {
	vols, err := w.engineVolumes()
	if err != nil {
		return nil, err
	}
	p := &EngineParams{Volumes: vols, Storage: w.StorageLimit, IOPSOptions: map[string]string{}}
	for _, d := range w.DisksLimit {
		if q := d.Quota(); !q.IsZero() {
			p.IOPSOptions[d.Device] = fmtQuota(q)
		}
	}
	return p, nil
}

// engineVolumes applies each limit binding to its plan. Plan entries are
// found by the parsed binding, never by its string (the upstream plugin
// writes flags in another order). A binding the scheduler places must have
// a plan: an AUTO source never reaches the engine.
func (w *Workload) engineVolumes() ([]string, error) {
	plans := planIndex(w.VolumePlanLimit)
	reqPlans := planIndex(w.VolumePlanRequest)
	out := make([]string, 0, len(w.VolumesLimit))
	for _, b := range w.VolumesLimit {
		dev, size := "", b.Size
		devs, ok := plans[b.identity()]
		if !ok {
			devs, ok = reqPlans[b.identity()]
		}
		if ok {
			for _, d := range slices.Sorted(maps.Keys(devs)) {
				dev, size = d, max(devs[d], b.Size)
			}
		}
		if b.IsAuto() && dev == "" {
			return nil, types.Errorf(types.FailedPrecondition, "volume %s has no plan on this node: the workload resource is incomplete", b)
		}
		out = append(out, b.EngineForm(dev, size))
	}
	return out, nil
}

// planIndex keys a plan by the identity of each entry's binding; entries
// whose key does not parse are left out.
func planIndex(p VolumePlan) map[identity]map[string]int64 {
	out := make(map[identity]map[string]int64, len(p))
	for key, devs := range p {
		if id, ok := planIdentity(key); ok {
			out[id] = devs
		}
	}
	return out
}

// placements says where each binding of a workload lives: its device, or
// for a mount its source path. volume_changed compares these.
func (w *Workload) placements() map[identity]string {
	plans := planIndex(w.VolumePlanLimit)
	reqPlans := planIndex(w.VolumePlanRequest)
	out := make(map[identity]string, len(w.VolumesLimit))
	for _, b := range w.VolumesLimit {
		where := b.Source
		devs, ok := plans[b.identity()]
		if !ok {
			devs, ok = reqPlans[b.identity()]
		}
		if ok {
			for _, d := range slices.Sorted(maps.Keys(devs)) {
				where = d
			}
		}
		out[b.identity()] = where
	}
	return out
}

// volumesMoved reports whether a realloc adds or removes a binding or puts
// one on another device or source path: core's volume_changed ("new volumes
// are contained in the realloc"). A change of size, IO quota or storage
// alone is not.
func volumesMoved(old, next *Workload) bool {
	a, b := old.placements(), next.placements()
	return !maps.Equal(a, b)
}

// planIdentity recovers the identity of a plan key (a binding's full form).
func planIdentity(key string) (identity, bool) {
	b, err := ParseBinding(key, true)
	if err != nil {
		return identity{}, false
	}
	return b.identity(), true
}

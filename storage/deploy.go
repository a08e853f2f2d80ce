package storage

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"

	"github.com/docker/go-units"

	"github.com/eru-extend/resources/types"
)

// DeployCapacity answers the capacity query for one node: how many more
// workloads of this request fit (plans that survive, capped by maxDeploy and
// by the storage budget), the node's used fraction and the fraction one
// workload takes. It fails only when ctx is done (deadline_exceeded).
func (n *Node) DeployCapacity(ctx context.Context, w *WorkloadRequest, maxDeploy int) (types.NodeCapacity, error) {
	limit := n.budget(w, maxDeploy)
	if n.unknown && !w.IsEmpty() {
		// Deploy refuses a node without a record for any request that asks
		// something of storage: the query agrees.
		limit = 0
	}
	if limit > 0 && n.uncoveredLimit(w.Request, w.Limit) != nil {
		// Deploy refuses a mount whose IO limit no disk covers: the
		// query agrees.
		limit = 0
	}
	count := limit
	if limit > 0 && w.needsScheduling() {
		c, err := Count(ctx, NewHost(&n.Capacity, &n.Usage), &n.Capacity, w.Request, limit, maxDeploy)
		var u errUncovered
		switch {
		case errors.As(err, &u):
			c = 0 // a mount no disk of this node covers: nothing fits here
		case err != nil:
			return types.NodeCapacity{}, err
		}
		count = c
	}
	usage, rate := n.fractions(w)
	return types.NodeCapacity{Capacity: count, Usage: usage, Rate: rate, Weight: 1}, nil
}

// budget caps maxDeploy by the storage budget left.
func (n *Node) budget(w *WorkloadRequest, maxDeploy int) int {
	if w.StorageRequest <= 0 {
		return maxDeploy
	}
	left := n.Capacity.Storage - n.Usage.Storage
	if left <= 0 {
		return 0
	}
	return int(min(int64(maxDeploy), left/w.StorageRequest))
}

// fractions are the node's used fraction and one workload's share of the
// same denominator: volume bytes when the request has bindings or asks no
// storage, else the storage budget.
func (n *Node) fractions(w *WorkloadRequest) (usage, rate float64) {
	if len(w.Request) > 0 || w.StorageRequest == 0 {
		den := n.Capacity.volumeTotal()
		if den == 0 {
			return 0, 0
		}
		var want int64
		for _, b := range w.Request {
			want += b.Size
		}
		return float64(n.Usage.volumeTotal()) / float64(den), float64(want) / float64(den)
	}
	den := n.Capacity.Storage
	if den == 0 {
		return 0, 0
	}
	return float64(n.Usage.Storage) / float64(den), float64(w.StorageRequest) / float64(den)
}

// Deploy plans count workloads of the request on the node, or fails with
// resource_exhausted naming the binding and the limit that stopped the
// next plan.
func (n *Node) Deploy(ctx context.Context, w *WorkloadRequest, count, maxDeploy int) ([]*Workload, error) {
	if count <= 0 {
		return nil, errInvalid("deploy_count %d: want at least 1", count)
	}
	if count > maxDeploy {
		return nil, types.Errorf(types.ResourceExhausted, "deploy_count %d is above scheduler.max_deploy_count %d", count, maxDeploy)
	}
	if n.unknown && !w.IsEmpty() {
		return nil, types.Errorf(types.ResourceExhausted, "no storage record for this node: add it (add-node) or set its capacity first")
	}
	if fit := n.budget(w, maxDeploy); fit < count {
		left := max(0, n.Capacity.Storage-n.Usage.Storage)
		return nil, types.Errorf(types.ResourceExhausted, "storage budget: %s asked (%d workloads of %s), %s left (%d bytes)",
			Human(types.MulSat(w.StorageRequest, int64(count))), count, Human(w.StorageRequest), Human(left), left)
	}
	if err := n.uncoveredLimit(w.Request, w.Limit); err != nil {
		return nil, uncovered(err)
	}
	out := make([]*Workload, 0, count)
	if !w.needsScheduling() {
		for range count {
			out = append(out, n.workloadOf(w, Plan{}))
		}
		return out, nil
	}
	plans, short, err := Schedule(ctx, NewHost(&n.Capacity, &n.Usage), &n.Capacity, w.Request, count, maxDeploy)
	if err != nil {
		return nil, uncovered(err)
	}
	if len(plans) < count {
		why := ""
		if short != nil && short.Binding != nil {
			why = fmt.Sprintf(": plan %d: volume %s (%s): %s", len(plans)+1, short.Binding, Human(short.Binding.Size), short.Reason)
		}
		return nil, types.Errorf(types.ResourceExhausted, "need %d plans, have %d%s", count, len(plans), why)
	}
	for _, p := range plans {
		out = append(out, n.workloadOf(w, p))
	}
	return out, nil
}

// Human writes a byte count in binary units for a person ("1.5 TiB").
func Human(n int64) string {
	if n < 0 {
		return "-" + Human(-n)
	}
	return units.CustomSize("%.4g %s", float64(n), 1024, []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// uncoveredLimit is errUncovered for the first mount binding whose IO
// limit asks for quota on a path no disk of the node covers: the engine
// could be given no limit for it (limits[i] is the limit of requests[i]).
// A quota in the request is refused by the scheduler; this is the same
// refusal for a quota in the limit only.
func (n *Node) uncoveredLimit(requests, limits []*VolumeBinding) error {
	for i, b := range requests {
		if b.Kind() == Mount && i < len(limits) && !limits[i].Quota.IsZero() && n.Capacity.coveringDisk(b.Source) < 0 {
			return errUncovered{limits[i]}
		}
	}
	return nil
}

func uncovered(err error) error {
	var u errUncovered
	if errors.As(err, &u) {
		return errInvalid("%v", err)
	}
	return err
}

// workloadOf builds the stored workload resource of one plan: each placed
// binding's device and bytes, the limit plan (at least the planned bytes),
// and per disk touched the request and limit quotas charged to it.
func (n *Node) workloadOf(w *WorkloadRequest, p Plan) *Workload {
	wl := &Workload{
		VolumesRequest:    w.Request,
		VolumesLimit:      w.Limit,
		VolumePlanRequest: VolumePlan{},
		VolumePlanLimit:   VolumePlan{},
		StorageRequest:    w.StorageRequest,
		StorageLimit:      w.StorageLimit,
		DisksRequest:      []Disk{},
		DisksLimit:        []Disk{},
	}
	reqQ := map[int]Quota{}
	limQ := map[int]Quota{}
	for i, b := range w.Request {
		if i < len(p.Device) && p.Device[i] != "" {
			wl.VolumePlanRequest[b.String()] = map[string]int64{p.Device[i]: p.Size[i]}
			wl.VolumePlanLimit[w.Limit[i].String()] = map[string]int64{p.Device[i]: max(w.Limit[i].Size, p.Size[i])}
		}
		disk := -1
		switch {
		case i < len(p.Disk) && p.Disk[i] >= 0:
			disk = p.Disk[i]
		case b.Kind() == Mount && !w.Limit[i].Quota.IsZero():
			// A mount with IO quota in its limit only is not scheduled
			// (nothing to reserve), but the engine must apply its limit
			// on the disk that covers its source.
			disk = n.Capacity.coveringDisk(b.Source)
		}
		if disk >= 0 {
			reqQ[disk] = reqQ[disk].Plus(b.Quota)
			limQ[disk] = limQ[disk].Plus(w.Limit[i].Quota)
		}
	}
	for i, d := range n.Capacity.Disks {
		if _, ok := reqQ[i]; !ok {
			continue
		}
		rd := Disk{Device: d.Device, Mounts: slices.Clone(d.Mounts)}
		rd.SetQuota(reqQ[i])
		ld := Disk{Device: d.Device, Mounts: slices.Clone(d.Mounts)}
		ld.SetQuota(limQ[i])
		wl.DisksRequest = append(wl.DisksRequest, rd)
		wl.DisksLimit = append(wl.DisksLimit, ld)
	}
	return wl
}

// splitSizes divides size bytes in proportion to sizes (floor), the
// remainder to the first; all to the first when the sizes sum to zero.
func splitSizes(size int64, sizes []int64) []int64 {
	shares := make([]int64, len(sizes))
	var total, given int64
	for _, s := range sizes {
		total += s
	}
	if total > 0 {
		for j, s := range sizes {
			hi, lo := bits.Mul64(uint64(s), uint64(size))
			q, _ := bits.Div64(hi, lo, uint64(total))
			shares[j] = int64(q)
			given += shares[j]
		}
	}
	if len(shares) > 0 {
		shares[0] += size - given
	}
	return shares
}

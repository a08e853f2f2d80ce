package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// The rules of issue 10 (fidelity to how eru core and the upstream plugin
// drive storage) and the arithmetic, naming and deadline rules of issue 18,
// on values.

func TestConversionOpensOnlyDevicesThatHoldANormalBinding(t *testing.T) {
	// unused /d0 of 10 and /d1 of 100; a workload asks 50 normal and 5 monopoly.
	n := mustNode(t, `{"volumes":{"/d0":10,"/d1":100},"disks":[],"storage":100000}`, "")
	bs := mustBindings(t, "AUTO:/n:rw:50", "AUTO:/m:mrw:5")

	t.Run("the capacity query opens /d1 for the normal binding and keeps /d0 whole for the group", func(t *testing.T) {
		got, err := Count(context.Background(), hostOf(n), &n.Capacity, bs, 100, 100)
		require.NoError(t, err)
		require.Equal(t, 1, got)
	})
	t.Run("a deploy of one succeeds with the same layout", func(t *testing.T) {
		plans, short, err := Schedule(context.Background(), hostOf(n), &n.Capacity, bs, 1, 100)
		require.NoError(t, err)
		require.Nil(t, short)
		require.Equal(t, [][]placement{{{"/d1", 50, -1}, {"/d0", 10, -1}}}, placements(plans))
	})
	t.Run("when no unused device holds the smallest normal binding, conversion stops", func(t *testing.T) {
		small := mustNode(t, `{"volumes":{"/d0":10,"/d1":20},"disks":[],"storage":100000}`, "")
		got, err := Count(context.Background(), hostOf(small), &small.Capacity, bs, 100, 100)
		require.NoError(t, err)
		require.Zero(t, got, "no device holds 50: nothing is converted and no plan has its normal binding")
		only := mustBindings(t, "AUTO:/m:mrw:5")
		got, err = Count(context.Background(), hostOf(small), &small.Capacity, only, 100, 100)
		require.NoError(t, err)
		require.Equal(t, 2, got, "both devices stay whole for monopoly groups")
	})
}

func TestZeroByteBindingsKeepADeviceUsed(t *testing.T) {
	capacity := `{"volumes":{"/data0":1000,"/data1":1000},"disks":[],"storage":100000}`
	ctx := context.Background()

	t.Run("an unlimited binding's device is recorded in usage and no monopoly group takes it", func(t *testing.T) {
		n := mustNode(t, capacity, "")
		wls, err := n.Deploy(ctx, mustRequest(t, `{"volumes":["AUTO:/u:rw:0"]}`, false), 1, 10)
		require.NoError(t, err)
		require.Equal(t, VolumePlan{"AUTO:/u:rw:0:0:0:0:0": {"/data0": 0}}, wls[0].VolumePlanRequest, "ties go to the first name")
		after := usageAfter(t, n, wls...)
		require.Equal(t, map[string]int64{"/data0": 1}, after.Usage.ZeroByte)
		require.Equal(t, int64(0), after.Usage.Volumes["/data0"], "still charged no bytes")

		mono := mustRequest(t, `{"volumes":["AUTO:/m:mrw:100"]}`, false)
		got, err := after.DeployCapacity(ctx, mono, 10)
		require.NoError(t, err)
		require.Equal(t, 1, got.Capacity, "only /data1 is unused")
		_, err = after.Deploy(ctx, mono, 2, 10)
		requireClass(t, err, types.ResourceExhausted)
		wls, err = after.Deploy(ctx, mono, 1, 10)
		require.NoError(t, err)
		require.Equal(t, VolumePlan{"AUTO:/m:mrw:100:0:0:0:0": {"/data1": 1000}}, wls[0].VolumePlanRequest)
	})
	t.Run("a record written before the count existed reads as today", func(t *testing.T) {
		n := mustNode(t, capacity, `{"volumes":{"/data0":0,"/data1":0},"disks":[],"storage":0}`)
		require.Nil(t, n.Usage.ZeroByte)
		got, err := n.DeployCapacity(ctx, mustRequest(t, `{"volumes":["AUTO:/m:mrw:100"]}`, false), 10)
		require.NoError(t, err)
		require.Equal(t, 2, got.Capacity)
		data, err := Rules{}.Encode(n)
		require.NoError(t, err)
		require.NotContains(t, string(data), ZeroByteKey, "a record without such bindings is written as before")
	})
	t.Run("removing the workload frees the device again", func(t *testing.T) {
		n := mustNode(t, capacity, "")
		wls, err := n.Deploy(ctx, mustRequest(t, `{"volumes":["AUTO:/u:rw:0"]}`, false), 1, 10)
		require.NoError(t, err)
		after := usageAfter(t, n, wls...)
		next, err := nextUsage(after, nil, nil, mustJSON(t, wls), true, false)
		require.NoError(t, err)
		settled, err := next.Settle()
		require.NoError(t, err)
		require.Nil(t, settled.Usage.ZeroByte)
	})
	t.Run("removing such a binding from a record that never counted it leaves 0", func(t *testing.T) {
		n := mustNode(t, capacity, `{"volumes":{"/data0":0,"/data1":0},"disks":[],"storage":0}`)
		w := mustWorkload(t, `{"volumes_request":["AUTO:/u:rw:0:0:0:0:0"],"volume_plan_request":{"AUTO:/u:rw:0:0:0:0:0":{"/data1":0}}}`)
		next, err := nextUsage(n, nil, nil, mustJSON(t, []*Workload{w}), true, false)
		require.NoError(t, err)
		settled, err := next.Settle()
		require.NoError(t, err)
		require.Nil(t, settled.Usage.ZeroByte)
	})
	t.Run("diffs name a device whose count disagrees with the workloads", func(t *testing.T) {
		n := mustNode(t, capacity, "")
		w := mustWorkload(t, `{"volumes_request":["AUTO:/u:rw:0:0:0:0:0"],"volume_plan_request":{"AUTO:/u:rw:0:0:0:0:0":{"/data1":0}}}`)
		_, diffs, err := n.Recompute([]*Workload{w}, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"volume /data1: stored usage holds 0 bindings charged no bytes, workloads hold 1"}, diffs)
	})
	t.Run("a count on a device the node does not have is refused", func(t *testing.T) {
		_, err := Restore(raw(capacity), raw(`{"volumes":{},"disks":[],"storage":0,"zero_byte_bindings":{"/data9":1}}`))
		requireClass(t, err, types.FailedPrecondition)
		require.EqualError(t, err, "volume /data9 still holds 1 workload bindings")
		_, err = Restore(raw(capacity), raw(`{"volumes":{},"disks":[],"storage":0,"zero_byte_bindings":{"/data0":-1}}`))
		requireClass(t, err, types.InvalidArgument)
		require.ErrorContains(t, err, "-1 bindings, out of range: below zero")
	})
	t.Run("a device hosting such bindings cannot be removed", func(t *testing.T) {
		n := mustNode(t, capacity, `{"volumes":{},"disks":[],"storage":0,"zero_byte_bindings":{"/data1":2}}`)
		_, err := setCapacity(n, nil, raw(`{"volumes":["/data1:0"]}`), false, false)
		requireClass(t, err, types.FailedPrecondition)
		require.ErrorContains(t, err, "volume /data1 still holds 2 workload bindings")
	})
}

func TestReallocReSplitsTheWorkloadsOwnMonopolyDevice(t *testing.T) {
	ctx := context.Background()
	n := mustNode(t, `{"volumes":{"/data0":100},"disks":[],"storage":100000}`, "")
	wls, err := n.Deploy(ctx, mustRequest(t, `{"volumes":["AUTO:/m:mrw:10","AUTO:/u:rw:0"]}`, false), 1, 10)
	require.NoError(t, err)
	require.Equal(t, VolumePlan{"AUTO:/m:mrw:10:0:0:0:0": {"/data0": 100}, "AUTO:/u:rw:0:0:0:0:0": {"/data0": 0}}, wls[0].VolumePlanRequest)
	after := usageAfter(t, n, wls...)

	res, err := after.Realloc(ctx, wls[0], mustRequest(t, `{"volumes":["AUTO:/u:rw:20"]}`, true))
	require.NoError(t, err)
	require.Equal(t, VolumePlan{"AUTO:/m:mrw:10:0:0:0:0": {"/data0": 80}, "AUTO:/u:rw:20:0:0:0:0": {"/data0": 20}}, res.Workload.VolumePlanRequest)
	require.False(t, res.Engine.VolumeChanged, "both stay on /data0")
	require.Empty(t, perDevice(t, res.Delta), "the device was and stays wholly taken: no bytes change")
	require.Equal(t, map[string]int64{"/data0": -1}, res.Delta.ZeroByte, "the unlimited binding now has bytes")

	committed := usageAfter(t, after, res.Delta)
	_, diffs, err := committed.Recompute([]*Workload{res.Workload}, nil)
	require.NoError(t, err)
	require.Empty(t, diffs)

	t.Run("growth beyond the device is still refused", func(t *testing.T) {
		_, err := after.Realloc(ctx, wls[0], mustRequest(t, `{"volumes":["AUTO:/u:rw:95"]}`, true))
		requireClass(t, err, types.ResourceExhausted)
		require.ErrorContains(t, err, "monopoly volumes of 10 B and the workload's other volumes of 95 B do not fit their device /data0")
	})
}

func TestVolumeChangedOnlyWhenAVolumeMoves(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		request string
		changed bool
	}{
		{"a size grown on the same device", `{"volumes":["AUTO:/a:rw:100"]}`, false},
		{"a size shrunk", `{"volumes":["AUTO:/a:rw:-100"]}`, false},
		{"an IO quota changed", `{"volumes":["AUTO:/q:rw:0:10:0:0:0"]}`, false},
		{"the storage budget alone", `{"storage":"10"}`, false},
		{"a binding added", `{"volumes":["AUTO:/new:rw:10"]}`, true},
		{"a binding removed", `{"volumes":["AUTO:/a:rw:-300"]}`, true},
		{"a mount added", `{"volumes":["/host:/h"]}`, true},
		{"a binding that must move to grow", `{"volumes":["AUTO:/a:rw:700"]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := reallocNode(t)
			res, err := n.Realloc(ctx, mustWorkload(t, normalWorkload), mustRequest(t, tt.request, true))
			if tt.name == "a binding that must move to grow" {
				// affinity keeps a binding on its device: growing past it is
				// refused rather than moved, so no answer can claim a move.
				requireClass(t, err, types.ResourceExhausted)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.changed, res.Engine.VolumeChanged)
		})
	}
	t.Run("a binding of the same identity on another device has moved", func(t *testing.T) {
		old := mustWorkload(t, normalWorkload)
		moved := mustWorkload(t, strings.ReplaceAll(normalWorkload, `"/data0":300`, `"/data1":300`))
		require.True(t, volumesMoved(old, moved))
		require.False(t, volumesMoved(old, mustWorkload(t, normalWorkload)))
	})
}

func TestUpstreamFlagForms(t *testing.T) {
	tests := []struct{ in, flags, engine string }{
		{"AUTO:/n:rowo:10", "orw", "/d:/n:rowo:10"},
		{"AUTO:/n:ro:10", "or", "/d:/n:ro:10"},
		{"AUTO:/n:wo:10", "ow", "/d:/n:wo:10"},
		{"AUTO:/n:mrowo:10", "morw", "/d:/n:rowo:10"},
		{"AUTO:/n:rwo:10", "orw", "/d:/n:rowo:10"},
	}
	for _, tt := range tests {
		t.Run(tt.in+" parses", func(t *testing.T) {
			b := mustBinding(t, tt.in)
			require.Equal(t, tt.flags, b.Flags)
			require.Equal(t, tt.engine, b.EngineForm("/d", 10))
		})
	}
	for _, bad := range []string{"AUTO:/n:oo:1", "AUTO:/n:roo:1", "AUTO:/n:rr:1", "AUTO:/n:rwoo:1"} {
		t.Run(bad+" is refused", func(t *testing.T) {
			_, err := ParseBinding(bad, false)
			require.ErrorContains(t, err, "is given twice")
		})
	}
}

// upstreamWorkload is a workload as the upstream plugin stores it: flags
// "ro" (ours sort to "or"), and a zero-quota disk entry with no device for a
// binding on a device no disk covers.
const upstreamWorkload = `{"volumes_request":["AUTO:/n:ro:100:0:0:0:0"],"volumes_limit":["AUTO:/n:ro:100:0:0:0:0"],
	"volume_plan_request":{"AUTO:/n:ro:100:0:0:0:0":{"/data2":100}},"volume_plan_limit":{"AUTO:/n:ro:100:0:0:0:0":{"/data2":100}},
	"storage_request":100,"storage_limit":100,
	"disks_request":[{"device":"","mounts":null,"read_IOPS":0,"write_IOPS":0,"read_bps":0,"write_bps":0}],
	"disks_limit":[{"device":"","mounts":null,"read_IOPS":0,"write_IOPS":0,"read_bps":0,"write_bps":0}]}`

func TestUpstreamWorkloadsAreRead(t *testing.T) {
	ctx := context.Background()
	t.Run("a zero-quota disk entry with no device is dropped", func(t *testing.T) {
		w := mustWorkload(t, upstreamWorkload)
		require.Empty(t, w.DisksRequest)
		require.Empty(t, w.DisksLimit)
	})
	t.Run("a disk entry with no device but a quota is refused", func(t *testing.T) {
		_, err := DecodeWorkload(raw(`{"disks_request":[{"device":"","read_IOPS":5}]}`))
		requireClass(t, err, types.InvalidArgument)
		require.ErrorContains(t, err, "a disk with no device holds quota 5:0:0:0")
	})
	t.Run("the engine gets the planned device, never AUTO", func(t *testing.T) {
		p, err := mustWorkload(t, upstreamWorkload).EngineParams()
		require.NoError(t, err)
		require.Equal(t, []string{"/data2:/n:ro:100"}, p.Volumes)
	})
	t.Run("a workload with a placed binding and no plan is refused, not bound to AUTO", func(t *testing.T) {
		_, err := mustWorkload(t, `{"volumes_request":["AUTO:/n:rw:1:0:0:0:0"],"volumes_limit":["AUTO:/n:rw:1:0:0:0:0"]}`).EngineParams()
		requireClass(t, err, types.FailedPrecondition)
		require.ErrorContains(t, err, "has no plan on this node")
	})
	t.Run("a realloc finds the plan by the parsed binding and keeps its device", func(t *testing.T) {
		n := mustNode(t, reallocCapacity, "")
		n = usageAfter(t, n, mustWorkload(t, upstreamWorkload))
		res, err := n.Realloc(ctx, mustWorkload(t, upstreamWorkload), mustRequest(t, `{"volumes":["AUTO:/n:ro:50"]}`, true))
		require.NoError(t, err)
		require.Equal(t, VolumePlan{"AUTO:/n:or:150:0:0:0:0": {"/data2": 150}}, res.Workload.VolumePlanRequest)
		require.Equal(t, []string{"/data2:/n:ro:150"}, res.Engine.Volumes)
		require.False(t, res.Engine.VolumeChanged)
		require.Equal(t, map[string]int64{"/data2": 50}, perDevice(t, res.Delta))
	})
	t.Run("a storage-only realloc carries the plan, keyed by the binding's own form", func(t *testing.T) {
		n := usageAfter(t, mustNode(t, reallocCapacity, ""), mustWorkload(t, upstreamWorkload))
		res, err := n.Realloc(ctx, mustWorkload(t, upstreamWorkload), mustRequest(t, `{"storage":"10"}`, true))
		require.NoError(t, err)
		require.Equal(t, VolumePlan{"AUTO:/n:or:100:0:0:0:0": {"/data2": 100}}, res.Workload.VolumePlanRequest)
		require.Equal(t, []string{"/data2:/n:ro:100"}, res.Engine.Volumes)
	})
}

func TestWorkloadSumsNeverWrap(t *testing.T) {
	// 2,048 workloads of 2^53 read IOPS and one of 5 add up to 2^64 + 5,
	// which int64 arithmetic would wrap to 5.
	big := `{"disks_request":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":9007199254740992}]}`
	small := `{"disks_request":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":5}]}`
	ws := make([]*Workload, 0, 2049)
	for range 2048 {
		ws = append(ws, mustWorkload(t, big))
	}
	ws = append(ws, mustWorkload(t, small))
	_, err := sumWorkloads(ws)
	requireClass(t, err, types.InvalidArgument)
	require.ErrorContains(t, err, "workloads hold more than 2^53 of read_IOPS on disk /dev/vda")

	n := mustNode(t, `{"volumes":{},"disks":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":10}],"storage":0}`, "")
	_, _, err = n.Recompute(ws, nil)
	require.ErrorContains(t, err, "more than 2^53 of read_IOPS")
	_, err = nextUsage(n, nil, nil, mustJSON(t, ws), true, true)
	require.ErrorContains(t, err, "more than 2^53 of read_IOPS")
}

func TestSumsOfStoredWorkloadsSaturateInsteadOfWrapping(t *testing.T) {
	require.Equal(t, int64(math.MaxInt64), satAdd(math.MaxInt64, 1))
	require.Equal(t, int64(-math.MaxInt64), satAdd(-math.MaxInt64, -5))
	require.Equal(t, Quota{math.MaxInt64, 0, 0, 0}, Quota{math.MaxInt64 - 1, 0, 0, 0}.Plus(Quota{2, 0, 0, 0}))

	// a stored workload of 2,048 bindings of 2^53 bytes: their total would
	// wrap to 0 in int64.
	var specs []string
	for i := range 2048 {
		specs = append(specs, fmt.Sprintf(`"AUTO:/v%d:rw:9007199254740992:0:0:0:0"`, i))
	}
	list := "[" + strings.Join(specs, ",") + "]"
	old := mustWorkload(t, `{"volumes_request":`+list+`,"volumes_limit":`+list+`,"storage_request":5,"storage_limit":5}`)
	require.Equal(t, int64(math.MaxInt64), sizeOf(old.VolumesRequest))
	_, err := mergeRequest(old, mustRequest(t, `{"storage":"1"}`, true))
	requireClass(t, err, types.InvalidArgument)
	require.ErrorContains(t, err, "storage request adds up to more than 8 PiB")

	// 2,049 disk entries of one device in one workload
	var disks []string
	for range 2049 {
		disks = append(disks, `{"device":"/dev/vda","mounts":["/"],"read_IOPS":9007199254740992}`)
	}
	w := mustWorkload(t, `{"disks_request":[`+strings.Join(disks, ",")+`]}`)
	d := diffWorkloads(&Workload{}, w)
	require.Equal(t, int64(math.MaxInt64), d.DisksRequest[0].ReadIOPS, "held at the limit, not wrapped")
	_, err = sumWorkloads([]*Workload{d})
	require.ErrorContains(t, err, "more than 2^53 of read_IOPS on disk /dev/vda")
}

func TestDevicePathsAreChecked(t *testing.T) {
	for _, tt := range []struct{ name, request, want string }{
		{"a volume device holding a colon", `{"volumes":["/a:b:1G"]}`, `volume device "/a:b" holds ':'`},
		{"a relative volume device", `{"volumes":["data0:1G"]}`, `volume device "data0" is not an absolute path`},
		{"a volume device holding a NUL", "{\"volumes\":[\"/data\\u00000:1G\"]}", "holds a control character"},
		{"a volume device that is not clean", `{"volumes":["/data0/../etc:1G"]}`, `volume device "/data0/../etc" is not a clean path (it would be /etc)`},
		{"AUTO as a volume device", `{"volumes":["AUTO:1G"]}`, `volume device "AUTO": AUTO is what a binding asks the scheduler for`},
		{"a trailing slash", `{"volumes":{"/data0/":1}}`, `is not a clean path`},
		{"a disk device that is relative", `{"disks":["vda:/:1:1:1:1"]}`, `disk device "vda" is not an absolute path`},
		{"a mount holding a control character", "{\"disks\":[\"/dev/vda:/da\\u0007ta:1:1:1:1\"]}", "mount \"/da\\ata\" holds a control character"},
		{"a mount that is not clean", `{"disks":[{"device":"/dev/vda","mounts":["/data/./x"]}]}`, `mount "/data/./x" is not a clean path`},
	} {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			m, err := types.DecodeObject(raw(tt.request), "resource")
			require.NoError(t, err)
			_, err = ParseNodeRequest(m, false)
			requireClass(t, err, types.InvalidArgument)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "\n")
		})
	}
	t.Run("a stored snapshot with a bad device is refused too", func(t *testing.T) {
		_, err := Restore(raw(`{"volumes":{"data0":1},"disks":[],"storage":1}`), nil)
		require.ErrorContains(t, err, `volume device "data0" is not an absolute path`)
	})
	for _, ok := range []string{"/", "/data0", "/dev/disk/by-id/nvme-x_1", "/data/AUTOMATIC"} {
		require.NoError(t, CheckDevicePath("device", ok), ok)
	}
}

func TestNegativeDeltas(t *testing.T) {
	node := func(t *testing.T) *Node {
		return mustNode(t,
			`{"volumes":{"/data0":1099511627776},"disks":[{"device":"/dev/sda","mounts":["/data0"],"read_IOPS":1000,"write_IOPS":1000,"read_bps":0,"write_bps":0}],"storage":2199023255552}`,
			`{"volumes":{"/data0":536870912000},"disks":[{"device":"/dev/sda","mounts":["/data0"],"read_IOPS":100}],"storage":536870912000}`)
	}
	shrink := `{"volumes":["/data0:-100G"],"storage":"-10G","disks":["/dev/sda:/data0:-100:0:0:0"]}`
	t.Run("eru-cli's node set --delta with negative values shrinks the node, incr true", func(t *testing.T) {
		out, err := setCapacity(node(t), nil, raw(shrink), true, true)
		require.NoError(t, err)
		require.Equal(t, tib-100*gib, out.Capacity.Volumes["/data0"])
		require.Equal(t, 2*tib-110*gib, out.Capacity.Storage, "the volume's change moves storage with it")
		require.Equal(t, int64(900), out.Capacity.Disks[0].ReadIOPS)
	})
	t.Run("negative values subtracted (incr false) grow it", func(t *testing.T) {
		out, err := setCapacity(node(t), nil, raw(shrink), true, false)
		require.NoError(t, err)
		require.Equal(t, tib+100*gib, out.Capacity.Volumes["/data0"])
		require.Equal(t, int64(1100), out.Capacity.Disks[0].ReadIOPS)
	})
	for _, tt := range []struct{ name, request, want string }{
		{"a volume below its usage", `{"volumes":["/data0:-600G"]}`,
			"volume /data0: capacity 1 TiB (1099511627776 bytes) - 644245094400 would be 424 GiB, below its usage 500 GiB (536870912000 bytes)"},
		{"storage below its usage", `{"storage":"-1.6T"}`,
			"storage: capacity 2 TiB (2199023255552 bytes) - 1759218604441 would be 409.6 GiB, below its usage 500 GiB (536870912000 bytes)"},
		{"a disk quota below its usage", `{"disks":["/dev/sda:/data0:-950:0:0:0"]}`,
			"disk /dev/sda: read_IOPS 1000 - 950 would be 50, below its usage 100"},
		{"a volume below zero", `{"volumes":["/data0:-2T"]}`, "volume /data0: capacity 1 TiB (1099511627776 bytes) - 2199023255552 would be below zero"},
		{"a volume the node does not have", `{"volumes":["/data9:-1G"]}`, "volume /data9: the node has no such volume to shrink by 1 GiB"},
	} {
		t.Run(tt.name+" is refused naming the device and the amounts", func(t *testing.T) {
			_, err := setCapacity(node(t), nil, raw(tt.request), true, true)
			requireClass(t, err, types.FailedPrecondition)
			require.EqualError(t, err, tt.want)
		})
	}
	t.Run("a negative value in absolute mode is refused", func(t *testing.T) {
		_, err := setCapacity(node(t), nil, raw(`{"volumes":["/data0:-1G"]}`), false, true)
		requireClass(t, err, types.InvalidArgument)
		require.ErrorContains(t, err, `size "-1G" is negative`)
	})
	t.Run("a delta taking a disk's quotas to 0 keeps the disk and its mounts", func(t *testing.T) {
		n := mustNode(t,
			`{"volumes":{"/data0":100},"disks":[{"device":"/dev/root","mounts":["/"],"read_IOPS":1000},{"device":"/dev/sda","mounts":["/data0"],"read_IOPS":10}],"storage":100}`, "")
		out, err := setCapacity(n, nil, raw(`{"disks":["/dev/sda:/data0:10:0:0:0"]}`), true, false)
		require.NoError(t, err)
		require.Equal(t, []Disk{
			{Device: "/dev/root", Mounts: []string{"/"}, ReadIOPS: 1000},
			{Device: "/dev/sda", Mounts: []string{"/data0"}},
		}, out.Capacity.Disks)
		// a mount binding under /data0 still draws on /dev/sda, which has nothing left.
		got, err := out.DeployCapacity(context.Background(), mustRequest(t, `{"volumes":["/data0/x:/x:rw:0:1:0:0:0"]}`, false), 10)
		require.NoError(t, err)
		require.Zero(t, got.Capacity, "its mounts do not fall back to /dev/root's quota")
	})
}

func TestPlanSearchStopsAtItsDeadline(t *testing.T) {
	n := benchHostT(t, 64)
	var specs []string
	for i := range 500 {
		specs = append(specs, fmt.Sprintf(`"AUTO:/v%d:rw:1"`, i))
	}
	w := mustRequest(t, `{"volumes":[`+strings.Join(specs, ",")+`]}`, false)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for name, ctx := range map[string]context.Context{"cancelled": done, "past its deadline": expired} {
		t.Run("a capacity query whose context is "+name+" fails with deadline_exceeded", func(t *testing.T) {
			_, err := n.DeployCapacity(ctx, w, 10000)
			requireClass(t, err, types.DeadlineExceeded)
			require.ErrorContains(t, err, "the plan search stopped at the call's deadline")
		})
		t.Run("a deploy whose context is "+name+" fails with deadline_exceeded", func(t *testing.T) {
			_, err := n.Deploy(ctx, w, 5000, 10000)
			requireClass(t, err, types.DeadlineExceeded)
		})
	}
	t.Run("without a deadline the same search finishes", func(t *testing.T) {
		got, err := n.DeployCapacity(context.Background(), mustRequest(t, `{"volumes":["AUTO:/v:rw:1"]}`, false), 100)
		require.NoError(t, err)
		require.Equal(t, 100, got.Capacity)
	})
}

// benchHostT is benchHost for tests.
func benchHostT(t *testing.T, n int) *Node {
	t.Helper()
	node := benchHost(n)
	require.NoError(t, node.Validate())
	return node
}

func TestRefusalsNameTheLimit(t *testing.T) {
	ctx := context.Background()
	t.Run("the storage budget in human units and bytes", func(t *testing.T) {
		n := mustNode(t, `{"volumes":{},"disks":[],"storage":1649267441664}`, "")
		_, err := n.Deploy(ctx, mustRequest(t, `{"storage":"1T"}`, false), 2, 10)
		requireClass(t, err, types.ResourceExhausted)
		require.EqualError(t, err, "storage budget: 2 TiB asked (2 workloads of 1 TiB), 1.5 TiB left (1649267441664 bytes)")
	})
	t.Run("a normal binding no volume holds", func(t *testing.T) {
		n := mustNode(t, `{"volumes":{"/data0":53687091200},"disks":[],"storage":1099511627776}`, "")
		_, err := n.Deploy(ctx, mustRequest(t, `{"volumes":["AUTO:/data:rw:100G"]}`, false), 1, 10)
		require.EqualError(t, err, "need 1 plans, have 0: plan 1: volume AUTO:/data:rw:107374182400:0:0:0:0 (100 GiB): "+
			"no volume has 100 GiB free: the most is 50 GiB on /data0 (53687091200 bytes)")
	})
	t.Run("a monopoly group no unused volume holds", func(t *testing.T) {
		n := mustNode(t, `{"volumes":{"/data0":53687091200},"disks":[],"storage":1099511627776}`, "")
		_, err := n.Deploy(ctx, mustRequest(t, `{"volumes":["AUTO:/m:mrw:100G"]}`, false), 1, 10)
		require.EqualError(t, err, "need 1 plans, have 0: plan 1: volume AUTO:/m:mrw:107374182400:0:0:0:0 (100 GiB): "+
			"its monopoly group needs an unused volume of 100 GiB: the largest is /data0 with 50 GiB (53687091200 bytes)")
	})
	t.Run("a mount binding's disk quota", func(t *testing.T) {
		n := mustNode(t, `{"volumes":{},"disks":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":150}],"storage":1}`, "")
		_, err := n.Deploy(ctx, mustRequest(t, `{"volumes":["/var/log:/log:rw:0:100:0:0:0"]}`, false), 2, 10)
		require.EqualError(t, err, "need 2 plans, have 1: plan 2: volume /var/log:/log:rw:0:100:0:0:0 (0 B): disk /dev/vda has 50:0:0:0 (asked 100:0:0:0) of IO quota left")
	})
	t.Run("a node storage has never seen", func(t *testing.T) {
		_, err := Rules{}.Empty().Deploy(ctx, mustRequest(t, `{"volumes":["AUTO:/d:rw:1G"]}`, false), 1, 10)
		requireClass(t, err, types.ResourceExhausted)
		require.EqualError(t, err, "no storage record for this node: add it (add-node) or set its capacity first")
		wls, err := Rules{}.Empty().Deploy(ctx, mustRequest(t, `{}`, false), 1, 10)
		require.NoError(t, err, "a request asking nothing of storage deploys anywhere")
		require.Len(t, wls, 1)
		_, err = Rules{}.Empty().Realloc(ctx, &Workload{}, mustRequest(t, `{"volumes":["AUTO:/d:rw:1G"]}`, true))
		require.EqualError(t, err, "no storage record for this node: add it (add-node) or set its capacity first")
		_, err = Rules{}.Empty().Realloc(ctx, &Workload{}, mustRequest(t, `{}`, true))
		require.NoError(t, err, "a realloc asking nothing of storage goes through")
	})
	t.Run("Human writes binary units", func(t *testing.T) {
		for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1 << 30: "1 GiB", 1649267441664: "1.5 TiB", -(1 << 20): "-1 MiB"} {
			require.Equal(t, want, Human(n))
		}
	})
}

// TestZeroByteDeltaRoundTrips checks that a realloc delta's count change
// survives core storing and handing it back as JSON.
func TestZeroByteDeltaRoundTrips(t *testing.T) {
	d := &Workload{VolumePlanRequest: VolumePlan{}, ZeroByte: map[string]int64{"/data0": -1}}
	data, err := json.Marshal(d)
	require.NoError(t, err)
	require.Contains(t, string(data), `"zero_byte_bindings":{"/data0":-1}`)
	back, err := DecodeWorkload(data)
	require.NoError(t, err)
	require.Equal(t, d.ZeroByte, back.ZeroByte)
	plain, err := json.Marshal(&Workload{})
	require.NoError(t, err)
	require.NotContains(t, string(plain), ZeroByteKey, "a stored workload carries no count: its plan entries are counted")
}

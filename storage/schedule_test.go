package storage

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// fourVolumes has three used devices (free 300, 500, 500) and one unused
// (1000).
func fourVolumes(t testing.TB) *Node {
	return mustNode(t,
		`{"volumes":{"/d0":1000,"/d1":1000,"/d2":1000,"/d3":1000},"disks":[],"storage":100000}`,
		`{"volumes":{"/d0":700,"/d1":500,"/d2":500,"/d3":0},"disks":[],"storage":1700}`)
}

// unusedLadder has four unused devices of 100, 200, 300 and 400 bytes.
func unusedLadder(t testing.TB) *Node {
	return mustNode(t, `{"volumes":{"/d3":400,"/d1":200,"/d0":100,"/d2":300},"disks":[],"storage":100000}`, "")
}

func TestScheduleExamples(t *testing.T) {
	tests := []struct {
		name     string
		node     func(testing.TB) *Node
		bindings []string
		count    int
		want     [][]placement
	}{
		{
			name:     "a normal binding goes to the used device with the least free space that holds it",
			node:     fourVolumes,
			bindings: []string{"AUTO:/a:rw:200"},
			count:    1,
			want:     [][]placement{{{"/d0", 200, -1}}},
		},
		{
			name:     "further plans go on the shrinking devices, ties by name",
			node:     fourVolumes,
			bindings: []string{"AUTO:/a:rw:200"},
			count:    3,
			want:     [][]placement{{{"/d0", 200, -1}}, {{"/d1", 200, -1}}, {{"/d1", 200, -1}}},
		},
		{
			name:     "bindings are placed smallest first and an unused device is opened only when the used ones run out",
			node:     fourVolumes,
			bindings: []string{"AUTO:/big:rw:400", "AUTO:/small:rw:200"},
			count:    2,
			want: [][]placement{
				{{"/d1", 400, -1}, {"/d0", 200, -1}},
				{{"/d3", 400, -1}, {"/d2", 200, -1}},
			},
		},
		{
			name: "a monopoly group takes the smallest unused device that holds it, split in proportion, the remainder to the first",
			node: func(t testing.TB) *Node {
				return mustNode(t, `{"volumes":{"/d0":100,"/d1":500,"/d2":1000},"disks":[],"storage":5000}`, "")
			},
			bindings: []string{"AUTO:/b:rwm:200", "AUTO:/a:rwm:100"},
			count:    1,
			want:     [][]placement{{{"/d1", 333, -1}, {"/d1", 167, -1}}},
		},
		{
			name:     "a 1000-byte device split among 100 and 200 gives 334 and 666",
			node:     func(t testing.TB) *Node { return mustNode(t, `{"volumes":{"/d0":1000},"disks":[],"storage":5000}`, "") },
			bindings: []string{"AUTO:/a:rwm:100", "AUTO:/b:rwm:200"},
			count:    1,
			want:     [][]placement{{{"/d0", 334, -1}, {"/d0", 666, -1}}},
		},
		{
			name:     "equal monopoly sizes give the remainder to the first by full form",
			node:     func(t testing.TB) *Node { return mustNode(t, `{"volumes":{"/d0":1000},"disks":[],"storage":5000}`, "") },
			bindings: []string{"AUTO:/c:m:1", "AUTO:/a:m:1", "AUTO:/b:m:1"},
			count:    1,
			want:     [][]placement{{{"/d0", 333, -1}, {"/d0", 334, -1}, {"/d0", 333, -1}}},
		},
		{
			name:     "a monopoly group never takes a used device",
			node:     fourVolumes,
			bindings: []string{"AUTO:/m:rwm:10"},
			count:    2,
			want:     [][]placement{{{"/d3", 1000, -1}}},
		},
		{
			name:     "with a count of 2 only the smallest unused device is opened for normal bindings",
			node:     unusedLadder,
			bindings: []string{"AUTO:/n:rw:50", "AUTO:/m:rwm:100"},
			count:    2,
			want: [][]placement{
				{{"/d0", 50, -1}, {"/d1", 200, -1}},
				{{"/d0", 50, -1}, {"/d2", 300, -1}},
			},
		},
		{
			name:     "with a larger count devices are converted while monopoly capacity exceeds normal capacity",
			node:     unusedLadder,
			bindings: []string{"AUTO:/n:rw:50", "AUTO:/m:rwm:100"},
			count:    10,
			want: [][]placement{
				{{"/d0", 50, -1}, {"/d2", 300, -1}},
				{{"/d0", 50, -1}, {"/d3", 400, -1}},
			},
		},
		{
			name: "an unlimited binding goes to the device with the most space left after the other passes",
			node: func(t testing.TB) *Node {
				return mustNode(t, `{"volumes":{"/d0":1000,"/d1":1000,"/d2":400},"disks":[],"storage":5000}`,
					`{"volumes":{"/d0":700,"/d1":500},"disks":[],"storage":1200}`)
			},
			bindings: []string{"AUTO:/n:rw:200", "AUTO:/u"},
			count:    2,
			want: [][]placement{
				{{"/d0", 200, -1}, {"/d2", 0, -1}},
				{{"/d1", 200, -1}, {"/d2", 0, -1}},
			},
		},
		{
			name: "unlimited bindings alone take the freest device, ties by name",
			node: func(t testing.TB) *Node {
				return mustNode(t, `{"volumes":{"/b":500,"/a":500},"disks":[],"storage":5000}`, "")
			},
			bindings: []string{"AUTO:/u", ":/v"},
			count:    2,
			want:     [][]placement{{{"/a", 0, -1}, {"/a", 0, -1}}, {{"/a", 0, -1}, {"/a", 0, -1}}},
		},
		{
			name: "IO quota moves a normal binding to a device whose disk has quota left",
			node: func(t testing.TB) *Node {
				return mustNode(t, `{"volumes":{"/data0":1000,"/data1":1000},
					"disks":[{"device":"/dev/a","mounts":["/data0"],"read_IOPS":100},{"device":"/dev/b","mounts":["/data1"],"read_IOPS":50}],"storage":5000}`,
					`{"volumes":{"/data0":1,"/data1":1},"disks":[],"storage":2}`)
			},
			bindings: []string{"AUTO:/v:rw:10:40:0:0:0"},
			count:    3,
			want:     [][]placement{{{"/data0", 10, 0}}, {{"/data0", 10, 0}}, {{"/data1", 10, 1}}},
		},
		{
			name: "a mount binding is not placed and its IO goes to the disk of the longest mount prefix",
			node: func(t testing.TB) *Node {
				return mustNode(t, `{"volumes":{},"disks":[{"device":"/dev/root","mounts":["/"],"read_IOPS":1000},
					{"device":"/dev/data","mounts":["/data"],"read_IOPS":100}],"storage":5000}`, "")
			},
			bindings: []string{"/data/x:/x:rw:0:30:0:0:0", "/database/y:/y:rw:0:30:0:0:0", "/data:/z"},
			count:    1,
			want:     [][]placement{{{"", 0, 1}, {"", 0, 0}, {"", 0, -1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.node(t)
			plans, _, err := Schedule(context.Background(), hostOf(n), &n.Capacity, mustBindings(t, tt.bindings...), tt.count, tt.count)
			require.NoError(t, err)
			require.Equal(t, tt.want, placements(plans))
		})
	}
}

// sharedDisk has two used devices and a small unused one on disk /dev/b,
// whose read IOPS left hold two normal bindings, and two larger unused
// devices on /dev/c.
func sharedDisk(t testing.TB) *Node {
	return mustNode(t, `{"volumes":{"/u0":2000,"/u1":2000,"/s":100,"/x":1000,"/y":1000},
		"disks":[{"device":"/dev/b","mounts":["/u0","/u1","/s"],"read_IOPS":10},{"device":"/dev/c","mounts":["/x","/y"],"read_IOPS":100}],
		"storage":100000}`,
		`{"volumes":{"/u0":1000,"/u1":1000},"disks":[],"storage":2000}`)
}

func TestScheduleFindsWhatCountPromisesWhenIOIsShared(t *testing.T) {
	n := sharedDisk(t)
	bs := mustBindings(t, "AUTO:/n:rw:500:5:0:0:0", "AUTO:/m:mrw:50:3:0:0:0")
	count, err := Count(context.Background(), hostOf(n), &n.Capacity, bs, 100, 100)
	require.NoError(t, err)
	require.Equal(t, 2, count)

	t.Run("a deploy of the count answered finds its plans: /s, too small for a normal binding, stays whole for a group", func(t *testing.T) {
		plans, _, err := Schedule(context.Background(), hostOf(n), &n.Capacity, bs, 2, 100)
		require.NoError(t, err)
		require.Equal(t, [][]placement{
			{{"/u0", 500, 0}, {"/s", 100, 0}},
			{{"/x", 500, 1}, {"/y", 1000, 1}},
		}, placements(plans))
	})
	t.Run("a deploy of one still opens nothing", func(t *testing.T) {
		plans, _, err := Schedule(context.Background(), hostOf(n), &n.Capacity, bs, 1, 1)
		require.NoError(t, err)
		require.Equal(t, [][]placement{{{"/u0", 500, 0}, {"/s", 100, 0}}}, placements(plans))
	})
	t.Run("a deploy of more than fits is short, not wrong", func(t *testing.T) {
		plans, _, err := Schedule(context.Background(), hostOf(n), &n.Capacity, bs, 3, 3)
		require.NoError(t, err)
		require.Len(t, plans, 2)
	})
}

func TestCountExamples(t *testing.T) {
	ioNode := func(t testing.TB) *Node {
		return mustNode(t, `{"volumes":{"/data0":1000,"/data1":1000},
			"disks":[{"device":"/dev/a","mounts":["/data0"],"read_IOPS":100},{"device":"/dev/b","mounts":["/data1"],"read_IOPS":50},
			{"device":"/dev/root","mounts":["/"],"read_IOPS":1000}],"storage":5000}`,
			`{"volumes":{"/data0":1,"/data1":1},"disks":[],"storage":2}`)
	}
	tests := []struct {
		name     string
		node     func(testing.TB) *Node
		bindings []string
		limit    int
		want     int
	}{
		{"normal bindings count every plan the used and converted devices hold", fourVolumes, []string{"AUTO:/a:rw:200"}, 100, 1 + 2 + 2 + 5},
		{"the count stops at the limit", fourVolumes, []string{"AUTO:/a:rw:200"}, 4, 4},
		{"a monopoly group counts the unused devices", fourVolumes, []string{"AUTO:/m:rwm:1000"}, 100, 1},
		{"a monopoly group larger than every unused device fits nowhere", fourVolumes, []string{"AUTO:/m:rwm:1001"}, 100, 0},
		{"normal and monopoly bindings together weigh the node's full potential", unusedLadder, []string{"AUTO:/n:rw:50", "AUTO:/m:rwm:100"}, 10, 2},
		{"IO quota exhaustion limits the plans", ioNode, []string{"AUTO:/v:rw:10:40:0:0:0"}, 100, 3},
		{"mount IO quota is counted on its covering disk", ioNode, []string{"/data0/x:/x:rw:0:30:0:0:0"}, 100, 3},
		{"/data0 does not cover /data00", ioNode, []string{"/data00/x:/x:rw:0:30:0:0:0"}, 100, 33},
		{"a node without volumes holds no placed binding", func(t testing.TB) *Node { return NewNode() }, []string{"AUTO:/a"}, 10, 0},
		{"a zero limit counts nothing", fourVolumes, []string{"AUTO:/a:rw:1"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.node(t)
			got, err := Count(context.Background(), hostOf(n), &n.Capacity, mustBindings(t, tt.bindings...), tt.limit, tt.limit)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	t.Run("a mount asking IO on a path no disk covers is an error, not a crash", func(t *testing.T) {
		n := mustNode(t, `{"volumes":{},"disks":[{"device":"/dev/data","mounts":["/data"],"read_IOPS":100}],"storage":5}`, "")
		_, err := Count(context.Background(), hostOf(n), &n.Capacity, mustBindings(t, "/etc/x:/x:rw:0:1:0:0:0"), 10, 10)
		require.ErrorContains(t, err, "no disk's mounts cover /etc/x")
	})
}

func TestSplitSizes(t *testing.T) {
	tests := []struct {
		name  string
		size  int64
		sizes []int64
		want  []int64
	}{
		{"one binding takes the whole device", 1000, []int64{1}, []int64{1000}},
		{"the remainder goes to the first", 1000, []int64{100, 200}, []int64{334, 666}},
		{"sizes of zero give the first everything", 1000, []int64{0, 0}, []int64{1000, 0}},
		{"8 PiB devices do not overflow", 8 * pib, []int64{8 * pib, 8*pib - 1}, []int64{4*pib + 1, 4*pib - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitSizes(tt.size, tt.sizes)
			require.Equal(t, tt.want, got)
			var sum int64
			for _, s := range got {
				sum += s
			}
			require.Equal(t, tt.size, sum)
		})
	}
}

func TestDeployCapacity(t *testing.T) {
	budgetNode := func(t testing.TB) *Node {
		return mustNode(t, `{"volumes":{"/d0":10000},"disks":[],"storage":1000}`, `{"volumes":{},"disks":[],"storage":100}`)
	}
	tests := []struct {
		name      string
		node      func(testing.TB) *Node
		request   string
		maxDeploy int
		want      types.NodeCapacity
	}{
		{
			name:      "storage alone is capped by the budget left",
			node:      budgetNode,
			request:   `{"storage":"300"}`,
			maxDeploy: 10,
			want:      types.NodeCapacity{Capacity: 3, Usage: 0.1, Rate: 0.3, Weight: 1},
		},
		{
			name:      "the budget never raises the count above max_deploy_count",
			node:      budgetNode,
			request:   `{"storage":"300"}`,
			maxDeploy: 2,
			want:      types.NodeCapacity{Capacity: 2, Usage: 0.1, Rate: 0.3, Weight: 1},
		},
		{
			name:      "the budget caps what the volumes could hold",
			node:      budgetNode,
			request:   `{"volumes":["AUTO:/a:rw:100"]}`,
			maxDeploy: 50,
			want:      types.NodeCapacity{Capacity: 9, Usage: 0, Rate: 0.01, Weight: 1},
		},
		{
			name:      "the volumes cap what the budget could hold",
			node:      budgetNode,
			request:   `{"volumes":["AUTO:/a:rw:6000"]}`,
			maxDeploy: 50,
			want:      types.NodeCapacity{Capacity: 0, Usage: 0, Rate: 0.6, Weight: 1},
		},
		{
			name:      "a request with nothing to place skips the scheduler and reports max_deploy_count",
			node:      func(t testing.TB) *Node { return NewNode() },
			request:   `{"volumes":["/host:/dst"]}`,
			maxDeploy: 7,
			want:      types.NodeCapacity{Capacity: 7, Weight: 1},
		},
		{
			name:      "an empty request reports max_deploy_count",
			node:      fourVolumes,
			request:   `{}`,
			maxDeploy: 7,
			want:      types.NodeCapacity{Capacity: 7, Usage: 0.425, Weight: 1},
		},
		{
			name:      "a node without volumes holds no AUTO binding",
			node:      func(t testing.TB) *Node { return NewNode() },
			request:   `{"volumes":["AUTO:/a:rw:1"]}`,
			maxDeploy: 7,
			want:      types.NodeCapacity{Capacity: 0, Weight: 1},
		},
		{
			name:      "a mount no disk covers fits nowhere",
			node:      func(t testing.TB) *Node { return NewNode() },
			request:   `{"volumes":["/host:/dst:rw:0:1:0:0:0"]}`,
			maxDeploy: 7,
			want:      types.NodeCapacity{Capacity: 0, Weight: 1},
		},
		{
			name: "a budget used up fits nothing",
			node: func(t testing.TB) *Node {
				return mustNode(t, `{"volumes":{},"disks":[],"storage":100}`, `{"volumes":{},"disks":[],"storage":100}`)
			},
			request:   `{"storage":"1"}`,
			maxDeploy: 7,
			want:      types.NodeCapacity{Capacity: 0, Usage: 1, Rate: 0.01, Weight: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.node(t).DeployCapacity(context.Background(), mustRequest(t, tt.request, false), tt.maxDeploy)
			require.NoError(t, err)
			require.Equal(t, tt.want.Capacity, got.Capacity, "capacity")
			require.InDelta(t, tt.want.Usage, got.Usage, 1e-9, "usage")
			require.InDelta(t, tt.want.Rate, got.Rate, 1e-9, "rate")
			require.Equal(t, tt.want.Weight, got.Weight, "weight")
		})
	}
}

func TestDeploy(t *testing.T) {
	t.Run("the stored workload docs/storage.md shows comes out of a 100GiB request", func(t *testing.T) {
		n, err := AddNode(raw(`{"volumes":["/data0:1T","/data1:1T"],"disks":["/dev/vda:/,/data0:1000:1000:1G:1G"],"storage":"2T"}`), nil)
		require.NoError(t, err)
		wls, err := n.Deploy(context.Background(), mustRequest(t, `{"volumes":["AUTO:/data:rw:100GiB"]}`, false), 1, 10)
		require.NoError(t, err)
		require.Len(t, wls, 1)
		got, err := json.Marshal(wls[0])
		require.NoError(t, err)
		require.JSONEq(t, `{
		  "volumes_request": ["AUTO:/data:rw:107374182400:0:0:0:0"],
		  "volumes_limit":   ["AUTO:/data:rw:107374182400:0:0:0:0"],
		  "volume_plan_request": {"AUTO:/data:rw:107374182400:0:0:0:0": {"/data0": 107374182400}},
		  "volume_plan_limit":   {"AUTO:/data:rw:107374182400:0:0:0:0": {"/data0": 107374182400}},
		  "storage_request": 107374182400,
		  "storage_limit": 107374182400,
		  "disks_request": [{"device": "/dev/vda", "mounts": ["/", "/data0"], "read_IOPS": 0, "write_IOPS": 0, "read_bps": 0, "write_bps": 0}],
		  "disks_limit":   [{"device": "/dev/vda", "mounts": ["/", "/data0"], "read_IOPS": 0, "write_IOPS": 0, "read_bps": 0, "write_bps": 0}]
		}`, string(got))
		p, err := wls[0].EngineParams()
		require.NoError(t, err)
		require.Equal(t, &EngineParams{Volumes: []string{"/data0:/data:rw:107374182400"}, Storage: 100 * gib, IOPSOptions: map[string]string{}}, p)
	})

	t.Run("deploy opens no more unused devices than the count needs", func(t *testing.T) {
		n := unusedLadder(t)
		wls, err := n.Deploy(context.Background(), mustRequest(t, `{"volumes":["AUTO:/n:rw:50","AUTO:/m:rwm:100"]}`, false), 2, 10)
		require.NoError(t, err)
		after := usageAfter(t, n, wls...)
		require.Equal(t, map[string]int64{"/d0": 100, "/d1": 200, "/d2": 300, "/d3": 0}, after.Usage.Volumes)
		require.Equal(t, int64(2*150), after.Usage.Storage)
		more, err := after.Deploy(context.Background(), mustRequest(t, `{"volumes":["AUTO:/m:rwm:400"]}`, false), 1, 10)
		require.NoError(t, err, "the largest device was kept whole for a later monopoly request")
		require.Equal(t, VolumePlan{"AUTO:/m:mrw:400:0:0:0:0": {"/d3": 400}}, more[0].VolumePlanRequest)
	})

	t.Run("a monopoly limit plan is at least the planned share and engine params carry IO options", func(t *testing.T) {
		n := mustNode(t, `{"volumes":{"/d0":1000},"disks":[{"device":"/dev/a","mounts":["/d0"],"read_IOPS":10,"write_IOPS":10}],"storage":5000}`, "")
		req := mustRequest(t, `{"volumes-request":["AUTO:/m:rwm:100:1:2:0:0"],"volumes":["AUTO:/m:mrw:2000:3:2:0:0"]}`, false)
		wls, err := n.Deploy(context.Background(), req, 1, 10)
		require.NoError(t, err)
		w := wls[0]
		require.Equal(t, VolumePlan{"AUTO:/m:mrw:100:1:2:0:0": {"/d0": 1000}}, w.VolumePlanRequest)
		require.Equal(t, VolumePlan{"AUTO:/m:mrw:2000:3:2:0:0": {"/d0": 2000}}, w.VolumePlanLimit)
		require.Equal(t, []Disk{{Device: "/dev/a", Mounts: []string{"/d0"}, ReadIOPS: 1, WriteIOPS: 2}}, w.DisksRequest)
		require.Equal(t, &EngineParams{
			Volumes:     []string{"/d0:/m:rw:2000:3:2:0:0"},
			Storage:     2000,
			IOPSOptions: map[string]string{"/dev/a": "3:2:0:0"},
		}, mustParams(t, w))
		after := usageAfter(t, n, w)
		require.Equal(t, int64(1000), after.Usage.Volumes["/d0"], "the whole device is charged")
		require.Equal(t, Quota{1, 2, 0, 0}, after.Usage.Disks[0].Quota())
	})

	t.Run("a request with nothing to place gives count plain workloads", func(t *testing.T) {
		wls, err := NewNode().Deploy(context.Background(), mustRequest(t, `{"volumes":["/h:/d"]}`, false), 3, 10)
		require.NoError(t, err)
		require.Len(t, wls, 3)
		for _, w := range wls {
			require.Empty(t, w.VolumePlanRequest)
			require.Equal(t, []string{"/h:/d:rw:0"}, mustParams(t, w).Volumes)
		}
	})

	refusals := []struct {
		name      string
		node      func(testing.TB) *Node
		request   string
		count     int
		class     types.Class
		errHas    string
		maxDeploy int
	}{
		{"a count of zero", fourVolumes, `{}`, 0, types.InvalidArgument, "want at least 1", 10},
		{"a count above max_deploy_count", fourVolumes, `{}`, 11, types.ResourceExhausted, "above scheduler.max_deploy_count", 10},
		{"a count the budget cannot hold", fourVolumes, `{"storage":"50000"}`, 2, types.ResourceExhausted, "storage budget", 10},
		{"a count the devices cannot hold", fourVolumes, `{"volumes":["AUTO:/m:rwm:1"]}`, 2, types.ResourceExhausted, "need 2 plans, have 1", 10},
		{"a mount no disk covers", fourVolumes, `{"volumes":["/x:/x:rw:0:1:0:0:0"]}`, 1, types.InvalidArgument, "no disk's mounts cover", 10},
	}
	for _, tt := range refusals {
		t.Run("deploying "+tt.name+" is refused", func(t *testing.T) {
			_, err := tt.node(t).Deploy(context.Background(), mustRequest(t, tt.request, false), tt.count, tt.maxDeploy)
			requireClass(t, err, tt.class)
			require.ErrorContains(t, err, tt.errHas)
		})
	}
}

// TestConversionWithIOQuotaTriesFewerDevices holds a node where opening an
// unused device lets the smallest normal binding take the IO quota a larger
// one needs on a used device: with no device opened two plans fit (the
// normal capacity, 2, does not fall short of the monopoly capacity, 2, so
// the spec's rule converts nothing), with one or two opened none does.
func TestConversionWithIOQuotaTriesFewerDevices(t *testing.T) {
	node := func(t testing.TB) *Node {
		return mustNode(t,
			`{"volumes":{"/d0":20,"/d1":30,"/d2":100,"/d3":100},"disks":[`+
				`{"device":"/dev/a","mounts":["/"],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0},`+
				`{"device":"/dev/b","mounts":["/d1","/d3"],"read_IOPS":25,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":100000}`,
			`{"volumes":{"/d1":3,"/d2":34},"disks":[`+
				`{"device":"/dev/a","mounts":["/"],"read_IOPS":3,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":37}`)
	}
	bindings := []string{"AUTO:/n0:rw:5:7:0:0:0", "AUTO:/n1:rw:5", "AUTO:/n2:rw:30:1:0:0:0", "AUTO:/m0:mrw:9"}
	twoPlans := [][]placement{
		{{"/d1", 5, 1}, {"/d1", 5, 1}, {"/d2", 30, 0}, {"/d0", 20, 0}},
		{{"/d1", 5, 1}, {"/d1", 5, 1}, {"/d2", 30, 0}, {"/d3", 100, 1}},
	}
	tests := []struct {
		name  string
		limit int
		most  int
		count int // the plans asked of Schedule; 0 asks Count only
		want  int
		plans [][]placement
	}{
		{name: "a capacity query answers the two plans that open no unused device", limit: 3, most: 3, want: 2},
		{name: "a capacity query capped below the deploy limit answers them too", limit: 2, most: 3, want: 2},
		{name: "a deploy of two places them on the used devices and gives each group an unused one", limit: 3, most: 3, count: 2, want: 2, plans: twoPlans},
		{name: "a deploy of three finds only the same two", limit: 3, most: 3, count: 3, want: 2, plans: twoPlans},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := node(t)
			bs := mustBindings(t, bindings...)
			if tt.count == 0 {
				got, err := Count(context.Background(), hostOf(n), &n.Capacity, bs, tt.limit, tt.most)
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			plans, _, err := Schedule(context.Background(), hostOf(n), &n.Capacity, bs, tt.count, tt.most)
			require.NoError(t, err)
			require.Len(t, plans, tt.want)
			require.Equal(t, tt.plans, placements(plans))
		})
	}
}

package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkParseBinding reads a binding of each written form.
func BenchmarkParseBinding(b *testing.B) {
	for _, s := range []string{"AUTO:/data", "AUTO:/data:rw:100G", "/var/log:/log:ro:0:1000:1000:100M:100M"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseBinding(s, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchHost is a node with n devices of 1 TiB, every other one a quarter
// used, under one disk with ample quota.
func benchHost(n int) *Node {
	node := NewNode()
	for i := range n {
		dev := fmt.Sprintf("/data%02d", i)
		node.Capacity.Volumes[dev] = 1 << 40
		node.Usage.Volumes[dev] = 0
		if i%2 == 1 {
			node.Usage.Volumes[dev] = 1 << 38
			node.Usage.Storage += 1 << 38
		}
	}
	node.Capacity.Disks = []Disk{{Device: "/dev/vda", Mounts: []string{"/"}, ReadIOPS: 1 << 40, WriteIOPS: 1 << 40, ReadBPS: 1 << 50, WriteBPS: 1 << 50}}
	node.Usage.Disks = []Disk{{Device: "/dev/vda", Mounts: []string{"/"}}}
	node.Capacity.Storage = 1 << 52
	return node
}

// benchBindings mixes the kinds: two normal bindings (one with IO quota),
// a monopoly pair, an unlimited binding and a mount with IO quota.
func benchBindings(b *testing.B, mono bool) []*VolumeBinding {
	specs := []string{"AUTO:/a:rw:1G:1:1:0:0", "AUTO:/b:rw:2G", "AUTO:/u:rw:0", "/var/log:/log:rw:0:1:1:0:0"}
	if mono {
		specs = append(specs, "AUTO:/m1:mrw:10G", "AUTO:/m2:mrw:20G")
	}
	var out []*VolumeBinding
	for _, s := range specs {
		v, err := ParseBinding(s, false)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// BenchmarkCount is the capacity query's plan search on one node at
// max_deploy_count 10,000, with and without monopoly bindings.
func BenchmarkCount(b *testing.B) {
	for _, devices := range []int{1, 4, 16, 64} {
		for _, mono := range []bool{false, true} {
			b.Run(fmt.Sprintf("%d devices, monopoly %t", devices, mono), func(b *testing.B) {
				node := benchHost(devices)
				benchCount(b, node, benchBindings(b, mono))
			})
		}
	}
}

// BenchmarkSchedule builds 100 plans on one node.
func BenchmarkSchedule(b *testing.B) {
	for _, devices := range []int{4, 64} {
		b.Run(fmt.Sprintf("%d devices", devices), func(b *testing.B) {
			node := benchHost(devices)
			bindings := benchBindings(b, false)
			b.ReportAllocs()
			for b.Loop() {
				plans, _, err := Schedule(context.Background(), NewHost(&node.Capacity, &node.Usage), &node.Capacity, bindings, 100, 100)
				if err != nil || len(plans) != 100 {
					b.Fatal(len(plans), err)
				}
			}
		})
	}
}

// BenchmarkCountManyDevices is the capacity query on a node with many
// devices and both normal and monopoly bindings: the conversion search must
// stay O(devices · log devices + plans · bindings).
func BenchmarkCountManyDevices(b *testing.B) {
	for _, devices := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("%d devices, IO quota", devices), func(b *testing.B) {
			benchCount(b, benchHost(devices), benchBindings(b, true))
		})
		b.Run(fmt.Sprintf("%d unused devices, no IO quota", devices), func(b *testing.B) {
			node := NewNode()
			for i := range devices {
				node.Capacity.Volumes[fmt.Sprintf("/data%04d", i)] = int64(i+1) << 30
			}
			node.Capacity.Storage = 1 << 52
			var bindings []*VolumeBinding
			for _, s := range []string{"AUTO:/n:rw:1G", "AUTO:/m:mrw:1G"} {
				v, err := ParseBinding(s, false)
				if err != nil {
					b.Fatal(err)
				}
				bindings = append(bindings, v)
			}
			benchCount(b, node, bindings)
		})
	}
}

// benchCount runs the capacity query at max_deploy_count 10,000.
func benchCount(b *testing.B, node *Node, bindings []*VolumeBinding) {
	b.ReportAllocs()
	var got int
	for b.Loop() {
		n, err := Count(context.Background(), NewHost(&node.Capacity, &node.Usage), &node.Capacity, bindings, 10000, 10000)
		if err != nil {
			b.Fatal(err)
		}
		got = n
	}
	b.ReportMetric(float64(got), "plans")
}

// BenchmarkUsageWrite is set-node-resource-usage's decision for core's
// commonest write: a delta of the workloads just deployed, in request and
// workloads form, decoded once and applied.
func BenchmarkUsageWrite(b *testing.B) {
	n := seedNode(b)
	wl := raw(`[{"volume_plan_request":{"AUTO:/data:rw:10:0:0:0:0":{"/data0":10}},"volume_plan_limit":{"AUTO:/data:rw:10:0:0:0:0":{"/data0":10}},"storage_request":10,"storage_limit":10}]`)
	req := raw(`{"volumes":["/data0:10"],"storage":"10"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := nextUsage(n, nil, nil, wl, true, true); err != nil {
			b.Fatal(err)
		}
		if _, err := nextUsage(n, nil, req, nil, true, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCapacityWrite is set-node-resource-capacity's decision on an
// absolute request.
func BenchmarkCapacityWrite(b *testing.B) {
	n := seedNode(b)
	req := raw(`{"volumes":["/data0:2000","/data2:1T"],"disks":["/dev/vdb:/a:1:2:3:4"],"storage":"10G"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := setCapacity(n, nil, req, false, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCapacityWithIOQuota is the capacity query over 300 random nodes
// (1 to 64 devices, up to four disks with IO quota) for requests with IO
// quota: the search that raises its count while a deploy of one more
// would find its plans (Count).
func BenchmarkCapacityWithIOQuota(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	type query struct {
		node      *Node
		request   *WorkloadRequest
		maxDeploy int
	}
	var queries []query
	for len(queries) < 300 {
		n := randomNode(r)
		bs := randomBindings(r, true)
		if uncoveredMount(n, bs) {
			continue
		}
		w, err := Rules{}.ParseRequest([]byte(requestJSON(bs, r.Int64N(3000))))
		if err != nil {
			continue
		}
		queries = append(queries, query{n, w, 1 + r.IntN(100)})
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, q := range queries {
			if _, err := q.node.DeployCapacity(context.Background(), q.request, q.maxDeploy); err != nil {
				b.Fatal(err)
			}
		}
	}
}

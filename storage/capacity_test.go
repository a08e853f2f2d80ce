package storage

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestParseNodeRequest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want NodeRequest
	}{
		{
			name: "the add-node example of docs/storage.md",
			in:   `{"volumes":["/data0:1T","/data1:1T"],"disks":["/dev/vda:/,/data0:1000:1000:1G:1G"],"storage":"2T"}`,
			want: NodeRequest{
				Volumes:    []VolumeSize{{"/data0", tib}, {"/data1", tib}},
				HasVolumes: true,
				Disks:      []Disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 1000, WriteIOPS: 1000, ReadBPS: gib, WriteBPS: gib}},
				HasDisks:   true,
				Storage:    2 * tib, HasStorage: true,
			},
		},
		{
			name: "volumes may be an object of sizes and disks objects",
			in:   `{"volumes":{"/b":"1G","/a":100},"disks":[{"device":"/dev/a","mounts":["/a"],"read_IOPS":5}]}`,
			want: NodeRequest{
				Volumes:    []VolumeSize{{"/a", 100}, {"/b", gib}},
				HasVolumes: true,
				Disks:      []Disk{{Device: "/dev/a", Mounts: []string{"/a"}, ReadIOPS: 5}},
				HasDisks:   true,
			},
		},
		{
			name: "a bare number for storage is bytes",
			in:   `{"storage":1000}`,
			want: NodeRequest{Storage: 1000, HasStorage: true},
		},
		{
			name: "rm-disks is a comma separated list",
			in:   `{"rm-disks":"/dev/a, /dev/b,"}`,
			want: NodeRequest{RmDisks: []string{"/dev/a", "/dev/b"}, HasRmDisks: true},
		},
		{
			name: "null values are absent",
			in:   `{"volumes":null,"disks":null,"storage":null,"rm-disks":null}`,
			want: NodeRequest{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := types.DecodeObject(raw(tt.in), "resource")
			require.NoError(t, err)
			q, err := ParseNodeRequest(m, false)
			require.NoError(t, err)
			require.Equal(t, tt.want, *q)
		})
	}
}

func TestParseNodeRequestRefuses(t *testing.T) {
	tests := []struct {
		name, in, errHas string
	}{
		{"a disk of five parts", `{"disks":["/dev/vda:/:1:1:1"]}`, "5 parts"},
		{"a disk mount that is not absolute", `{"disks":["/dev/vda:data:1:1:1:1"]}`, "not an absolute path"},
		{"a disk without device", `{"disks":[":/:1:1:1:1"]}`, "no device"},
		{"a disk listed twice", `{"disks":["/dev/a:/:1:1:1:1","/dev/a:/x:1:1:1:1"]}`, "listed twice"},
		{"a disk object with a negative quota", `{"disks":[{"device":"/dev/a","read_IOPS":-1}]}`, "out of range"},
		{"a volume without size", `{"volumes":["/data0"]}`, "want device:size"},
		{"a volume listed twice", `{"volumes":["/d:1","/d:2"]}`, "listed twice"},
		{"a negative volume size", `{"volumes":["/d:-1"]}`, "negative"},
		{"a negative storage", `{"storage":-1}`, "negative"},
		{"an unknown key", `{"volume":["/d:1"]}`, "unknown key"},
		{"volumes that are a number", `{"volumes":1}`, "want a list"},
		{"storage and volumes above 8 PiB", `{"volumes":["/d:8P"],"storage":"1"}`, "more than 8 PiB"},
		{"storage beyond int64", `{"storage":"9223372036854775807"}`, "too large"},
		{"storage of a huge human size", `{"storage":"99999999999999999999P"}`, "too large"},
		{"rm-disks of a number", `{"rm-disks":1}`, "rm-disks"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			m, err := types.DecodeObject(raw(tt.in), "resource")
			require.NoError(t, err)
			_, err = ParseNodeRequest(m, false)
			require.ErrorContains(t, err, tt.errHas)
		})
	}

	t.Run("a huge number of large volumes does not wrap the total around", func(t *testing.T) {
		vols := make([]string, 2048)
		for i := range vols {
			vols[i] = fmt.Sprintf("%q", fmt.Sprintf("/d%d:8P", i))
		}
		m, err := types.DecodeObject(raw(`{"volumes":[`+strings.Join(vols, ",")+`],"storage":"1"}`), "resource")
		require.NoError(t, err)
		_, err = ParseNodeRequest(m, false)
		require.ErrorContains(t, err, "more than 8 PiB")
	})
}

func engineInfo(total int64, storageResource string) *types.EngineInfo {
	info := &types.EngineInfo{StorageTotal: total}
	if storageResource != "" {
		info.Resources = map[string]types.RawOrBytes{"storage": types.RawOrBytes(storageResource)}
	}
	return info
}

func TestAddNode(t *testing.T) {
	tests := []struct {
		name    string
		request string
		info    *types.EngineInfo
		want    string // capacity in stored form
	}{
		{
			name:    "storage given is the flat budget plus the volumes' total",
			request: `{"volumes":["/data0:1T","/data1:1T"],"disks":["/dev/vda:/,/data0:1000:1000:1G:1G"],"storage":"2T"}`,
			info:    engineInfo(100*tib, ""),
			want: `{"volumes":{"/data0":1099511627776,"/data1":1099511627776},
				"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":1000,"write_IOPS":1000,"read_bps":1073741824,"write_bps":1073741824}],
				"storage":4398046511104}`,
		},
		{
			name:    "without storage the budget is 80% of the engine's storage total",
			request: `{"volumes":["/data0:100"]}`,
			info:    engineInfo(1005, ""),
			want:    `{"volumes":{"/data0":100},"disks":[],"storage":904}`,
		},
		{
			name:    "80% rounds down",
			request: `{}`,
			info:    engineInfo(19, ""),
			want:    `{"volumes":{},"disks":[],"storage":15}`,
		},
		{
			name:    "the engine's storage resource supplies the total, the volumes and the disks left out",
			request: `{}`,
			info: engineInfo(1<<40, `{"volumes":{"/data0":100,"/data1":200},
				"disks":[{"device":"/dev/sda","mounts":["/data0"],"read_IOPS":1,"write_IOPS":2,"read_bps":3,"write_bps":4}],"storage":1000}`),
			want: `{"volumes":{"/data0":100,"/data1":200},
				"disks":[{"device":"/dev/sda","mounts":["/data0"],"read_IOPS":1,"write_IOPS":2,"read_bps":3,"write_bps":4}],"storage":1100}`,
		},
		{
			name:    "the request's volumes and disks win over the engine's",
			request: `{"volumes":["/x:10"],"disks":["/dev/x:/x:1:1:1:1"],"storage":"0"}`,
			info:    engineInfo(0, `{"volumes":{"/data0":100},"disks":[{"device":"/dev/sda"}],"storage":1000}`),
			want: `{"volumes":{"/x":10},
				"disks":[{"device":"/dev/x","mounts":["/x"],"read_IOPS":1,"write_IOPS":1,"read_bps":1,"write_bps":1}],"storage":10}`,
		},
		{
			name:    "an engine resource without a storage value falls back to the engine's storage total",
			request: `{}`,
			info:    engineInfo(1000, `{"volumes":{"/data0":100}}`),
			want:    `{"volumes":{"/data0":100},"disks":[],"storage":900}`,
		},
		{
			name:    "a volume of size 0 is left out",
			request: `{"volumes":["/a:0","/b:1"],"storage":0}`,
			info:    nil,
			want:    `{"volumes":{"/b":1},"disks":[],"storage":1}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := AddNode(raw(tt.request), tt.info)
			require.NoError(t, err)
			got, err := json.Marshal(n.Capacity)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(got))
			require.NoError(t, n.Validate())
			for dev := range n.Capacity.Volumes {
				require.Zero(t, n.Usage.Volumes[dev], "usage starts at 0 on %s", dev)
			}
			require.Len(t, n.Usage.Disks, len(n.Capacity.Disks), "usage has every capacity disk")
			require.Zero(t, n.Usage.Storage)
		})
	}

	refusals := []struct {
		name, request, errHas string
		info                  *types.EngineInfo
	}{
		{"rm-disks", `{"rm-disks":"/dev/a"}`, "no disks to remove", nil},
		{"a request that is a list", `[]`, "want a JSON object", nil},
		{"an engine total that is negative", `{}`, "out of range", engineInfo(-1, "")},
		{"an engine resource that is not stored form", `{}`, "not a stored storage resource", engineInfo(0, `{"volumes":["/a:1"]}`)},
		{"a budget and volumes above 8 PiB", `{"volumes":["/a:8P"]}`, "more than 8 PiB", engineInfo(10, "")},
		{"engine volumes above 8 PiB in total", `{"storage":0}`, "volumes add up to more than 8 PiB", engineInfo(0, `{"volumes":{"/a":9007199254740992,"/b":1}}`)},
	}
	for _, tt := range refusals {
		t.Run("adding a node with "+tt.name+" is refused", func(t *testing.T) {
			_, err := AddNode(raw(tt.request), tt.info)
			require.ErrorContains(t, err, tt.errHas)
		})
	}
}

// seedNode is a node with two volumes, one disk and some usage.
func seedNode(t testing.TB) *Node {
	return mustNode(t,
		`{"volumes":{"/data0":1000,"/data1":2000},
		  "disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":100,"write_IOPS":100,"read_bps":1000,"write_bps":1000}],
		  "storage":5000}`,
		`{"volumes":{"/data0":100,"/data1":0},
		  "disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0}],
		  "storage":100}`)
}

func TestSetCapacity(t *testing.T) {
	vda := `{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":100,"write_IOPS":100,"read_bps":1000,"write_bps":1000}`
	tests := []struct {
		name            string
		resource        string
		request         string
		delta, incr     bool
		capacity, usage string
	}{
		{
			name:     "an absolute request keeps the keys it leaves out",
			request:  `{"disks":["/dev/vdb:/data1:1:1:1:1"]}`,
			capacity: `{"volumes":{"/data0":1000,"/data1":2000},"disks":[` + vda + `,{"device":"/dev/vdb","mounts":["/data1"],"read_IOPS":1,"write_IOPS":1,"read_bps":1,"write_bps":1}],"storage":5000}`,
		},
		{
			name:     "an absolute volume change moves storage by the difference",
			request:  `{"volumes":["/data1:2500","/data2:10"]}`,
			capacity: `{"volumes":{"/data0":1000,"/data1":2500,"/data2":10},"disks":[` + vda + `],"storage":5510}`,
		},
		{
			name:     "storage alone becomes the node's storage exactly",
			request:  `{"storage":"2T"}`,
			capacity: `{"volumes":{"/data0":1000,"/data1":2000},"disks":[` + vda + `],"storage":2199023255552}`,
		},
		{
			name:     "storage with volumes is the budget plus the given volumes",
			request:  `{"storage":"1000","volumes":["/data1:500"]}`,
			capacity: `{"volumes":{"/data0":1000,"/data1":500},"disks":[` + vda + `],"storage":1500}`,
		},
		{
			name:     "a volume dropped to 0 is removed with its usage and its size leaves storage",
			request:  `{"volumes":["/data1:0"]}`,
			capacity: `{"volumes":{"/data0":1000},"disks":[` + vda + `],"storage":3000}`,
			usage:    `{"volumes":{"/data0":100},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":100}`,
		},
		{
			name:     "rm-disks in absolute mode removes a disk without usage",
			request:  `{"disks":["/dev/vdb:/data1:1:1:1:1"],"rm-disks":"/dev/vdb"}`,
			capacity: `{"volumes":{"/data0":1000,"/data1":2000},"disks":[` + vda + `],"storage":5000}`,
		},
		{
			name:     "an absolute disk replaces the stored one",
			request:  `{"disks":["/dev/vda:/data0:50:50:50:50"]}`,
			capacity: `{"volumes":{"/data0":1000,"/data1":2000},"disks":[{"device":"/dev/vda","mounts":["/data0"],"read_IOPS":50,"write_IOPS":50,"read_bps":50,"write_bps":50}],"storage":5000}`,
			usage:    `{"volumes":{"/data0":100,"/data1":0},"disks":[{"device":"/dev/vda","mounts":["/data0"],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":100}`,
		},
		{
			name: "a rollback snapshot is restored verbatim",
			request: `{"volumes":{"/data0":1000,"/data9":7},
				"disks":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":11,"write_IOPS":12,"read_bps":13,"write_bps":14}],"storage":4200}`,
			capacity: `{"volumes":{"/data0":1000,"/data9":7},"disks":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":11,"write_IOPS":12,"read_bps":13,"write_bps":14}],"storage":4200}`,
			usage:    `{"volumes":{"/data0":100,"/data9":0},"disks":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":100}`,
		},
		{
			name:     "a snapshot whose values are null is a request that asks nothing",
			request:  `{"volumes":null,"disks":null,"storage":null}`,
			capacity: `{"volumes":{"/data0":1000,"/data1":2000},"disks":[` + vda + `],"storage":5000}`,
		},
		{
			name:     "volumes as an object of human sizes with a string storage is a request",
			request:  `{"volumes":{"/data1":"3000"},"disks":[],"storage":"100"}`,
			capacity: `{"volumes":{"/data0":1000,"/data1":3000},"disks":[` + vda + `],"storage":3100}`,
		},
		{
			name:    "a delta request adds volumes, their size to storage, and disk quota",
			request: `{"volumes":["/data1:100","/data2:5"],"disks":["/dev/vda:/:1:2:3:4"],"storage":10}`,
			delta:   true, incr: true,
			capacity: `{"volumes":{"/data0":1000,"/data1":2100,"/data2":5},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":101,"write_IOPS":102,"read_bps":1003,"write_bps":1004}],"storage":5115}`,
		},
		{
			name:    "a delta request subtracts and removes a volume taken to 0",
			request: `{"volumes":["/data1:2000"]}`,
			delta:   true, incr: false,
			capacity: `{"volumes":{"/data0":1000},"disks":[` + vda + `],"storage":3000}`,
		},
		{
			name:     "a stored resource replaces the capacity when no request is given",
			resource: `{"volumes":{"/data0":500},"disks":[{"device":"/dev/vda","read_IOPS":10}],"storage":600}`,
			capacity: `{"volumes":{"/data0":500},"disks":[{"device":"/dev/vda","mounts":[],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":600}`,
			usage:    `{"volumes":{"/data0":100},"disks":[{"device":"/dev/vda","mounts":[],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":100}`,
		},
		{
			name:     "nothing given changes nothing",
			capacity: `{"volumes":{"/data0":1000,"/data1":2000},"disks":[` + vda + `],"storage":5000}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res, req json.RawMessage
			if tt.resource != "" {
				res = raw(tt.resource)
			}
			if tt.request != "" {
				req = raw(tt.request)
			}
			before := seedNode(t)
			n, err := setCapacity(before, res, req, tt.delta, tt.incr)
			require.NoError(t, err)
			got, err := json.Marshal(n.Capacity)
			require.NoError(t, err)
			require.JSONEq(t, tt.capacity, string(got))
			if tt.usage != "" {
				got, err := json.Marshal(n.Usage)
				require.NoError(t, err)
				require.JSONEq(t, tt.usage, string(got))
			}
			require.NoError(t, n.Validate())
			require.Equal(t, seedNode(t), before, "the node it was applied to is unchanged")
		})
	}

	refusals := []struct {
		name        string
		request     string
		delta, incr bool
		class       types.Class
		errHas      string
	}{
		{"rm-disks with a delta", `{"rm-disks":"/dev/vda"}`, true, true, types.InvalidArgument, "only valid in absolute mode"},
		{"rm-disks of a disk holding usage", `{"rm-disks":"/dev/vda"}`, false, false, types.FailedPrecondition, "still holds quota"},
		{"rm-disks of an unknown disk", `{"rm-disks":"/dev/nope"}`, false, false, types.FailedPrecondition, "no disk /dev/nope"},
		{"removing a volume holding usage", `{"volumes":["/data0:0"]}`, false, false, types.FailedPrecondition, "still holds 100 bytes"},
		{"shrinking a volume below its usage", `{"volumes":["/data0:50"]}`, false, false, types.InvalidArgument, "above its capacity"},
		{"shrinking a disk below its usage", `{"disks":["/dev/vda:/:5:100:1000:1000"]}`, false, false, types.InvalidArgument, "above its capacity"},
		{"shrinking storage below its usage", `{"storage":"50"}`, false, false, types.InvalidArgument, "storage usage"},
		{"subtracting more than a volume has", `{"volumes":["/data1:2001"]}`, true, false, types.FailedPrecondition, "volume /data1: capacity 1.953 KiB (2000 bytes) - 2001 would be below zero"},
		{"subtracting a volume the node lacks", `{"volumes":["/data7:1"]}`, true, false, types.FailedPrecondition, "no such volume"},
		{"a disk of five parts", `{"disks":["/dev/vda:/:1:1:1"]}`, false, false, types.InvalidArgument, "5 parts"},
		{"a request that is a list", `[{"storage":1}]`, false, false, types.InvalidArgument, "want a JSON object"},
		{"a snapshot with a negative value", `{"volumes":{"/data0":-1},"disks":[],"storage":1}`, false, false, types.InvalidArgument, "out of range"},
	}
	for _, tt := range refusals {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := setCapacity(seedNode(t), nil, raw(tt.request), tt.delta, tt.incr)
			requireClass(t, err, tt.class)
			require.ErrorContains(t, err, tt.errHas)
		})
	}

	t.Run("the before snapshot of a change rolls it back", func(t *testing.T) {
		before := seedNode(t)
		snapshot, err := json.Marshal(before.Capacity)
		require.NoError(t, err)
		changed, err := setCapacity(before, nil, raw(`{"volumes":["/data1:0","/data2:1T"],"storage":"9","rm-disks":""}`), false, false)
		require.NoError(t, err)
		require.NotEqual(t, before.Capacity, changed.Capacity)
		back, err := setCapacity(changed, nil, snapshot, false, false)
		require.NoError(t, err)
		require.Equal(t, before, back)
	})

	t.Run("a request of nulls does not wipe the capacity of an idle node", func(t *testing.T) {
		idle := mustNode(t, `{"volumes":{"/data0":1000},"disks":[{"device":"/dev/vda","read_IOPS":5}],"storage":5000}`, "")
		n, err := setCapacity(idle, nil, raw(`{"volumes":null,"disks":null,"storage":null}`), false, false)
		require.NoError(t, err)
		require.Equal(t, idle.Capacity, n.Capacity)
	})

	t.Run("volumes kept beside a smaller storage cannot be added up beyond 8 PiB", func(t *testing.T) {
		n, err := setCapacity(NewNode(), nil, raw(`{"volumes":["/a:8P"],"storage":"0"}`), false, false)
		require.NoError(t, err)
		n, err = setCapacity(n, nil, raw(`{"storage":"0"}`), false, false)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"/a": 8 * pib}, n.Capacity.Volumes)
		_, err = setCapacity(n, nil, raw(`{"volumes":["/b:1"]}`), true, true)
		requireClass(t, err, types.InvalidArgument)
		require.ErrorContains(t, err, "volumes add up to more than 8 PiB")
	})

	t.Run("an add followed by the same subtraction restores the capacity, a disk taken to no quota kept", func(t *testing.T) {
		before := seedNode(t)
		req := raw(`{"volumes":["/data1:100","/data3:5"],"disks":["/dev/vdc:/data3:1:1:1:1"],"storage":"1K"}`)
		up, err := setCapacity(before, nil, req, true, true)
		require.NoError(t, err)
		down, err := setCapacity(up, nil, req, true, false)
		require.NoError(t, err)
		want := before.Clone()
		want.Capacity.Disks = append(want.Capacity.Disks, Disk{Device: "/dev/vdc", Mounts: []string{"/data3"}})
		want.Usage.Disks = append(want.Usage.Disks, Disk{Device: "/dev/vdc", Mounts: []string{"/data3"}})
		require.Equal(t, want, down, "only rm-disks removes a disk")
	})
}

func TestNextUsage(t *testing.T) {
	workload := `{"volumes_request":["AUTO:/a:rw:50:0:0:0:0"],"volume_plan_request":{"AUTO:/a:rw:50:0:0:0:0":{"/data1":50}},
		"storage_request":70,"disks_request":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":5,"write_IOPS":1,"read_bps":0,"write_bps":0}]}`
	tests := []struct {
		name                        string
		resource, request, workload string
		delta, incr                 bool
		usage                       string
	}{
		{
			name:    "a request-form usage replaces the usage in absolute mode",
			request: `{"volumes":["/data1:300"],"storage":"10","disks":["/dev/vda:/:1:2:3:4"]}`,
			usage:   `{"volumes":{"/data0":0,"/data1":300},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":1,"write_IOPS":2,"read_bps":3,"write_bps":4}],"storage":310}`,
		},
		{
			name:    "a request-form usage is added with delta and incr",
			request: `{"volumes":["/data1:300"],"storage":"10"}`,
			delta:   true, incr: true,
			usage: `{"volumes":{"/data0":100,"/data1":300},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":410}`,
		},
		{
			name:    "a request-form usage is subtracted with delta and not incr",
			request: `{"volumes":["/data0:100"],"disks":["/dev/vda:/:10:0:0:0"]}`,
			delta:   true, incr: false,
			usage: `{"volumes":{"/data0":0,"/data1":0},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":0,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":0}`,
		},
		{
			name:     "a stored-form resource replaces the usage",
			resource: `{"volumes":{"/data0":7},"disks":[],"storage":7}`,
			usage:    `{"volumes":{"/data0":7,"/data1":0},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":0,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":7}`,
		},
		{
			name:     "the request form wins over the stored form",
			resource: `{"volumes":{"/data0":7},"disks":[],"storage":7}`,
			request:  `{"storage":"1"}`,
			usage:    `{"volumes":{"/data0":0,"/data1":0},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":0,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":1}`,
		},
		{
			name:     "the workloads' sum replaces the usage",
			workload: `[` + workload + `,null,` + workload + `]`,
			usage:    `{"volumes":{"/data0":0,"/data1":100},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":10,"write_IOPS":2,"read_bps":0,"write_bps":0}],"storage":140}`,
		},
		{
			name:     "the workloads' sum is added with delta and incr",
			workload: `[` + workload + `]`,
			delta:    true, incr: true,
			usage: `{"volumes":{"/data0":100,"/data1":50},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":15,"write_IOPS":1,"read_bps":0,"write_bps":0}],"storage":170}`,
		},
		{
			name:    "a snapshot in stored form is read verbatim",
			request: `{"volumes":{"/data1":5},"disks":[],"storage":1}`,
			usage:   `{"volumes":{"/data0":0,"/data1":5},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":0,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":1}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res, req, wls json.RawMessage
			if tt.resource != "" {
				res = raw(tt.resource)
			}
			if tt.request != "" {
				req = raw(tt.request)
			}
			if tt.workload != "" {
				wls = raw(tt.workload)
			}
			next, err := nextUsage(seedNode(t), res, req, wls, tt.delta, tt.incr)
			require.NoError(t, err)
			settled, err := next.Settle()
			require.NoError(t, err)
			got, err := json.Marshal(settled.Usage)
			require.NoError(t, err)
			require.JSONEq(t, tt.usage, string(got))
			require.Equal(t, seedNode(t).Capacity, settled.Capacity, "a usage write leaves capacity alone")
		})
	}

	refusals := []struct {
		name        string
		request     string
		delta, incr bool
		errHas      string
	}{
		{"a volume above its capacity", `{"volumes":["/data0:1001"],"storage":"0"}`, false, false, "above its capacity"},
		{"an added volume above its capacity", `{"volumes":["/data0:901"]}`, true, true, "above its capacity"},
		{"storage above its capacity", `{"storage":"4901"}`, true, true, "storage usage"},
		{"a disk quota above its capacity", `{"disks":["/dev/vda:/:91:0:0:0"]}`, true, true, "above its capacity"},
		{"usage on a volume the node lacks", `{"volumes":["/nope:1"]}`, true, true, "usage of volume /nope: the node has no such volume"},
		{"usage on a disk the node lacks", `{"disks":["/dev/nope:/:1:0:0:0"]}`, true, true, "usage of disk /dev/nope: the node has no such disk"},
		{"a subtraction below zero", `{"volumes":["/data0:101"]}`, true, false, "out of range"},
	}
	for _, tt := range refusals {
		t.Run("settling "+tt.name+" is refused", func(t *testing.T) {
			next, err := nextUsage(seedNode(t), nil, raw(tt.request), nil, tt.delta, tt.incr)
			require.NoError(t, err, "NextUsage itself does not validate")
			_, err = next.Settle()
			requireClass(t, err, types.InvalidArgument)
			require.ErrorContains(t, err, tt.errHas)
		})
	}

	t.Run("rm-disks is not a usage", func(t *testing.T) {
		_, err := nextUsage(seedNode(t), nil, raw(`{"rm-disks":"/dev/vda"}`), nil, false, false)
		require.ErrorContains(t, err, "rm-disks is not a usage")
	})
	t.Run("workloads given as an object are refused", func(t *testing.T) {
		_, err := nextUsage(seedNode(t), nil, nil, raw(workload), false, false)
		require.ErrorContains(t, err, "want a list")
	})
}

func TestRecompute(t *testing.T) {
	wl := func(dev string, size, storage int64, readIOPS int64) *Workload {
		key := fmt.Sprintf("AUTO:/a:rw:%d:0:0:0:0", size)
		return &Workload{
			VolumesRequest:    []*VolumeBinding{mustBinding(t, key)},
			VolumePlanRequest: VolumePlan{key: {dev: size}},
			StorageRequest:    storage,
			DisksRequest:      []Disk{{Device: "/dev/vda", ReadIOPS: readIOPS}},
		}
	}
	tests := []struct {
		name      string
		workloads []*Workload
		released  types.Amounts
		diffs     []string
	}{
		{
			name:      "workloads matching the usage give no diff",
			workloads: []*Workload{wl("/data0", 60, 60, 4), wl("/data0", 40, 40, 6)},
			diffs:     []string{},
		},
		{
			name:      "workloads holding less than the usage show every component",
			workloads: []*Workload{wl("/data0", 60, 60, 4)},
			diffs: []string{
				"storage: stored usage 100, workloads hold 60",
				"volume /data0: stored usage 100, workloads hold 60",
				"disk /dev/vda read_IOPS: stored usage 10, workloads hold 4",
			},
		},
		{
			name:      "workloads holding more than the usage, on another volume too",
			workloads: []*Workload{wl("/data0", 100, 100, 10), wl("/data1", 5, 5, 0)},
			diffs: []string{
				"storage: stored usage 100, workloads hold 105",
				"volume /data1: stored usage 0, workloads hold 5",
			},
		},
		{
			name:      "no workloads differ from any usage",
			workloads: nil,
			diffs: []string{
				"storage: stored usage 100, workloads hold 0",
				"volume /data0: stored usage 100, workloads hold 0",
				"disk /dev/vda read_IOPS: stored usage 10, workloads hold 0",
			},
		},
		{
			name:      "usage released by isolation is taken off the workloads' sum",
			workloads: []*Workload{wl("/data0", 100, 100, 10), wl("/data1", 5, 5, 0)},
			released:  types.Amounts{"volume:/data1": 5, "storage": 5},
			diffs:     []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := seedNode(t)
			computed, diffs, err := n.Recompute(tt.workloads, tt.released)
			require.NoError(t, err)
			require.NotNil(t, diffs)
			require.Equal(t, tt.diffs, diffs)
			// fix-node-resource's write: the computed usage, settled.
			fixed := n.Clone()
			fixed.Usage = computed.Clone()
			fixed, err = fixed.Settle()
			require.NoError(t, err)
			_, again, err := fixed.Recompute(tt.workloads, tt.released)
			require.NoError(t, err)
			require.Empty(t, again, "the fixed record agrees with the workloads")
		})
	}
}

func TestADecodedChangeAppliesAlikeOnEveryAttempt(t *testing.T) {
	// The engine decodes a change once and applies it again to the record
	// it reads after a conflict: applying must not consume or alter it.
	for _, tt := range []struct {
		name     string
		request  string
		delta    bool
		capacity bool
	}{
		{name: "an absolute request adding a disk and a pool", capacity: true,
			request: `{"volumes":["/data2:1T"],"disks":["/dev/vdb:/a,/b:1:2:3:4"],"pools":["ceph-a:/mnt/ceph"],"default-pool":"ceph-a"}`},
		{name: "a delta growing a disk's mounts", capacity: true, delta: true,
			request: `{"disks":["/dev/vda:/c:1:1:1:1"],"volumes":["/data0:1"]}`},
		{name: "a stored-form capacity snapshot", capacity: true,
			request: `{"volumes":{"/data0":1000},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":100}],"storage":3000}`},
		{name: "a usage delta in request form", delta: true, request: `{"volumes":["/data0:10"],"storage":"10"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := types.ChangeOf(&types.Request{ResourceRequest: raw(tt.request)}, !tt.capacity)
			require.NoError(t, err)
			var edit interface{ Apply(*Node) (*Node, error) }
			if tt.capacity {
				edit, err = DecodeCapacityChange(c, tt.delta, true)
			} else {
				edit, err = DecodeUsageChange(c, tt.delta, true)
			}
			require.NoError(t, err)
			n := seedNode(t)
			first, err := edit.Apply(n)
			require.NoError(t, err)
			want := first.Clone()
			for _, d := range first.Capacity.Disks {
				for i := range d.Mounts {
					d.Mounts[i] = "/changed" // a later step writing the result in place
				}
			}
			require.Equal(t, seedNode(t), n, "the record it was given is left as it was")
			second, err := edit.Apply(n)
			require.NoError(t, err)
			require.Equal(t, want, second)
		})
	}
}

func TestValidateNamesTheSameFaultEveryTime(t *testing.T) {
	for _, c := range []struct {
		name string
		node func() *Node
		want string
	}{
		{"two volumes above capacity name the first in order", func() *Node {
			n := NewNode()
			n.Capacity.Volumes = map[string]int64{"/a": 1, "/b": 1, "/c": 1, "/d": 1}
			n.Capacity.Storage = 100
			n.Usage.Volumes = map[string]int64{"/d": 2, "/b": 2, "/c": 0}
			return n
		}, "usage of volume /b would be 2 bytes, above its capacity 1"},
		{"two volumes out of range name the first in order", func() *Node {
			n := NewNode()
			n.Capacity.Volumes = map[string]int64{"/z": -1, "/m": -2, "/a": 1}
			return n
		}, "capacity of volume /m is -2, out of range: below zero"},
		{"bindings on unknown volumes name the first in order", func() *Node {
			n := NewNode()
			n.Capacity.Volumes = map[string]int64{"/a": 1}
			n.Usage.ZeroByte = map[string]int64{"/y": 1, "/x": 2, "/a": 1}
			return n
		}, "usage of volume /x: 2 bindings on a volume the node does not have"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range 50 {
				err := c.node().Validate()
				require.Error(t, err)
				require.Contains(t, err.Error(), c.want)
			}
		})
	}
}

func TestCheckLedgerKey(t *testing.T) {
	n := NewNode()
	n.Capacity.Volumes = map[string]int64{"/data0": 100, "/data1": 100}
	n.Capacity.Disks = []Disk{{Device: "/dev/vda", Mounts: []string{"/"}}, {Device: "pci-0000:00:1f.2", Mounts: []string{"/data1"}}}
	n.Capacity.Storage = 300
	n.Usage.Volumes = map[string]int64{"/data0": 10, "/data1": 0}
	n.Usage.ZeroByte = map[string]int64{"/data1": 2}
	n.Usage.Disks = []Disk{{Device: "/dev/vda", ReadIOPS: 5}, {Device: "pci-0000:00:1f.2", WriteBPS: 7}}

	t.Run("every key Held produces is accepted", func(t *testing.T) {
		held := n.Held()
		require.Contains(t, held, "disk:pci-0000:00:1f.2:write_bps")
		for _, k := range held.Keys() {
			require.NoError(t, CheckLedgerKey(k), k)
		}
	})
	t.Run("keys of devices a node no longer has are accepted: a ledger outlives them", func(t *testing.T) {
		for _, k := range []string{"volume:/gone", "bindings:/gone", "disk:/dev/vdb:read_IOPS"} {
			require.NoError(t, CheckLedgerKey(k), k)
		}
	})
	notAComponent := " is not a storage usage component (storage, volume:DEVICE, bindings:DEVICE, disk:DEVICE:QUOTA)"
	for _, key := range []string{"disk:/dev/vda:iops", "disk:read_IOPS", "disk::read_IOPS", "volume:", "bindings:", "storage:/data0", "bogus", ""} {
		t.Run("the key "+key+" is refused, saying what is accepted", func(t *testing.T) {
			err := CheckLedgerKey(key)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			require.EqualError(t, err, key+notAComponent)
		})
	}
}

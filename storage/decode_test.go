package storage

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/storage/pool"
)

func sampleNodes() []*Node {
	busy := NewNode()
	busy.Capacity.Volumes = map[string]int64{"/data0": 1 << 40, "/data1": 1 << 40}
	busy.Capacity.Disks = []Disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 1000, WriteIOPS: 2000, ReadBPS: 1 << 30, WriteBPS: 1 << 31}}
	busy.Capacity.Storage = 4 << 40
	busy.Usage.Volumes = map[string]int64{"/data0": 300 << 30, "/data1": 0}
	busy.Usage.Disks = []Disk{{Device: "/dev/vda", Mounts: []string{"/", "/data0"}, ReadIOPS: 10}}
	busy.Usage.Storage = 300 << 30
	busy.Usage.ZeroByte = map[string]int64{"/data1": 2}
	extreme := NewNode()
	extreme.Capacity.Volumes = map[string]int64{"/däta": 9223372036854775807}
	extreme.Usage.Volumes = map[string]int64{"/däta": -9223372036854775808}
	extreme.Capacity.Disks = []Disk{{Device: "/dev/sda"}}
	pooled := NewNode()
	pooled.Capacity.Storage = 1 << 40
	pooled.Capacity.Pools = map[string]pool.Declaration{"ceph-a": {Path: "/mnt/ceph-a"}, "nfs": {Path: "/mnt/nfs"}}
	pooled.Capacity.DefaultPool = "nfs"
	empty := NewNode()
	empty.Capacity.Pools = map[string]pool.Declaration{"p": {}}
	return []*Node{NewNode(), busy, extreme, pooled, empty}
}

func TestDecodeNodeFast(t *testing.T) {
	t.Run("every record as Encode writes it takes the fast path and reads as encoding/json reads it", func(t *testing.T) {
		for _, n := range sampleNodes() {
			data, err := Rules{}.Encode(n)
			require.NoError(t, err)
			got, ok := decodeNodeFast(data)
			require.True(t, ok, string(data))
			want := &Node{}
			require.NoError(t, json.Unmarshal(data, want))
			require.Equal(t, want, got, string(data))
		}
	})
	for _, tc := range []struct{ name, data string }{
		{"whitespace is left to encoding/json", `{ "capacity":{}}`},
		{"a key in another case is left to encoding/json", `{"Capacity":{}}`},
		{"an unknown key is left to encoding/json", `{"capacity":{},"pools":{}}`},
		{"a repeated key is left to encoding/json", `{"capacity":{"storage":1,"storage":2}}`},
		{"a repeated volume is left to encoding/json", `{"capacity":{"volumes":{"/a":1,"/a":2}}}`},
		{"an escaped string is left to encoding/json", `{"capacity":{"volumes":{"\u002fa":1}}}`},
		{"a null is left to encoding/json", `{"capacity":{"volumes":null}}`},
		{"a fraction is left to encoding/json", `{"capacity":{"storage":1.0}}`},
		{"an exponent is left to encoding/json", `{"capacity":{"storage":1e3}}`},
		{"a leading zero is left to encoding/json", `{"capacity":{"storage":01}}`},
		{"an integer past int64 is left to encoding/json", `{"capacity":{"storage":9223372036854775808}}`},
		{"invalid UTF-8 is left to encoding/json", "{\"capacity\":{\"volumes\":{\"/\xff\":1}}}"},
		{"trailing bytes are left to encoding/json", `{"capacity":{}} `},
		{"a pool declared twice is left to encoding/json", `{"capacity":{"pools":{"a":{"path":"/x"},"a":{"path":"/y"}}}}`},
		{"a pool declaration with another member is left to encoding/json", `{"capacity":{"pools":{"a":{"path":"/x","size":1}}}}`},
		{"a record holding pool objects is left to encoding/json", `{"capacity":{},"usage":{"pool_objects":{}}}`},
		{"a truncated record is left to encoding/json", `{"capacity":{"disks":[{"device":"/dev/vda"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := decodeNodeFast([]byte(tc.data))
			require.False(t, ok)
		})
	}
}

func FuzzDecodeNodeFast(f *testing.F) {
	for _, n := range sampleNodes() {
		data, err := Rules{}.Encode(n)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte(`{"capacity":{"storage":-0},"usage":{"disks":[{}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeNodeFast(data)
		if !ok {
			return
		}
		want := &Node{}
		require.NoError(t, json.Unmarshal(data, want), "the fast path took what encoding/json refuses")
		require.Equal(t, want, got)
	})
}

package storage

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// strs renders bindings in full form.
func strs(bs []*VolumeBinding) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.String())
	}
	return out
}

func TestParseWorkloadRequest(t *testing.T) {
	tests := []struct {
		name                  string
		in                    string
		signed                bool
		request, limit        []string
		flatReq, flatLim      int64
		storageReq, storageLm int64
	}{
		{
			name:       "a missing request list defaults to the limit list",
			in:         `{"volumes":["AUTO:/data:rw:100"]}`,
			request:    []string{"AUTO:/data:rw:100:0:0:0:0"},
			limit:      []string{"AUTO:/data:rw:100:0:0:0:0"},
			storageReq: 100, storageLm: 100,
		},
		{
			name:       "an empty request list is a missing one, as core's RawParams reads it",
			in:         `{"volumes-request":[],"volumes":["AUTO:/data:rw:100"]}`,
			request:    []string{"AUTO:/data:rw:100:0:0:0:0"},
			limit:      []string{"AUTO:/data:rw:100:0:0:0:0"},
			storageReq: 100, storageLm: 100,
		},
		{
			name:       "an empty spelling beside a list is no second list",
			in:         `{"volume":[],"volumes":["AUTO:/data:rw:100"],"volume-request":[]}`,
			request:    []string{"AUTO:/data:rw:100:0:0:0:0"},
			limit:      []string{"AUTO:/data:rw:100:0:0:0:0"},
			storageReq: 100, storageLm: 100,
		},
		{
			name:       "a missing limit list defaults to the request list",
			in:         `{"volumes-request":["AUTO:/data:rw:100"]}`,
			request:    []string{"AUTO:/data:rw:100:0:0:0:0"},
			limit:      []string{"AUTO:/data:rw:100:0:0:0:0"},
			storageReq: 100, storageLm: 100,
		},
		{
			name:       "the limits are paired with the requests by source, destination and flags",
			in:         `{"volume-request":["AUTO:/a:rw:1","AUTO:/b:wr:2"],"volumes-limit":["AUTO:/b:rw:20","AUTO:/a:rw:10"]}`,
			request:    []string{"AUTO:/a:rw:1:0:0:0:0", "AUTO:/b:rw:2:0:0:0:0"},
			limit:      []string{"AUTO:/a:rw:10:0:0:0:0", "AUTO:/b:rw:20:0:0:0:0"},
			storageReq: 3, storageLm: 30,
		},
		{
			name:       "a limit below its request is raised in size and in each quota",
			in:         `{"volumes-request":["AUTO:/a:rw:100:10:20:30:40"],"volume-limit":["AUTO:/a:rw:50:5:25:30:1"]}`,
			request:    []string{"AUTO:/a:rw:100:10:20:30:40"},
			limit:      []string{"AUTO:/a:rw:100:10:25:30:40"},
			storageReq: 100, storageLm: 100,
		},
		{
			name:       "a single string is a list of one",
			in:         `{"volume":"AUTO:/a:rw:1G"}`,
			request:    []string{"AUTO:/a:rw:1073741824:0:0:0:0"},
			limit:      []string{"AUTO:/a:rw:1073741824:0:0:0:0"},
			storageReq: gib, storageLm: gib,
		},
		{
			name:    "a storage limit without a request sets the request",
			in:      `{"storage-limit":"1G"}`,
			request: []string{}, limit: []string{},
			flatReq: gib, flatLim: gib, storageReq: gib, storageLm: gib,
		},
		{
			name:    "a storage request above the limit raises the limit",
			in:      `{"storage-request":"2G","storage-limit":"1G"}`,
			request: []string{}, limit: []string{},
			flatReq: 2 * gib, flatLim: 2 * gib, storageReq: 2 * gib, storageLm: 2 * gib,
		},
		{
			name:    "a storage request alone raises the missing limit to it",
			in:      `{"storage-request":"1G"}`,
			request: []string{}, limit: []string{},
			flatReq: gib, flatLim: gib, storageReq: gib, storageLm: gib,
		},
		{
			name:    "storage sets both request and limit",
			in:      `{"storage":"1G"}`,
			request: []string{}, limit: []string{},
			flatReq: gib, flatLim: gib, storageReq: gib, storageLm: gib,
		},
		{
			name:    "storage-request overrides the request storage sets",
			in:      `{"storage":"1G","storage-request":"512M"}`,
			request: []string{}, limit: []string{},
			flatReq: 512 * mib, flatLim: gib, storageReq: 512 * mib, storageLm: gib,
		},
		{
			name:    "a number of bytes is a storage size",
			in:      `{"storage":1000}`,
			request: []string{}, limit: []string{},
			flatReq: 1000, flatLim: 1000, storageReq: 1000, storageLm: 1000,
		},
		{
			name:    "the bindings' sizes are added to the storage totals exactly once",
			in:      `{"volumes-request":["AUTO:/a:rw:100","/h:/b:rw:10"],"volumes":["AUTO:/a:rw:300","/h:/b:rw:10"],"storage-request":"1000","storage-limit":"2000"}`,
			request: []string{"AUTO:/a:rw:100:0:0:0:0", "/h:/b:rw:10:0:0:0:0"},
			limit:   []string{"AUTO:/a:rw:300:0:0:0:0", "/h:/b:rw:10:0:0:0:0"},
			flatReq: 1000, flatLim: 2000,
			storageReq: 1110, storageLm: 2310,
		},
		{
			name:    "a realloc request keeps its negative deltas as given",
			in:      `{"volumes":["AUTO:/a:rw:-10G"],"storage":"-1G"}`,
			signed:  true,
			request: []string{"AUTO:/a:rw:-10737418240:0:0:0:0"},
			limit:   []string{"AUTO:/a:rw:-10737418240:0:0:0:0"},
			flatReq: -gib, flatLim: -gib,
			storageReq: -11 * gib, storageLm: -11 * gib,
		},
		{
			name:    "an empty object asks nothing",
			in:      `{}`,
			request: []string{}, limit: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustRequest(t, tt.in, tt.signed)
			require.Equal(t, tt.request, strs(w.Request))
			require.Equal(t, tt.limit, strs(w.Limit))
			require.Equal(t, tt.flatReq, w.FlatRequest, "flat request")
			require.Equal(t, tt.flatLim, w.FlatLimit, "flat limit")
			require.Equal(t, tt.storageReq, w.StorageRequest, "storage request")
			require.Equal(t, tt.storageLm, w.StorageLimit, "storage limit")
		})
	}
}

func TestParseWorkloadRequestRefuses(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		signed bool
		errHas string
	}{
		{"lists of different lengths", `{"volumes-request":["AUTO:/a:rw:1"],"volumes":["AUTO:/a:rw:1","AUTO:/b:rw:1"]}`, false, "must describe the same bindings"},
		{"lists of mismatched bindings", `{"volumes-request":["AUTO:/a:rw:1"],"volumes":["AUTO:/b:rw:1"]}`, false, "no matching binding"},
		{"lists whose flags differ", `{"volumes-request":["AUTO:/a:rw:1"],"volumes":["AUTO:/a:ro:1"]}`, false, "no matching binding"},
		{"a binding listed twice", `{"volumes":["AUTO:/a:rw:1","AUTO:/a:wr:2"]}`, false, "listed twice"},
		{"an unknown key", `{"volumes":[],"size":"1G"}`, false, "unknown key"},
		{"two spellings of the limit list", `{"volumes":["AUTO:/a:rw:1"],"volume":["AUTO:/a:rw:1"]}`, false, "both given"},
		{"a list of numbers", `{"volumes":[1]}`, false, "want a list of volume bindings"},
		{"a JSON array instead of an object", `["AUTO:/a:rw:1"]`, false, "want a JSON object"},
		{"a monopoly binding of size 0 without quota", `{"volumes":["AUTO:/a:mrw:0"]}`, false, "needs a size"},
		{"a negative size outside realloc", `{"volumes":["AUTO:/a:rw:-1"]}`, false, "negative"},
		{"a negative storage outside realloc", `{"storage":"-1"}`, false, "negative"},
		{"a binding without destination", `{"volumes":["AUTO:"]}`, false, "no destination"},
		{"a storage total above 8 PiB", `{"volumes":["AUTO:/a:rw:8P"],"storage":"1"}`, false, "more than 8 PiB"},
		{"request quotas adding up beyond 2^53", `{"volumes":["AUTO:/a:rw:1:8P:0:0:0","AUTO:/b:rw:1:1:0:0:0"]}`, false, "more than 2^53 of read_IOPS"},
		{"limit quotas adding up beyond 2^53", `{"volumes-request":["AUTO:/a:rw:1","AUTO:/b:rw:1"],"volumes":["AUTO:/a:rw:1:0:0:0:8P","AUTO:/b:rw:1:0:0:0:8P"]}`, false, "more than 2^53 of write_bps"},
		{"a storage that is an object", `{"storage":{}}`, false, "neither a number nor a string"},
		{"invalid JSON", `{"volumes":`, false, "unexpected end"},
		{"a realloc storage below -8 PiB", `{"storage":"-8P","volumes":["AUTO:/a:rw:-1"]}`, true, "more than 8 PiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := ParseWorkloadRequest(raw(tt.in), tt.signed)
			require.ErrorContains(t, err, tt.errHas)
		})
	}
}

func TestDecodeWorkload(t *testing.T) {
	stored := `{
	  "volumes_request": ["AUTO:/data:rw:107374182400:0:0:0:0"],
	  "volumes_limit":   ["AUTO:/data:rw:107374182400:0:0:0:0"],
	  "volume_plan_request": {"AUTO:/data:rw:107374182400:0:0:0:0": {"/data0": 107374182400}},
	  "volume_plan_limit":   {"AUTO:/data:rw:107374182400:0:0:0:0": {"/data0": 107374182400}},
	  "storage_request": 107374182400,
	  "storage_limit": 107374182400,
	  "disks_request": [{"device": "/dev/vda", "mounts": ["/", "/data0"], "read_IOPS": 0, "write_IOPS": 0, "read_bps": 0, "write_bps": 0}],
	  "disks_limit":   []
	}`

	t.Run("the stored form docs/storage.md shows decodes and encodes back to itself", func(t *testing.T) {
		w, err := DecodeWorkload(raw(stored))
		require.NoError(t, err)
		require.Equal(t, []string{"AUTO:/data:rw:107374182400:0:0:0:0"}, strs(w.VolumesRequest))
		require.Equal(t, VolumePlan{"AUTO:/data:rw:107374182400:0:0:0:0": {"/data0": 100 * gib}}, w.VolumePlanRequest)
		require.Equal(t, 100*gib, w.StorageRequest)
		out, err := json.Marshal(w)
		require.NoError(t, err)
		require.JSONEq(t, stored, string(out))
	})

	t.Run("its engine params apply the limit plan and write the short form", func(t *testing.T) {
		w, err := DecodeWorkload(raw(stored))
		require.NoError(t, err)
		p, err := w.EngineParams()
		require.NoError(t, err)
		require.Equal(t, []string{"/data0:/data:rw:107374182400"}, p.Volumes)
		require.Equal(t, 100*gib, p.Storage)
		require.Empty(t, p.IOPSOptions)
	})

	t.Run("null is an empty workload that encodes with empty collections", func(t *testing.T) {
		w, err := DecodeWorkload(raw("null"))
		require.NoError(t, err)
		out, err := json.Marshal(w)
		require.NoError(t, err)
		require.JSONEq(t, `{"volumes_request":[],"volumes_limit":[],"volume_plan_request":{},"volume_plan_limit":{},
			"storage_request":0,"storage_limit":0,"disks_request":[],"disks_limit":[]}`, string(out))
	})

	t.Run("a list skips null entries", func(t *testing.T) {
		ws, err := DecodeWorkloads(raw(`[null, ` + stored + `, null]`))
		require.NoError(t, err)
		require.Len(t, ws, 1)
	})

	refusals := []struct {
		name, in, errHas string
	}{
		{"a list where one workload is expected", `[]`, "cannot unmarshal array"},
		{"a bad binding", `{"volumes_request":["AUTO"]}`, "1 parts"},
		{"a storage request beyond 8 PiB", `{"storage_request":9007199254740993}`, "out of range"},
		{"a plan beyond 8 PiB", `{"volume_plan_request":{"k":{"/d":-9007199254740993}}}`, "out of range"},
		{"a disk quota beyond 8 PiB", `{"disks_limit":[{"device":"/dev/a","read_bps":9007199254740993}]}`, "out of range"},
		{"a storage request that is not an integer", `{"storage_request":1.5}`, "cannot unmarshal number"},
	}
	for _, tt := range refusals {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := DecodeWorkload(raw(tt.in))
			require.ErrorContains(t, err, tt.errHas)
		})
	}

	t.Run("an object where a list of workloads is expected is refused", func(t *testing.T) {
		_, err := DecodeWorkloads(raw(stored))
		require.ErrorContains(t, err, "want a list")
	})
}

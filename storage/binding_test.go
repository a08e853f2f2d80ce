package storage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseBinding(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		signed bool
		want   VolumeBinding
		kind   Kind
	}{
		{
			name: "two parts name a source and a destination with flags rw",
			in:   "/host:/dst",
			want: VolumeBinding{Source: "/host", Destination: "/dst", Flags: "rw"},
			kind: Mount,
		},
		{
			name: "three parts add flags",
			in:   "/host:/dst:ro",
			want: VolumeBinding{Source: "/host", Destination: "/dst", Flags: "or"},
			kind: Mount,
		},
		{
			name: "four parts add a size in bytes",
			in:   "AUTO:/data:rw:1024",
			want: VolumeBinding{Source: "AUTO", Destination: "/data", Flags: "rw", Size: 1024},
			kind: Normal,
		},
		{
			name: "eight parts add the four IO quotas",
			in:   "/host:/dst:rw:0:100:200:1M:2M",
			want: VolumeBinding{Source: "/host", Destination: "/dst", Flags: "rw", Quota: Quota{100, 200, mib, 2 * mib}},
			kind: Mount,
		},
		{
			name: "flags wr are sorted to rw",
			in:   "AUTO:/data:wr:1",
			want: VolumeBinding{Source: "AUTO", Destination: "/data", Flags: "rw", Size: 1},
			kind: Normal,
		},
		{
			name: "flags rwm are sorted to mrw",
			in:   "AUTO:/data:rwm:1",
			want: VolumeBinding{Source: "AUTO", Destination: "/data", Flags: "mrw", Size: 1},
			kind: Monopoly,
		},
		{
			name: "empty flags mean rw",
			in:   "AUTO:/data::10",
			want: VolumeBinding{Source: "AUTO", Destination: "/data", Flags: "rw", Size: 10},
			kind: Normal,
		},
		{
			name: "100G is 100 GiB",
			in:   "AUTO:/data:rw:100G",
			want: VolumeBinding{Source: "AUTO", Destination: "/data", Flags: "rw", Size: 100 * gib},
			kind: Normal,
		},
		{
			name: "100GiB and 1T are binary units too",
			in:   "AUTO:/data:rw:1T:1k:1KiB:100GiB:1m",
			want: VolumeBinding{Source: "AUTO", Destination: "/data", Flags: "rw", Size: tib, Quota: Quota{kib, kib, 100 * gib, mib}},
			kind: Normal,
		},
		{
			name: "a path ending in AUTO is chosen by the scheduler",
			in:   "/data/AUTO:/dst:rw:5",
			want: VolumeBinding{Source: "/data/AUTO", Destination: "/dst", Flags: "rw", Size: 5},
			kind: Normal,
		},
		{
			name: "an empty source is chosen by the scheduler",
			in:   ":/dst:rw:5",
			want: VolumeBinding{Source: "", Destination: "/dst", Flags: "rw", Size: 5},
			kind: Normal,
		},
		{
			name: "AUTO with size 0 and no quota is unlimited",
			in:   "AUTO:/dst",
			want: VolumeBinding{Source: "AUTO", Destination: "/dst", Flags: "rw"},
			kind: Unlimited,
		},
		{
			name: "AUTO with size 0 and a quota is normal",
			in:   "AUTO:/dst:rw:0:1:0:0:0",
			want: VolumeBinding{Source: "AUTO", Destination: "/dst", Flags: "rw", Quota: Quota{1, 0, 0, 0}},
			kind: Normal,
		},
		{
			name: "a real path with flag m is still a mount",
			in:   "/host:/dst:mrw:5",
			want: VolumeBinding{Source: "/host", Destination: "/dst", Flags: "mrw", Size: 5},
			kind: Mount,
		},
		{
			name:   "a negative size is allowed when signed",
			in:     "AUTO:/data:rw:-10G:-1:0:0:0",
			signed: true,
			want:   VolumeBinding{Source: "AUTO", Destination: "/data", Flags: "rw", Size: -10 * gib, Quota: Quota{-1, 0, 0, 0}},
			kind:   Normal,
		},
		{
			name: "a size of exactly 8 PiB is accepted",
			in:   "AUTO:/data:rw:8P",
			want: VolumeBinding{Source: "AUTO", Destination: "/data", Flags: "rw", Size: 8 * pib},
			kind: Normal,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBinding(tt.in, tt.signed)
			require.NoError(t, err)
			require.Equal(t, tt.want, *b)
			require.Equal(t, tt.kind, b.Kind())
		})
	}
}

func TestParseBindingRefuses(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		signed bool
		errHas string
	}{
		{"a binding of one part", "/host", false, "1 parts"},
		{"a binding of five parts", "AUTO:/d:rw:1:2", false, "5 parts"},
		{"a binding of nine parts", "AUTO:/d:rw:1:2:3:4:5:6", false, "9 parts"},
		{"a binding without a destination", "AUTO::rw:1", false, "no destination"},
		{"a flag letter outside r, w, o, m", "AUTO:/d:rwx:1", false, "not one of"},
		{"a negative size when not signed", "AUTO:/d:rw:-1", false, "negative"},
		{"a negative quota when not signed", "AUTO:/d:rw:1:0:-1:0:0", false, "negative"},
		{"an empty size", "AUTO:/d:rw:", false, "empty"},
		{"a size that is not a number", "AUTO:/d:rw:lots", false, "not a number"},
		{"a size above 8 PiB", "AUTO:/d:rw:9P", false, "too large"},
		{"a size beyond int64", "AUTO:/d:rw:9223372036854775807", false, "too large"},
		{"a human size beyond float range", "AUTO:/d:rw:99999999999999999999P", true, "too large"},
		{"a signed size beyond 8 PiB", "AUTO:/d:rw:-9P", true, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseBinding(tt.in, tt.signed)
			require.ErrorContains(t, err, tt.errHas)
		})
	}
}

func TestBindingValidate(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		errHas string
	}{
		{"a monopoly binding of size 0 without IO quota is invalid", "AUTO:/d:mrw:0", "needs a size or an IO quota"},
		{"a negative size is invalid", "AUTO:/d:rw:-1", "negative size"},
		{"a negative quota is invalid", "AUTO:/d:rw:1:0:0:0:-5", "negative write_bps"},
		{"a monopoly binding of size 0 with IO quota is valid", "AUTO:/d:mrw:0:1:0:0:0", ""},
		{"a monopoly binding with a size is valid", "AUTO:/d:mrw:1", ""},
		{"a mount binding with flag m and no size is valid", "/host:/d:m", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBinding(tt.in, true)
			require.NoError(t, err)
			if tt.errHas == "" {
				require.NoError(t, b.Validate())
			} else {
				require.ErrorContains(t, b.Validate(), tt.errHas)
			}
		})
	}
}

func TestBindingString(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"a two-part binding is written in full", "/host:/dst", "/host:/dst:rw:0:0:0:0:0"},
		{"a human size is written in bytes", "AUTO:/data:wr:1G", "AUTO:/data:rw:1073741824:0:0:0:0"},
		{"quotas are written in bytes", "AUTO:/data:rwm:1K:1:2:1K:1M", "AUTO:/data:mrw:1024:1:2:1024:1048576"},
		{"an empty source stays empty", ":/data:o:5", ":/data:o:5:0:0:0:0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustBinding(t, tt.in)
			require.Equal(t, tt.want, b.String())
			again, err := ParseBinding(b.String(), false)
			require.NoError(t, err)
			require.Equal(t, b, again, "the full form parses back to the same binding")
		})
	}
}

func TestBindingEngineForm(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		device string
		size   int64
		want   string
	}{
		{"a mount without quota is src:dst:flags:size", "/host:/dst", "", 0, "/host:/dst:rw:0"},
		{"the device replaces the source and the size is the planned one", "AUTO:/data:rw:100", "/data0", 150, "/data0:/data:rw:150"},
		{"the m flag is dropped", "AUTO:/data:mrw:100", "/data0", 1000, "/data0:/data:rw:1000"},
		{"flag o rewrites r to ro", "AUTO:/data:or:1", "/data0", 1, "/data0:/data:ro:1"},
		{"flag o rewrites w to wo", "AUTO:/data:ow:1", "/data0", 1, "/data0:/data:wo:1"},
		{"flag o rewrites rw to rowo", "AUTO:/data:rwo:1", "/data0", 1, "/data0:/data:rowo:1"},
		{"flags m and o together are dropped and expanded", "AUTO:/data:mor:1", "/data0", 1, "/data0:/data:ro:1"},
		{"empty flags and size give src:dst", "/host:/dst:m", "", 0, "/host:/dst"},
		{"a quota gives the full form", "/host:/dst:rw:0:1:2:3:4", "", 0, "/host:/dst:rw:0:1:2:3:4"},
		{"a quota with a placed size gives the full form", "AUTO:/data:mrw:10:1:0:0:0", "/d", 20, "/d:/data:rw:20:1:0:0:0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, mustBinding(t, tt.in).EngineForm(tt.device, tt.size))
		})
	}
}

func TestBindingNeedsScheduling(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"/host:/dst:rw:100", false},
		{"/host:/dst:rw:0:1:0:0:0", true},
		{"AUTO:/dst", true},
		{"AUTO:/dst:rw:1", true},
		{"AUTO:/dst:mrw:1", true},
	}
	for _, tt := range tests {
		t.Run(tt.in+" needs the scheduler: "+map[bool]string{true: "yes", false: "no"}[tt.want], func(t *testing.T) {
			require.Equal(t, tt.want, mustBinding(t, tt.in).NeedsScheduling())
		})
	}
}

func TestCoveringDisk(t *testing.T) {
	r := Resource{Disks: []Disk{
		{Device: "/dev/root", Mounts: []string{"/"}},
		{Device: "/dev/data", Mounts: []string{"/data"}},
		{Device: "/dev/deep", Mounts: []string{"/data/deep/"}},
	}}
	tests := []struct {
		path string
		want int
	}{
		{"/data", 1},
		{"/data/x", 1},
		{"/database", 0},
		{"/data/deep", 2},
		{"/data/deep/er", 2},
		{"/data/deeper", 1},
		{"/etc", 0},
		{"relative", -1},
	}
	for _, tt := range tests {
		t.Run("the disk covering "+tt.path+" is the longest mount prefix by components", func(t *testing.T) {
			require.Equal(t, tt.want, r.coveringDisk(tt.path))
		})
	}
}

package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestParseDeclaration(t *testing.T) {
	cases := []struct{ name, in, id, path, err string }{
		{"a pool id and an absolute path are read", "ceph-a:/mnt/ceph-a", "ceph-a", "/mnt/ceph-a", ""},
		{"an id with dots and underscores is read", "nfs.1_b:/srv/nfs", "nfs.1_b", "/srv/nfs", ""},
		{"an id of 63 characters is the longest", strings.Repeat("a", 63) + ":/p", strings.Repeat("a", 63), "/p", ""},
		{"an id of 64 characters is refused", strings.Repeat("a", 64) + ":/p", "", "", "pool id"},
		{"an upper-case id is refused", "Ceph:/mnt", "", "", "pool id"},
		{"an id starting with a dash is refused", "-a:/mnt", "", "", "pool id"},
		{"an entry without a colon is refused", "ceph-a", "", "", "want pool_id:mount_path"},
		{"a relative path is refused", "ceph-a:mnt/ceph", "", "", "not absolute"},
		{"an unclean path is refused", "ceph-a:/mnt/../ceph", "", "", "not clean"},
		{"a trailing slash is refused", "ceph-a:/mnt/ceph/", "", "", "not clean"},
		{"a second colon is refused", "ceph-a:/mnt:x", "", "", "has a ':'"},
		{"a control character is refused", "ceph-a:/mnt/\n", "", "", "control character"},
		{"the root is refused", "ceph-a:/", "", "", "root directory"},
		{"an empty path is refused", "ceph-a:", "", "", "path is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, d, err := ParseDeclaration(tc.in)
			if tc.err != "" {
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.id, id)
			require.Equal(t, tc.path, d.Path)
		})
	}
}

func TestParsePools(t *testing.T) {
	cases := []struct {
		name, raw string
		want      map[string]Declaration
		err       string
	}{
		{"a list of entries is the request form", `["ceph-a:/mnt/ceph-a","nfs1:/mnt/nfs1"]`,
			map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}, "nfs1": {"/mnt/nfs1"}}, ""},
		{"an object is the stored form", `{"ceph-a":{"path":"/mnt/ceph-a"}}`, map[string]Declaration{"ceph-a": {"/mnt/ceph-a"}}, ""},
		{"an empty list declares no pool", `[]`, map[string]Declaration{}, ""},
		{"absent says nothing", ``, nil, ""},
		{"a pool given twice is refused", `["a:/x","a:/y"]`, nil, "declared twice"},
		{"two pools at one path are refused", `["pa:/mnt/shared","pb:/mnt/shared"]`, nil, "pools pa and pb are both declared at /mnt/shared"},
		{"a pool inside another's path is refused", `["pa:/mnt/a/b","pb:/mnt/a"]`, nil, "pool pa's path /mnt/a/b is inside pool pb's path /mnt/a"},
		{"a number is refused", `5`, nil, "want a list"},
		{"a stored form with an unknown field is refused", `{"a":{"path":"/x","n":1}}`, nil, "unknown field"},
		{"a stored form with a bad path is refused", `{"a":{"path":"x"}}`, nil, "not absolute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePools(json.RawMessage(tc.raw))
			if tc.err != "" {
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseRmPoolsAndDefault(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
		err      string
	}{
		{"two ids are read in order", "p2,p1", []string{"p1", "p2"}, ""},
		{"spaces around ids are dropped and duplicates merged", " p1 , p1", []string{"p1"}, ""},
		{"an empty list is refused", "", nil, "empty"},
		{"an empty entry is refused", "p1,,p2", nil, "pool id"},
		{"a bad id is refused", "P1", nil, "pool id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRmPools(tc.in)
			if tc.err != "" {
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	t.Run("a default pool must be a valid id", func(t *testing.T) {
		id, err := ParseDefaultPool("ceph-a")
		require.NoError(t, err)
		require.Equal(t, "ceph-a", id)
		_, err = ParseDefaultPool("ceph a")
		require.ErrorContains(t, err, "default-pool: pool id")
	})
}

func TestParseBinding(t *testing.T) {
	const obj = "v-0123456789abcdef"
	cases := []struct {
		name, in string
		signed   bool
		want     *Binding
		err      string
	}{
		{"a new object in the default pool is read", "POOL:/data:rw:100G", false,
			&Binding{Destination: "/data", Flags: "rw", Size: 100 << 30}, ""},
		{"a new object in a named pool is read", "POOL@ceph-a:/data:wr:100G", false,
			&Binding{Pool: "ceph-a", Destination: "/data", Flags: "rw", Size: 100 << 30}, ""},
		{"an existing object is read without a size", "POOL@ceph-a/" + obj + ":/data:rw", false,
			&Binding{Pool: "ceph-a", Object: obj, Destination: "/data", Flags: "rw"}, ""},
		{"an existing object is read in the full stored form", "POOL@ceph-a/" + obj + ":/data:ro:0:0:0:0:0", false,
			&Binding{Pool: "ceph-a", Object: obj, Destination: "/data", Flags: "or"}, ""},
		{"a stored new binding with zero quotas is read", "POOL@ceph-a:/data:rw:107374182400:0:0:0:0", false,
			&Binding{Pool: "ceph-a", Destination: "/data", Flags: "rw", Size: 107374182400}, ""},
		{"a realloc delta may shrink", "POOL@ceph-a/" + obj + ":/data:rw:-10G", true,
			&Binding{Pool: "ceph-a", Object: obj, Destination: "/data", Flags: "rw", Size: -10 << 30}, ""},
		{"a new object without a size is refused", "POOL:/data:rw", false, nil, "needs a size > 0"},
		{"a new object of size 0 is refused", "POOL@a:/data:rw:0", false, nil, "needs a size > 0"},
		{"an existing object with a size is refused", "POOL@a/" + obj + ":/data:rw:1G", false, nil, "takes its size from the object"},
		{"the m flag is refused", "POOL:/data:mrw:1G", false, nil, "flag m is invalid"},
		{"an IO quota is refused", "POOL:/data:rw:1G:100:0:0:0", false, nil, "take no IO quota"},
		{"a missing destination is refused", "POOL::rw:1G", false, nil, "no destination"},
		{"a relative destination is refused", "POOL:data:rw:1G", false, nil, "not absolute"},
		{"a bad pool id is refused", "POOL@Ceph:/data:rw:1G", false, nil, "pool id"},
		{"a bad object id is refused", "POOL@a/v-1:/data:rw", false, nil, "object id"},
		{"a source that is not POOL is refused", "AUTO:/data:rw:1G", false, nil, "not POOL"},
		{"five parts are refused", "POOL:/data:rw:1G:1", false, nil, "5 parts"},
		{"a negative size outside a realloc is refused", "POOL:/data:rw:-1G", false, nil, "negative"},
		{"an unknown flag is refused", "POOL:/data:rx:1G", false, nil, "not one of r, w, o"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ParseBinding(tc.in, tc.signed)
			if tc.err != "" {
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, b)
			again, err := ParseBinding(b.String(), tc.signed)
			require.NoError(t, err, "the stored form reads back")
			require.Equal(t, b, again)
		})
	}
	t.Run("the engine form puts the object under the node's pool path", func(t *testing.T) {
		b, err := ParseBinding("POOL@ceph-a:/data:rw:100G", false)
		require.NoError(t, err)
		require.Equal(t, "/mnt/ceph-a/"+obj+":/data:rw:107374182400", b.EngineForm("/mnt/ceph-a", obj, 100<<30))
		ro, err := ParseBinding("POOL:/data:ro:1G", false)
		require.NoError(t, err)
		require.Equal(t, "/p/"+obj+":/data:ro:1073741824", ro.EngineForm("/p", obj, 1<<30))
		require.Equal(t, "POOL:/data:or:1073741824:0:0:0:0", ro.String())
	})
	t.Run("only POOL and POOL@ sources are pool sources", func(t *testing.T) {
		require.True(t, IsPoolSource("POOL"))
		require.True(t, IsPoolSource("POOL@a"))
		require.False(t, IsPoolSource("POOLAUTO"))
		require.False(t, IsPoolSource("/POOL"))
	})
}

func TestMintObjectID(t *testing.T) {
	t.Run("an id is v- and the hex of eight random bytes", func(t *testing.T) {
		id, err := MintObjectID(bytes.NewReader([]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}))
		require.NoError(t, err)
		require.Equal(t, "v-0123456789abcdef", id)
		require.NoError(t, ValidObjectID(id))
	})
	t.Run("a short random source is an error", func(t *testing.T) {
		_, err := MintObjectID(bytes.NewReader([]byte{1, 2, 3}))
		require.ErrorContains(t, err, "minting a pool object id")
	})
	t.Run("a failing random source is an error wrapping its cause", func(t *testing.T) {
		cause := errors.New("no entropy")
		_, err := MintObjectID(failingReader{cause})
		require.ErrorIs(t, err, cause)
	})
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

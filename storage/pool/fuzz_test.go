package pool

import (
	"strings"
	"testing"

	"github.com/eru-extend/resources/types"
)

// FuzzParseBinding: any input is either refused with one invalid_argument
// line or read into a binding whose stored form reads back the same.
func FuzzParseBinding(f *testing.F) {
	for _, s := range []string{"POOL:/data:rw:100G", "POOL@ceph-a:/data:rw:1G", "POOL@ceph-a/v-0123456789abcdef:/data:rw",
		"POOL@a/v-0123456789abcdef:/d:ro:0:0:0:0:0", "POOL:/d:m:1G", "POOL:/d:rw:1G:1:2:3:4", ""} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, signed bool) {
		b, err := ParseBinding(s, signed)
		if err != nil {
			if types.ClassOf(err) != types.InvalidArgument || strings.Contains(err.Error(), "\n") {
				t.Fatalf("refusal of %q is not one invalid_argument line: %v", s, err)
			}
			return
		}
		again, err := ParseBinding(b.String(), signed)
		if err != nil || *again != *b {
			t.Fatalf("%q: stored form %q does not read back: %v", s, b.String(), err)
		}
		if !signed && b.Object == "" && b.Size <= 0 {
			t.Fatalf("%q: a new object without a size was accepted", s)
		}
	})
}

// FuzzParseDeclaration: any input is refused with one line or gives a
// valid id and a clean absolute path without ':'.
func FuzzParseDeclaration(f *testing.F) {
	for _, s := range []string{"ceph-a:/mnt/ceph-a", "a:/", "a:b", ":/x", "a:/x/../y", "a:/x\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, d, err := ParseDeclaration(s)
		if err != nil {
			if types.ClassOf(err) != types.InvalidArgument || strings.Contains(err.Error(), "\n") {
				t.Fatalf("refusal of %q is not one invalid_argument line: %v", s, err)
			}
			return
		}
		if ValidID(id) != nil || ValidPath(d.Path) != nil || id+":"+d.Path != s {
			t.Fatalf("%q read as %q %q", s, id, d.Path)
		}
	})
}

// FuzzParsePools: any JSON is refused with one invalid_argument line or
// gives declarations that validate.
func FuzzParsePools(f *testing.F) {
	for _, s := range []string{`["ceph-a:/mnt/ceph-a"]`, `{"a":{"path":"/x"}}`, `[1]`, `{"a":{"path":"/x","n":1}}`, `null`, `["a:/x","a:/y"]`, `"a:/x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := ParsePools(raw)
		if err != nil {
			if types.ClassOf(err) != types.InvalidArgument || strings.Contains(err.Error(), "\n") {
				t.Fatalf("refusal of %q is not one invalid_argument line: %v", raw, err)
			}
			return
		}
		if err := (Declarations{Pools: got}).Validate(); err != nil {
			t.Fatalf("%q read into declarations that do not validate: %v", raw, err)
		}
	})
}

// FuzzParseRmPools: any input is refused with one line or gives sorted,
// distinct, valid ids.
func FuzzParseRmPools(f *testing.F) {
	for _, s := range []string{"p1,p2", "", ",", "a,,b", " a , a "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := ParseRmPools(s)
		if err != nil {
			if types.ClassOf(err) != types.InvalidArgument || strings.Contains(err.Error(), "\n") {
				t.Fatalf("refusal of %q is not one invalid_argument line: %v", s, err)
			}
			return
		}
		for i, id := range ids {
			if ValidID(id) != nil || (i > 0 && ids[i-1] >= id) {
				t.Fatalf("%q read as %q", s, ids)
			}
		}
	})
}

package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
)

// BenchmarkReadNodes reads 1,000 names' keys under /k/, /j/ and an empty
// prefix out of 4,000 stored (about a node's record, registration and
// absent session): every fourth name, which ReadNames reads key by key;
// a run of 1,000 names, which it reads as spans; and the three prefixes
// whole (all 4,000 names), which Read does. pointCost is read off them.
func BenchmarkReadNodes(b *testing.B) {
	s := openEtcd(b, 5*time.Second)
	loadNames(b, s, 4000)
	ctx := context.Background()
	under := []string{"/k/", "/j/", "/s/"}
	read := func(b *testing.B, names []string) {
		b.ReportAllocs()
		for b.Loop() {
			got := 0
			err := s.ReadNames(ctx, store.NameRead{Names: names, Under: under}, func(*store.Snapshot) error { return nil }, func(snap *store.Snapshot, idx []int) error {
				for _, i := range idx {
					if _, ok := snap.Items["/k/"+names[i]]; ok {
						got++
					}
				}
				return nil
			})
			require.NoError(b, err)
			require.Equal(b, len(names), got)
		}
	}
	b.Run("1,000 names key by key", func(b *testing.B) { read(b, every(0, 4000, 4)) })
	b.Run("1,000 names as spans", func(b *testing.B) { read(b, every(0, 1000, 1)) })
	b.Run("4,000 names as prefixes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			snap, err := s.Read(ctx, nil, under)
			require.NoError(b, err)
			require.Len(b, snap.Items, 8000)
		}
	})
}

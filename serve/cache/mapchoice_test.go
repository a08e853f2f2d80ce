package cache_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cornelk/hashmap"
)

// BenchmarkCacheMapFill is why the cache is a Go map under its lock and not
// github.com/cornelk/hashmap (docs/serve.md): filling either with the keys
// of a cluster, as the cache's list does. The lock-free map's fill grows
// faster than linearly (n=1,000 → 3,000 → 10,000 gave 5 ms → 99 ms →
// 0.9 s on the development machine; a 10,000-node cluster has 30,000 keys),
// while every access of the cache takes its lock anyway:
//
//	go test ./serve/cache -run XXX -bench CacheMapFill -benchtime 3x
func BenchmarkCacheMapFill(b *testing.B) {
	for _, n := range []int{1000, 3000, 10000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("/eru/resource/storage/node-%05d", i)
		}
		b.Run(fmt.Sprintf("cornelk/hashmap/%d_keys", n), func(b *testing.B) {
			for range b.N {
				m := hashmap.New[string, []byte]()
				for _, k := range keys {
					m.Set(k, nil)
				}
				if m.Len() != n {
					b.Fatalf("%d keys set, %d held", n, m.Len())
				}
			}
		})
		b.Run(fmt.Sprintf("map_under_a_lock/%d_keys", n), func(b *testing.B) {
			for range b.N {
				var mu sync.RWMutex
				m := map[string][]byte{}
				mu.Lock()
				for _, k := range keys {
					m[k] = nil
				}
				mu.Unlock()
				if len(m) != n {
					b.Fatalf("%d keys set, %d held", n, len(m))
				}
			}
		})
	}
}

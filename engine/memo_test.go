package engine

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestARecordRemembersItsLastAnswers(t *testing.T) {
	t.Run("an answer stored is answered under its key only", func(t *testing.T) {
		var dr DecodedRecord
		dr.capacities.store("a", types.NodeCapacity{Capacity: 1}, maxCapacities)
		c, ok := dr.capacities.load("a", maxCapacities)
		require.True(t, ok)
		require.Equal(t, 1, c.Capacity)
		_, ok = dr.capacities.load("b", maxCapacities)
		require.False(t, ok)
	})
	t.Run("past its slots the oldest answers give way and the newest are kept", func(t *testing.T) {
		var dr DecodedRecord
		for i := range maxSamples + 3 {
			dr.samples.store(fmt.Sprint(i), []types.Metric{{Name: fmt.Sprint(i)}}, maxSamples)
		}
		for i := range maxSamples + 3 {
			m, ok := dr.samples.load(fmt.Sprint(i), maxSamples)
			if i < 3 {
				require.False(t, ok, "answer %d was replaced", i)
				continue
			}
			require.True(t, ok, "answer %d is one of the last %d", i, maxSamples)
			require.Equal(t, fmt.Sprint(i), m[0].Name)
		}
	})
	t.Run("stores and loads at once answer only what was stored under the key", func(t *testing.T) {
		var dr DecodedRecord
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 1000 {
					key := fmt.Sprint((w*1000 + i) % 40)
					if c, ok := dr.capacities.load(key, maxCapacities); ok {
						require.Equal(t, key, fmt.Sprint(c.Capacity))
					}
					var n int
					_, _ = fmt.Sscan(key, &n)
					dr.capacities.store(key, types.NodeCapacity{Capacity: n}, maxCapacities)
				}
			})
		}
		wg.Wait()
	})
}

package storage

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheCapacityQueryAgreesWithDeploy: the count a capacity query answers
// is the most a deploy then accepts, in the cases where the two used to
// part.
func TestTheCapacityQueryAgreesWithDeploy(t *testing.T) {
	t.Run("a node storage has no record of takes no mount binding, in the query as in a deploy", func(t *testing.T) {
		n := Rules{}.Empty()
		for _, volumes := range []string{`"/data0:/x"`, `"/data0:/x:rw"`} {
			w := mustRequest(t, `{"volumes":[`+volumes+`]}`, false)
			got, err := n.DeployCapacity(context.Background(), w, 10000)
			require.NoError(t, err)
			require.Zero(t, got.Capacity, volumes)
			_, err = n.Deploy(context.Background(), w, 1, 10000)
			require.ErrorContains(t, err, "no storage record for this node")
		}
		got, err := n.DeployCapacity(context.Background(), mustRequest(t, `{}`, false), 10)
		require.NoError(t, err)
		require.Equal(t, 10, got.Capacity, "a request asking nothing of storage fits anywhere")
	})
	t.Run("with IO quota, a node whose packing at the query's limit places nothing answers the one a deploy of one finds", func(t *testing.T) {
		// The random case a review found: the storage budget allows 20,
		// the search from the conversion point of 20 places nothing,
		// while a deploy of 1, from its own point, finds a plan.
		r := rand.New(rand.NewPCG(4, 99))
		for c := 0; c <= 1470; c++ {
			n := randomNode(r)
			bs := randomBindings(r, true)
			if uncoveredMount(n, bs) {
				continue
			}
			flat := r.Int64N(3000)
			maxDeploy := 1 + r.IntN(100)
			if c != 1470 {
				continue
			}
			w := mustRequest(t, requestJSON(bs, flat), false)
			got, err := n.DeployCapacity(context.Background(), w, maxDeploy)
			require.NoError(t, err)
			require.Positive(t, got.Capacity, "the query answers what a deploy of 1 finds")
			wls, err := n.Deploy(context.Background(), w, got.Capacity, maxDeploy)
			require.NoError(t, err)
			after, err := nextUsage(n, nil, nil, mustJSON(t, wls), true, true)
			require.NoError(t, err)
			_, err = after.Settle()
			require.NoError(t, err, "the plans commit")
			if got.Capacity < n.budget(w, maxDeploy) {
				_, err = n.Deploy(context.Background(), w, got.Capacity+1, maxDeploy)
				require.Error(t, err, "one more than the answer finds no plans")
			}
		}
	})
}

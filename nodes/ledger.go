package nodes

import (
	"maps"

	"github.com/eru-extend/resources/types"
)

// Release moves usage a plugin held on the node into the isolation ledger.
// It refuses, changing nothing, a ledger that would hold an amount past 2^53:
// core decodes the ledger it is answered as float64 and replays it, so such
// an amount could not come back exactly (a node isolated again before core's
// cleanup drew the last isolation's ledger down).
func (r *Registration) Release(plugin string, held types.Amounts) error {
	if held.IsZero() {
		return nil
	}
	sum, ok := r.Released[plugin].Add(held)
	if ok {
		for _, k := range sum.Keys() {
			if sum[k] > types.MaxExact {
				ok = false
				break
			}
		}
	}
	if !ok {
		return types.Errorf(types.FailedPrecondition, "the %s isolation ledger would hold more than 2^53 (%d) of a component: let core remove the workloads of the last isolation first", plugin, int64(types.MaxExact))
	}
	if r.Released == nil {
		r.Released = map[string]types.Amounts{}
	}
	r.Released[plugin] = nonZero(sum)
	return nil
}

// Ledger is what the isolation ledger holds for a plugin (nil when nothing).
func (r *Registration) Ledger(plugin string) types.Amounts {
	if r == nil {
		return nil
	}
	return r.Released[plugin]
}

// Absorb decides how a write that takes a plugin's usage on this node from
// old to next lands. On an isolated node a write whose net effect adds to any
// component is refused. Where the ledger holds released usage, each net
// decrease is taken from the ledger first and only the rest from live usage,
// so cleaning up a dead incarnation's workloads never drives live usage
// negative nor eats usage placed since. It returns the usage to store and
// whether the ledger changed; r is updated in place.
func (r *Registration) Absorb(plugin string, old, next types.Amounts) (types.Amounts, bool, error) {
	if r == nil {
		return next, false, nil
	}
	if err := r.RefuseGrowth(old, next); err != nil {
		return nil, false, err
	}
	ledger := r.Released[plugin]
	if len(ledger) == 0 {
		return next, false, nil
	}
	out := next.Clone()
	left := ledger.Clone()
	changed := false
	for _, k := range unionKeys(old, next) {
		dec := old[k] - next[k]
		if dec <= 0 || left[k] <= 0 {
			continue
		}
		take := min(dec, left[k])
		left[k] -= take
		out[k] += take
		changed = true
	}
	if changed {
		if left = nonZero(left); len(left) == 0 {
			delete(r.Released, plugin)
		} else {
			r.Released[plugin] = left
		}
		if len(r.Released) == 0 {
			r.Released = nil
		}
	}
	return out, changed, nil
}

// RefuseGrowth refuses, on an isolated node or a RETIRED tombstone, a write
// whose net effect adds to any component of a plugin's usage; decreases
// always pass.
func (r *Registration) RefuseGrowth(old, next types.Amounts) error {
	if r == nil || (!r.Isolated && r.Admission != Retired) {
		return nil
	}
	for _, k := range next.Keys() {
		if next[k] > old[k] {
			if r.Admission == Retired {
				return types.Errorf(types.FailedPrecondition, "node is RETIRED: the tombstone takes no growth, the write would add %d to %s", next[k]-old[k], k)
			}
			return types.Errorf(types.FailedPrecondition, "node is isolated: the write would add %d to %s", next[k]-old[k], k)
		}
	}
	return nil
}

// SetLedger replaces a plugin's ledger with a snapshot taken before a write
// (core replaying a before to roll the write back). It reports whether the
// ledger changed.
func (r *Registration) SetLedger(plugin string, a types.Amounts) bool {
	next := nonZero(a)
	if maps.Equal(next, nonZero(r.Released[plugin])) {
		return false
	}
	if len(next) == 0 {
		r.Forget(plugin)
		return true
	}
	if r.Released == nil {
		r.Released = map[string]types.Amounts{}
	}
	r.Released[plugin] = next
	return true
}

// Forget drops a plugin's ledger, when the plugin's record of the node goes.
func (r *Registration) Forget(plugin string) {
	delete(r.Released, plugin)
	if len(r.Released) == 0 {
		r.Released = nil
	}
}

func unionKeys(a, b types.Amounts) []string {
	u := a.Clone()
	for k := range b {
		u[k] = 0
	}
	return u.Keys()
}

func nonZero(a types.Amounts) types.Amounts {
	out := types.Amounts{}
	for k, v := range a {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

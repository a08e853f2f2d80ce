package engine

import (
	"encoding/json"

	"github.com/eru-extend/resources/types"
)

// LedgerKey is the key set-node-resource-usage adds to the before and after
// it answers when the node's isolation ledger is involved: the plugin's
// ledger at that point, flattened (component -> amount). core passes a
// before back unchanged when it rolls the write back (resource, with
// delta=false), and the replay sets the ledger back with the usage, so the
// node is exactly as it was before the write.
const LedgerKey = "isolation_ledger"

// takeLedger takes LedgerKey out of a usage change in stored or request
// form and returns the snapshot it held (nil when absent), so the resource
// sees its own shape only.
func takeLedger(c *types.Change) (types.Amounts, error) {
	snap, ok := c.Members[LedgerKey]
	if !ok || (c.Form != types.StoredForm && c.Form != types.RequestForm) {
		return nil, nil
	}
	var ledger types.Amounts
	if err := json.Unmarshal(snap, &ledger); err != nil || ledger == nil {
		return nil, types.Invalid("%s: want an object of integers from 0 to 2^53 (%d), as set-node-resource-usage answered it", LedgerKey, int64(types.MaxExact))
	}
	for _, k := range ledger.Keys() {
		switch v := ledger[k]; {
		case v < 0:
			return nil, types.Invalid("%s: %s is %d, below 0", LedgerKey, k, v)
		case v > types.MaxExact:
			return nil, types.Invalid("%s: %s is %d, above 2^53 (%d)", LedgerKey, k, v, int64(types.MaxExact))
		}
	}
	delete(c.Members, LedgerKey)
	return ledger, nil
}

// checkLedgerKeys refuses a ledger snapshot holding a key the resource's
// usage cannot produce (check, naming what is accepted). Keys are checked in
// order, so the same snapshot is always refused naming the same key.
func checkLedgerKeys(snap types.Amounts, check func(key string) error) error {
	for _, k := range snap.Keys() {
		if err := check(k); err != nil {
			return types.Wrap(types.InvalidArgument, err, LedgerKey)
		}
	}
	return nil
}

// withLedger adds the ledger snapshot to a usage view (a JSON object).
func withLedger(view any, ledger types.Amounts) (any, error) {
	data, err := json.Marshal(view)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, types.Wrap(types.Internal, err, "usage view is not an object")
	}
	if ledger == nil {
		ledger = types.Amounts{}
	}
	snap, err := json.Marshal(ledger)
	if err != nil {
		return nil, err
	}
	fields[LedgerKey] = snap
	return fields, nil
}

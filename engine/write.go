package engine

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// write runs fn on one node in a compare-and-swap transaction. fn returns
// the record to store (or the current one to store nothing) and the answer;
// it may change the registration through v.reg (the ledger). v.others says
// whether another plugin has a record of the node. The registry
// creates the registration on the node's first write and stores it with the
// record when it changed.
func (e *Engine[N, W]) write(ctx context.Context, node string, fn func(v *nodeView[N], env Env) (N, any, error)) (any, error) {
	return e.writeAs(ctx, node, writeMode[N]{}, fn)
}

// writeMode says which verb writes and in which mode, for a resource's
// linked records (Linked).
type writeMode[N any] struct {
	verb  string
	delta bool
	// answer, when set, renders the answer from the record actually
	// stored, once Link has adjusted it (a usage write's after).
	answer func(next N) (any, error)
}

// writeAs is write for a verb whose resource may link other records to the
// node's (Linked): their keys are read in the same transaction and their
// writes committed with the record, under compares on all of them.
func (e *Engine[N, W]) writeAs(ctx context.Context, node string, mode writeMode[N], fn func(v *nodeView[N], env Env) (N, any, error)) (any, error) {
	s, err := e.Open(ctx, true)
	if err != nil {
		return nil, err
	}
	linked, _ := any(e.Res).(Linked[N])
	var answer any
	keys := append([]string{e.recordKey(node)}, nodes.RecordKeys(node, e.Res.Name(), e.Resources)...)
	keys = append(keys, e.Res.SharedKeys()...)
	for {
		var more []string
		err = store.Update(ctx, s, keys, func(tx *store.Tx) error {
			now := e.Clock.Now()
			v, err := e.view(node, tx.Get)
			if err != nil {
				return err
			}
			v.others = nodes.OtherRecords(node, e.Res.Name(), e.Resources, tx.Get)
			v.reg.Writing(node, now)
			env, err := e.env(tx.Get)
			if err != nil {
				return err
			}
			next, out, err := fn(v, env)
			if err != nil {
				return err
			}
			var puts map[string][]byte
			if linked != nil {
				if more = missing(keys, linked.LinkedKeys(node, v.rec, next)); len(more) > 0 {
					return errMoreKeys
				}
				l := Link{Node: node, Verb: mode.verb, Delta: mode.delta, Isolated: v.reg.Isolated(), Retired: v.reg.Retired(), Now: now, Get: tx.Get,
					Named: func(k string) bool { return slices.Contains(keys, k) },
					Scan: func(prefix string) (map[string][]byte, error) {
						snap, err := s.Read(ctx, nil, []string{prefix})
						if err != nil {
							return nil, err
						}
						out := map[string][]byte{}
						for _, it := range snap.Under(prefix) {
							out[it.Key] = it.Value
						}
						return out, nil
					}}
				if next, puts, err = linked.Link(l, v.rec, next); err != nil {
					var mk *moreKeys
					if errors.As(err, &mk) {
						if more = missing(keys, mk.keys); len(more) > 0 {
							return errMoreKeys
						}
						return types.Wrap(types.Internal, err, "node "+node)
					}
					return err
				}
				if mode.answer != nil {
					if out, err = mode.answer(next); err != nil {
						return err
					}
				}
			}
			answer = out
			data, err := e.Res.Encode(next)
			if err != nil {
				return err
			}
			if before, _ := tx.Get(e.recordKey(node)); !bytes.Equal(data, before) {
				tx.Put(e.recordKey(node), data)
			}
			for _, k := range slices.Sorted(maps.Keys(puts)) {
				if before, ok := tx.Get(k); !ok || !bytes.Equal(puts[k], before) {
					tx.Put(k, puts[k])
				}
			}
			return v.reg.RecordWritten(tx, now)
		})
		if !errors.Is(err, errMoreKeys) {
			return answer, err
		}
		keys = append(keys, more...)
	}
}

// remove deletes the resource's record of node, if any, and lets the
// registry settle the registration in the same transaction.
func (e *Engine[N, W]) remove(ctx context.Context, node string) error {
	s, err := e.Open(ctx, true)
	if err != nil {
		return err
	}
	keys := append([]string{e.recordKey(node)}, nodes.RecordKeys(node, e.Res.Name(), e.Resources)...)
	return store.Update(ctx, s, keys, func(tx *store.Tx) error {
		v, err := e.view(node, tx.Get)
		if err != nil || !v.known {
			return err
		}
		if r, ok := any(e.Res).(Remover[N]); ok {
			if err := r.CheckRemove(v.rec); err != nil {
				return err
			}
		}
		tx.Delete(e.recordKey(node))
		return nodes.RecordRemoved(tx, node, e.Res.Name(), e.Resources)
	})
}

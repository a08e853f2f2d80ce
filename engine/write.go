package engine

import (
	"bytes"
	"context"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
)

// write runs fn on one node in a compare-and-swap transaction. fn returns
// the record to store (or the current one to store nothing) and the answer;
// it may change the registration through v.reg (the ledger). v.others says
// whether another plugin has a record of the node. The registry
// creates the registration on the node's first write and stores it with the
// record when it changed.
func (e *Engine[N, W]) write(ctx context.Context, node string, fn func(v *nodeView[N], env Env) (N, any, error)) (any, error) {
	s, err := e.Open(ctx, true)
	if err != nil {
		return nil, err
	}
	var answer any
	keys := append([]string{e.recordKey(node)}, nodes.RecordKeys(node, e.Res.Name(), e.Plugins)...)
	keys = append(keys, e.Res.SharedKeys()...)
	err = store.Update(ctx, s, keys, func(tx *store.Tx) error {
		now := e.Clock.Now()
		v, err := e.view(node, tx.Get)
		if err != nil {
			return err
		}
		v.others = nodes.OtherRecords(node, e.Res.Name(), e.Plugins, tx.Get)
		v.reg.Writing(node, now)
		env, err := e.env(tx.Get)
		if err != nil {
			return err
		}
		next, out, err := fn(v, env)
		if err != nil {
			return err
		}
		answer = out
		data, err := e.Res.Encode(next)
		if err != nil {
			return err
		}
		if before, _ := tx.Get(e.recordKey(node)); !bytes.Equal(data, before) {
			tx.Put(e.recordKey(node), data)
		}
		return v.reg.RecordWritten(tx, now)
	})
	return answer, err
}

// remove deletes the resource's record of node, if any, and lets the
// registry settle the registration in the same transaction.
func (e *Engine[N, W]) remove(ctx context.Context, node string) error {
	s, err := e.Open(ctx, true)
	if err != nil {
		return err
	}
	keys := append([]string{e.recordKey(node)}, nodes.RecordKeys(node, e.Res.Name(), e.Plugins)...)
	return store.Update(ctx, s, keys, func(tx *store.Tx) error {
		v, err := e.view(node, tx.Get)
		if err != nil || !v.known {
			return err
		}
		tx.Delete(e.recordKey(node))
		return nodes.RecordRemoved(tx, node, e.Res.Name(), e.Plugins)
	})
}

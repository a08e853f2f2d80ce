package nodes

import (
	"time"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// This file is the registry's side of a plugin verb: what a verb about a
// node reads of the registry, and what happens to the registration when the
// verb writes or removes the plugin's record of the node (docs/nodes.md).

// Keys are the registry keys a plugin verb reads with a node's record.
func Keys(node string) []string { return []string{RegistrationKey(node), SessionKey(node)} }

// Entry is a node as the registry knows it, read by a plugin verb: its
// registration (nil when the registry has never seen the node) and whether
// its session is live. A verb that writes the plugin's record calls Writing
// first and RecordWritten last.
type Entry struct {
	Reg  *Registration
	Live bool

	created, changed bool
}

// ReadEntry reads a node's registry state from a snapshot or a
// transaction.
func ReadEntry(node string, get func(string) ([]byte, bool)) (*Entry, error) {
	e := &Entry{}
	if data, ok := get(RegistrationKey(node)); ok {
		reg, err := decodeRegistration(node, data)
		if err != nil {
			return nil, err
		}
		e.Reg = reg
	}
	_, e.Live = get(SessionKey(node))
	return e, nil
}

// Refusal says why the node may not take new work, or "" when it may.
func (e *Entry) Refusal(p Policy) string { return e.Reg.Refusal(e.Live, p) }

// Ledger is what the isolation ledger holds for a plugin.
func (e *Entry) Ledger(plugin string) types.Amounts { return e.Reg.Ledger(plugin) }

// Isolated reports whether the node is isolated.
func (e *Entry) Isolated() bool { return e.Reg != nil && e.Reg.Isolated }

// Retired reports whether the node is a RETIRED tombstone.
func (e *Entry) Retired() bool { return e.Reg != nil && e.Reg.Admission == Retired }

// Writing prepares the registration for a write of a plugin record: a node
// gets its registration on the first write of any plugin record.
func (e *Entry) Writing(node string, now time.Time) {
	if e.Reg == nil {
		e.Reg = NewRegistration(node, now)
		e.created = true
	}
}

// Absorb lands a usage write that takes the plugin's usage from old to next
// against the isolation ledger (see Registration.Absorb) and returns the
// usage to store.
func (e *Entry) Absorb(plugin string, old, next types.Amounts) (types.Amounts, error) {
	out, changed, err := e.Reg.Absorb(plugin, old, next)
	e.changed = e.changed || changed
	return out, err
}

// RefuseGrowth refuses, on an isolated node, a write that adds usage.
func (e *Entry) RefuseGrowth(old, next types.Amounts) error { return e.Reg.RefuseGrowth(old, next) }

// RecordWritten stores the registration with the plugin's record when the
// write created it, or changed it (a new version).
func (e *Entry) RecordWritten(tx *store.Tx, now time.Time) error {
	switch {
	case e.created:
	case e.changed:
		e.Reg.touch(now)
	default:
		return nil
	}
	return putRegistration(tx, e.Reg)
}

// RemovalKeys are the keys RecordRemoved reads: the registry's keys of the
// node and every other plugin's record of it.
func RemovalKeys(node, plugin string, plugins []Plugin) []string {
	keys := Keys(node)
	for _, p := range plugins {
		if p.Name() != plugin {
			keys = append(keys, p.RecordPrefix()+node)
		}
	}
	return keys
}

// RecordRemoved settles the registration when remove-node deletes the
// plugin's record of the node: with the last plugin record the registration
// and the session go too, unless the node is a RETIRED tombstone; otherwise
// the plugin's isolation ledger is forgotten. The transaction must cover
// RemovalKeys.
func RecordRemoved(tx *store.Tx, node, plugin string, plugins []Plugin, now time.Time) error {
	data, ok := tx.Get(RegistrationKey(node))
	if !ok {
		return nil
	}
	reg, err := decodeRegistration(node, data)
	if err != nil {
		return err
	}
	last := true
	for _, p := range plugins {
		if p.Name() == plugin {
			continue
		}
		if _, ok := tx.Get(p.RecordPrefix() + node); ok {
			last = false
		}
	}
	if last && reg.Admission != Retired {
		tx.Delete(RegistrationKey(node))
		tx.Delete(SessionKey(node))
		return nil
	}
	if len(reg.Ledger(plugin)) == 0 {
		return nil
	}
	reg.Forget(plugin)
	reg.touch(now)
	return putRegistration(tx, reg)
}

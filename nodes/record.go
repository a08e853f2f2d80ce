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

// RefuseGrowth refuses, on an isolated node or a RETIRED tombstone, a write
// that adds usage.
func (e *Entry) RefuseGrowth(old, next types.Amounts) error { return e.Reg.RefuseGrowth(old, next) }

// RefuseRetired refuses a write of the plugin's record (what: "add-node",
// "capacity write", ...) on a RETIRED tombstone: a retired name never takes
// work or records again.
func (e *Entry) RefuseRetired(what string) error {
	if !e.Retired() {
		return nil
	}
	return types.Errorf(types.FailedPrecondition, "node is RETIRED: the tombstone of a retired node takes no %s; a new host takes a new node name", what)
}

// RestoreLedger sets the plugin's isolation ledger back to a snapshot a
// usage write answered in its before (core rolling the write back).
func (e *Entry) RestoreLedger(plugin string, a types.Amounts) {
	if e.Reg == nil {
		return
	}
	e.changed = e.Reg.SetLedger(plugin, a) || e.changed
}

// Adding prepares the registration for add-node of the plugin's record.
// others says whether another plugin still has a record of the node. When
// none does, the add is a new life of the name: drain, isolation, the
// ledger and a revoked admission left by the last life are cleared (a
// RETIRED tombstone is refused). When another does, only this plugin's
// ledger, left by its removed record, is forgotten.
func (e *Entry) Adding(plugin string, others bool) error {
	if e.Reg == nil {
		return nil
	}
	if err := e.RefuseRetired("add-node"); err != nil {
		return err
	}
	if !others {
		if !e.Reg.Pristine() {
			e.Reg.Admission, e.Reg.Drain, e.Reg.Isolated, e.Reg.Released = Admitted, false, false, nil
			e.changed = true
		}
		return nil
	}
	if len(e.Reg.Ledger(plugin)) > 0 {
		e.Reg.Forget(plugin)
		e.changed = true
	}
	return nil
}

// OtherRecords reports whether a plugin other than plugin has a record of
// the node; get must cover RecordKeys.
func OtherRecords(node, plugin string, plugins []Resource, get func(string) ([]byte, bool)) bool {
	for _, p := range plugins {
		if p.Name() == plugin {
			continue
		}
		if _, ok := get(p.RecordPrefix() + node); ok {
			return true
		}
	}
	return false
}

// RecordKeys are the keys a write of the plugin's record reads besides the
// record: the registry's keys of the node and every other plugin's record
// of it (for the last-record and new-life rules).
func RecordKeys(node, plugin string, plugins []Resource) []string {
	keys := Keys(node)
	for _, p := range plugins {
		if p.Name() != plugin {
			keys = append(keys, p.RecordPrefix()+node)
		}
	}
	return keys
}

// RecordRemoved settles the registration when remove-node deletes the
// plugin's record of the node. With the last plugin record a pristine
// registration (admitted, not drained, not isolated, no ledger) goes, and
// its session with it; any other stays whole, ledger included, so core's
// undo of the removal (set-node-resource-info of what it read) finds the
// node exactly as it was, and a RETIRED tombstone stays for ever. The
// transaction must cover RecordKeys.
func RecordRemoved(tx *store.Tx, node, plugin string, plugins []Resource) error {
	data, ok := tx.Get(RegistrationKey(node))
	if !ok {
		return nil
	}
	reg, err := decodeRegistration(node, data)
	if err != nil {
		return err
	}
	if OtherRecords(node, plugin, plugins, tx.Get) || !reg.Pristine() {
		return nil
	}
	tx.Delete(RegistrationKey(node))
	tx.Delete(SessionKey(node))
	return nil
}

// Status is the node's status, given whether any plugin records usage on
// it; a node the registry has never seen is READY (it may take work).
func (e *Entry) Status(holds bool, p Policy) Status {
	if e.Reg == nil {
		return StatusReady
	}
	return e.Reg.Status(e.Live, holds, p)
}

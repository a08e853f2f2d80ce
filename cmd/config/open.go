package config

import (
	"context"
	"errors"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/types"
)

// Mode says what a command needs of the store.
type Mode int

// Modes of opening the store. Only an absent embedded store is ever
// created, and only by a verb that creates nodes (add-node: Write); every
// other writer and every operator command must find an existing one, so
// that running from the wrong folder fails instead of answering from a
// fresh empty store. An existing file that is not a whole store is
// data_loss in every mode (see boltstore.Open).
const (
	Read          Mode = iota // read; a missing embedded store reads as empty
	Write                     // write; create the embedded store if missing: verbs that create nodes only
	ReadExisting              // read; the embedded store must exist
	WriteExisting             // write; the embedded store must exist
	// WriteNoCreate is for the plugin verbs that write but create no node:
	// a missing embedded store reads as empty (an unknown node is
	// not_found, as on an empty store), and a write to it fails naming
	// the missing file instead of creating it.
	WriteNoCreate
)

// Open opens the configured store: etcd when machines are named, else the
// embedded bbolt file.
func (c *Config) Open(ctx context.Context, mode Mode) (store.Store, error) {
	return c.OpenWaiting(ctx, mode, nil)
}

// OpenWaiting is Open for a process that opens the store call after call:
// the embedded store's lock waits that time out are bounded by waits (see
// boltstore.Waits).
func (c *Config) OpenWaiting(ctx context.Context, mode Mode, waits *boltstore.Waits) (store.Store, error) {
	if c.UsesEtcd() {
		dial := min(c.Etcd.DialTimeout, c.Etcd.CallTimeout)
		s, err := etcdstore.Open(ctx, etcdstore.Config{
			Endpoints:   c.Etcd.Machines,
			Prefix:      c.Etcd.Prefix,
			CA:          c.Etcd.CA,
			Cert:        c.Etcd.Cert,
			Key:         c.Etcd.Key,
			Username:    c.Etcd.Username,
			Password:    c.Etcd.Password,
			DialTimeout: dial,
		})
		var setting *etcdstore.SettingError
		if errors.As(err, &setting) {
			// An endpoint or a TLS file refused: say where it was written.
			if c.File == "" {
				return nil, types.Wrap(types.ClassOf(err), err, "built-in defaults")
			}
			return nil, types.Errorf(types.ClassOf(err), "config %s: %w%s", c.File, err, lineNote(c.lineOf(setting.Key, setting.Value)))
		}
		return s, err
	}
	opts := boltstore.Options{Prefix: c.Etcd.Prefix, LockTimeout: c.Embedded.LockTimeout, Waits: waits}
	switch mode {
	case Read:
		opts.ReadOnly = true
	case Write:
		opts.Create = true
	case ReadExisting:
		opts.ReadOnly = true
		opts.MustExist = true
	case WriteNoCreate:
		opts.EmptyIfMissing = true
	}
	return boltstore.Open(c.Embedded.Path, opts)
}

package store

import "context"

// KeyReader is a Store that can read many single keys better than Read
// does: etcd sends the transactions a large read is split into side by
// side, pinned to one revision, and reads the whole prefixes holding the
// keys instead when they hold few more keys than those asked for.
type KeyReader interface {
	// ReadKeys returns keys in one consistent snapshot, as Read does. Every
	// key must lie under one of within; the snapshot may also hold other
	// keys under within (when the store chose to read them whole).
	ReadKeys(ctx context.Context, keys []string, within []string) (*Snapshot, error)
}

// ReadKeys reads keys, which all lie under the prefixes within, in one
// consistent snapshot, through the store's KeyReader when it has one. A
// query naming nodes reads their keys this way, so that its cost follows
// the nodes it names rather than the size of the cluster. The snapshot may
// hold other keys under within too; look keys up with Get.
func ReadKeys(ctx context.Context, s Store, keys []string, within []string) (*Snapshot, error) {
	if kr, ok := s.(KeyReader); ok {
		return kr.ReadKeys(ctx, keys, within)
	}
	return s.Read(ctx, keys, nil)
}

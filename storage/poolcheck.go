package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// CheckPoolPaths checks every pool path the node's storage record declares
// (for `nodes heartbeat`): the path exists, is a directory, and, unless
// existsOnly, is a mount point. A node storage has no record of checks
// nothing (nil).
func CheckPoolPaths(ctx context.Context, s store.Store, node string, existsOnly bool) (map[string]nodes.PoolCheck, error) {
	data, ok, err := store.Get(ctx, s, nodes.RecordPrefix("storage")+node)
	if err != nil || !ok {
		return nil, err
	}
	n, err := DecodeNode(data)
	if err != nil {
		return nil, types.Wrap(types.DataLoss, err, "storage record of node "+node)
	}
	if len(n.Capacity.Pools) == 0 {
		return nil, nil
	}
	out := map[string]nodes.PoolCheck{}
	for _, id := range n.Declarations().IDs() {
		out[id] = checkPoolPath(n.Capacity.Pools[id].Path, existsOnly)
	}
	return out, nil
}

// checkPoolPath checks one path.
func checkPoolPath(path string, existsOnly bool) nodes.PoolCheck {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nodes.PoolCheck{Reason: fmt.Sprintf("%s: %v", path, unwrapPathError(err))}
	case !fi.IsDir():
		return nodes.PoolCheck{Reason: path + " is not a directory"}
	case existsOnly:
		return nodes.PoolCheck{Available: true}
	}
	parent, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return nodes.PoolCheck{Reason: fmt.Sprintf("%s: %v", filepath.Dir(path), unwrapPathError(err))}
	}
	a, okA := fi.Sys().(*syscall.Stat_t)
	b, okB := parent.Sys().(*syscall.Stat_t)
	if !okA || !okB || (a.Dev == b.Dev && a.Ino != b.Ino) {
		return nodes.PoolCheck{Reason: path + " is not a mount point"}
	}
	return nodes.PoolCheck{Available: true}
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

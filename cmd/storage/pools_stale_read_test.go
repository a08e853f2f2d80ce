package main_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/storage/pooladmin"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/tests/testenv"
	"github.com/eru-extend/resources/types"
)

// The commands below last longer than a store call and read the store more
// than once. Each test runs one of them in this process, through the same
// MoveSteps or CleanupSteps the binary runs, with a step function that
// lets other commands run through the binary between its store steps.

// stepsWith opens the embedded store for each step, as the binary does,
// and calls between(n) after the n-th step (from 1).
func stepsWith(t *testing.T, env *testenv.Env, between func(n int)) pooladmin.Step {
	n := 0
	return func(fn func(context.Context, *pooladmin.Admin) error) error {
		s, err := boltstore.Open(env.DB, boltstore.Options{Prefix: env.Prefix, LockTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		err = fn(context.Background(), &pooladmin.Admin{Store: s})
		require.NoError(t, s.Close())
		n++
		between(n)
		return err
	}
}

// TestPoolCleanupDecidesEachEntryOnAFreshRead: a cleanup that read its
// pool's entries, while another cleanup removes one of those copies and
// drops its entry and a move then brings the object's live copy to that
// very place, leaves the live copy alone.
func TestPoolCleanupDecidesEachEntryOnAFreshRead(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	a, b, _, objects := movablePoolObjects(t, env, 1)
	object := objects[0]
	fillObject(t, a, object)
	// The target copy of an aborted move, left behind.
	addCleanupEntry(t, env, "nfs1", object, "aborted")
	require.NoError(t, os.MkdirAll(filepath.Join(b, object), 0o755))

	var live map[string]string
	step := stepsWith(t, env, func(n int) {
		if n != 1 {
			return
		}
		// After the first cleanup's read: a second one handles the entry,
		// then the object moves into nfs1.
		env.OpOK(t, "storage", nil, "pools", "cleanup", "nfs1", "--node", "n1")
		env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1")
		require.Equal(t, "nfs1", poolObjects(t, env, "n1")[object].Pool)
		live = tree(t, filepath.Join(b, object))
		require.NotEmpty(t, live)
	})
	cleaned, err := pooladmin.CleanupSteps(context.Background(), step, "nfs1", "n1")
	require.NoError(t, err)
	require.Empty(t, cleaned.Removed, "the entry was handled by the other cleanup")
	require.Empty(t, cleaned.Dropped)
	require.Equal(t, "nfs1", poolObjects(t, env, "n1")[object].Pool)
	require.Equal(t, live, tree(t, filepath.Join(b, object)), "the object's live copy is whole")
	noDrift(t, env)
}

// TestPoolMoveRefusesAnObjectThatMovedSinceItBegan: a move that found its
// object in ceph-a, while the object moves to p3 (whose source removal
// never happened) and a move of it to nfs1 under the same id starts from
// p3 and stops, is refused (aborted, nothing written): it would copy
// ceph-a's stale copy into nfs1, settle on it and leave p3's reservation
// behind. Run again, it resumes from p3 and settles on the live data.
func TestPoolMoveRefusesAnObjectThatMovedSinceItBegan(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:" + a, "nfs1:" + b, "p3:" + c}, "default-pool": "ceph-a"})
	for _, p := range []string{"ceph-a", "nfs1", "p3"} {
		env.OpOK(t, "storage", nil, "pools", "set-capacity", p, "100G", "--if-version", "0")
	}
	d := deploy(t, env, "n1", 1, obj{"volumes": []string{"POOL:/data:rw:10G"}})
	commit(t, env, "n1", d.WorkloadsResource, true)
	object := poolPlans(t, d.WorkloadsResource[0])["POOL:/data:rw:10737418240:0:0:0:0"].Object
	require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(a, object, "f"), []byte("old"), 0o644))

	var afterTheOthers map[string]string
	step := stepsWith(t, env, func(n int) {
		if n != 1 {
			return
		}
		env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "p3", "--node", "n1")
		// That move's source removal did not happen: ceph-a keeps its copy
		// and the cleanup entry.
		require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(a, object, "f"), []byte("old"), 0o644))
		addCleanupEntry(t, env, "ceph-a", object, "moved")
		// The workload writes in p3; a move to nfs1 under the default id
		// starts from p3 and stops on a file it cannot copy.
		require.NoError(t, os.WriteFile(filepath.Join(c, object, "f"), []byte("new data"), 0o644))
		require.NoError(t, syscall.Mkfifo(filepath.Join(c, object, "fifo"), 0o644))
		require.Equal(t, 7, env.Op(t, "storage", "pools", "move", object, "--to", "nfs1", "--node", "n1").Code)
		require.NoError(t, os.Remove(filepath.Join(c, object, "fifo")))
		afterTheOthers = env.Dump(t)
	})
	_, err := pooladmin.MoveSteps(context.Background(), step, pooladmin.MoveRequest{Object: object, To: "nfs1", Node: "n1"})
	require.Equal(t, types.Aborted, types.ClassOf(err), "%v", err)
	require.ErrorContains(t, err, "object "+object+" moved to pool p3 after this move found it in pool ceph-a; run the move again")
	require.Equal(t, afterTheOthers, env.Dump(t), "the refused move wrote nothing")
	_, err = os.Lstat(filepath.Join(b, object))
	require.True(t, os.IsNotExist(err), "and copied nothing")

	env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1")
	got, err := os.ReadFile(filepath.Join(b, object, "f"))
	require.NoError(t, err)
	require.Equal(t, "new data", string(got), "the move settled on the live data")
	require.Equal(t, "nfs1", poolObjects(t, env, "n1")[object].Pool)
	require.Zero(t, poolGet(t, env, "p3").Reserved)
	require.Equal(t, 10*gib, poolGet(t, env, "nfs1").Reserved)
	noDrift(t, env)
}

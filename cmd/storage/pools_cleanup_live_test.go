package main_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// cleanedAnswer is `storage pools cleanup`'s answer.
type cleanedAnswer struct {
	Pool    string `json:"pool"`
	Removed []struct {
		Object string `json:"object_id"`
		Reason string `json:"reason"`
	} `json:"removed"`
	Dropped []struct {
		Object   string `json:"object_id"`
		Reason   string `json:"reason"`
		Path     string `json:"path"`
		LivePool string `json:"live_pool"`
		LivePath string `json:"live_path"`
		Why      string `json:"why"`
	} `json:"dropped"`
}

// addCleanupEntry gives pool p's record a cleanup entry for object, as a
// move that settled (reason moved, in its source) or was aborted (reason
// aborted, in its target) leaves one until its copy is removed: a crash
// between that transaction and the removal, or a version that removed
// nothing, leaves it there.
func addCleanupEntry(t *testing.T, env *testenv.Env, p, object, reason string) {
	t.Helper()
	var rec map[string]any
	require.True(t, env.Record(t, "/pools/"+p, &rec))
	cleanups, _ := rec["cleanups"].([]any)
	cleanups = append(cleanups, map[string]any{"object_id": object, "reason": reason, "command_id": "m-" + reason,
		"bytes": 10 * gib, "since": "2026-11-30T12:30:00Z"})
	rec["cleanups"], rec["cleanup_count"] = cleanups, len(cleanups)
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	env.Put(t, "/pools/"+p, string(data))
}

// fillObject writes a small tree as object's data under pool path root.
func fillObject(t *testing.T, root, object string) {
	t.Helper()
	dir := filepath.Join(root, object)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("precious "+object), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "g"), make([]byte, 70_000), 0o600))
	require.NoError(t, os.Symlink("sub/g", filepath.Join(dir, "link")))
}

// tree is every entry under dir: its mode and content (a symlink's target).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := d.Info()
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		content := ""
		switch {
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			content = string(data)
		case info.Mode()&fs.ModeSymlink != 0:
			content, err = os.Readlink(p)
			require.NoError(t, err)
		}
		out[rel] = info.Mode().String() + " " + content
		return nil
	}))
	require.NotEmpty(t, out)
	return out
}

// cleanupRecord is the stored pool record's cleanup part.
type cleanupRecord struct {
	Count    int               `json:"cleanup_count"`
	Cleanups []json.RawMessage `json:"cleanups"`
}

// TestPoolCleanupKeepsTheLiveObject: a cleanup entry whose copy is the
// object's live copy on this host (pools a record declares at one place,
// as one written before that was refused can; one path, or one directory
// through a symlink) is dropped without removing anything, and the answer
// says so; an ordinary entry of the same pool is still removed.
func TestPoolCleanupKeepsTheLiveObject(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, _, objects := movablePoolObjects(t, env, 2)
		const stale = "v-00000000000000ff" // an object no record keeps any more
		moved, aborted := objects[0], objects[1]

		// moved: a settled move's source entry in ceph-a, while nfs1,
		// where the object lives, is ceph-a's directory through a symlink.
		fillObject(t, a, moved)
		env.OpOK(t, "storage", nil, "pools", "move", moved, "--to", "nfs1", "--node", "n1")
		require.NoError(t, os.Rename(filepath.Join(b, moved), filepath.Join(a, moved)))
		require.NoError(t, os.Remove(b))
		require.NoError(t, os.Symlink(a, b))
		addCleanupEntry(t, env, "ceph-a", moved, "moved")
		// ordinary: the copy an old move left of an object since deleted.
		fillObject(t, a, stale)
		addCleanupEntry(t, env, "ceph-a", stale, "moved")

		movedTree := tree(t, filepath.Join(b, moved))

		t.Run("a settled move's source that is the live object through a symlink is dropped, not removed", func(t *testing.T) {
			live := movedTree
			cephA, nfs1 := poolGet(t, env, "ceph-a"), poolGet(t, env, "nfs1")
			require.EqualValues(t, 2, cephA.Cleanups)

			var out cleanedAnswer
			env.OpOK(t, "storage", &out, "pools", "cleanup", "ceph-a", "--node", "n1")
			require.Equal(t, live, tree(t, filepath.Join(b, moved)), "cleanup removed the object's live data")
			require.Equal(t, "ceph-a", out.Pool)
			require.Len(t, out.Removed, 1)
			require.Equal(t, stale, out.Removed[0].Object)
			require.NoDirExists(t, filepath.Join(a, stale), "an ordinary entry's copy is still removed")
			require.Len(t, out.Dropped, 1)
			d := out.Dropped[0]
			require.Equal(t, moved, d.Object)
			require.Equal(t, "moved", d.Reason)
			require.Equal(t, filepath.Join(a, moved), d.Path)
			require.Equal(t, "nfs1", d.LivePool)
			require.Equal(t, filepath.Join(b, moved), d.LivePath)
			require.Equal(t, "pool ceph-a's copy of object "+moved+" is its live copy in pool nfs1 ("+filepath.Join(a, moved)+" is "+
				filepath.Join(b, moved)+"): the entry is dropped and nothing removed", d.Why)

			var rec cleanupRecord
			require.True(t, env.Record(t, "/pools/ceph-a", &rec))
			require.Zero(t, rec.Count)
			require.Empty(t, rec.Cleanups)
			after := poolGet(t, env, "ceph-a")
			require.Equal(t, 10*gib, after.Reserved, "the object still in ceph-a")
			require.EqualValues(t, 1, after.Objects)
			require.Equal(t, cephA.Version, after.Version, "dropping an entry is not a capacity change")
			require.Equal(t, nfs1, poolGet(t, env, "nfs1"))
			require.Equal(t, objectState{Pool: "nfs1", State: "AVAILABLE"}, poolObject(t, env, moved))
			noDrift(t, env)
		})

		t.Run("an aborted move's target that is the live object at one path is dropped, not removed", func(t *testing.T) {
			// Undo the symlink, then declare nfs1 at ceph-a's path, as an
			// old record could, with an aborted move's entry in nfs1.
			require.NoError(t, os.Remove(b))
			require.NoError(t, os.Mkdir(b, 0o755))
			samePlace(t, env, a, b)
			fillObject(t, a, aborted)
			addCleanupEntry(t, env, "nfs1", aborted, "aborted")
			live := tree(t, filepath.Join(a, aborted))
			before := poolGet(t, env, "nfs1")

			res := env.Op(t, "storage", "pools", "cleanup", "nfs1", "--node", "n1", "-o", "table")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Equal(t, live, tree(t, filepath.Join(a, aborted)), "cleanup removed the object's live data")
			here := filepath.Join(a, aborted)
			require.Contains(t, res.Stdout, "pool nfs1's copy of object "+aborted+" is its live copy in pool ceph-a ("+here+" is "+here+
				"): the entry is dropped and nothing removed")
			require.Equal(t, movedTree, tree(t, filepath.Join(a, moved)), "nor another object's")

			var rec cleanupRecord
			require.True(t, env.Record(t, "/pools/nfs1", &rec))
			require.Zero(t, rec.Count)
			require.Empty(t, rec.Cleanups)
			after := poolGet(t, env, "nfs1")
			before.Cleanups = 0
			require.Equal(t, before, after)
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
			require.Equal(t, objectState{Pool: "ceph-a", State: "AVAILABLE"}, poolObject(t, env, aborted))
			noDrift(t, env)
		})
	})
}

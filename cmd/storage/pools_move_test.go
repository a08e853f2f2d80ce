package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolMove: an object moves between two pool paths on a node that
// reaches both, with its data; the source copy goes once the move settled.
func TestPoolMove(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, _, objects := movablePoolObjects(t, env, 1)
		object := objects[0]
		src := filepath.Join(a, object)
		require.NoError(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, "sub", "f"), []byte("data"), 0o640))
		require.NoError(t, os.Symlink("sub/f", filepath.Join(src, "link")))

		t.Run("the move copies the tree, settles in the target pool and removes the source", func(t *testing.T) {
			var o struct {
				Pool  string `json:"pool"`
				State string `json:"state"`
				Node  string `json:"node_id"`
			}
			env.OpOK(t, "storage", &o, "pools", "move", object, "--to", "nfs1", "--node", "n1")
			require.Equal(t, "nfs1", o.Pool)
			require.Equal(t, "AVAILABLE", o.State)
			got, err := os.ReadFile(filepath.Join(b, object, "sub", "f"))
			require.NoError(t, err)
			require.Equal(t, "data", string(got))
			link, err := os.Readlink(filepath.Join(b, object, "link"))
			require.NoError(t, err)
			require.Equal(t, "sub/f", link)
			_, err = os.Lstat(src)
			require.True(t, os.IsNotExist(err), "the source copy is removed after the settle")
			require.Zero(t, poolGet(t, env, "ceph-a").Reserved)
			require.Equal(t, 10*gib, poolGet(t, env, "nfs1").Reserved)
			noDrift(t, env)
		})
		t.Run("running it again changes nothing", func(t *testing.T) {
			before := env.Dump(t)
			env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1")
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("an abort of a settled move removes nothing", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1", "--abort")
			_, err := os.Stat(filepath.Join(b, object, "sub", "f"))
			require.NoError(t, err)
			noDrift(t, env)
		})
		t.Run("a move without --to is invalid_argument", func(t *testing.T) {
			require.Equal(t, 2, env.Op(t, "storage", "pools", "move", object, "--node", "n1").Code)
		})
	})
}

// TestPoolMoveInterrupted: a copy that fails leaves the object MOVING and
// reserved in both pools; --abort releases the target and keeps the
// source; the same move then runs to the end.
func TestPoolMoveInterrupted(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, workloads, objects := movablePoolObjects(t, env, 1)
		object := objects[0]
		src := filepath.Join(a, object)
		require.NoError(t, os.MkdirAll(src, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644))
		require.NoError(t, syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644))

		t.Run("a copy that fails leaves the object moving, reserved in both pools", func(t *testing.T) {
			res := env.Op(t, "storage", "pools", "move", object, "--to", "nfs1", "--node", "n1", "--command-id", "m1")
			require.Equal(t, 7, res.Code, res.Stderr)
			require.Contains(t, res.Stderr, "fifo")
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
			require.Equal(t, 10*gib, poolGet(t, env, "nfs1").Reserved)
			line := env.Fail(t, "storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": workloads[0],
				"workload_resource_request": obj{"volumes": []string{"POOL:/data:rw:1G"}}})
			require.Contains(t, line, "unavailable: object "+object+" is moving to pool nfs1")
			noDrift(t, env)
		})
		t.Run("--abort releases the target and keeps the source", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1", "--command-id", "m1", "--abort")
			requireBackInCephA(t, env, object, 10*gib)
			_, err := os.Stat(filepath.Join(src, "f"))
			require.NoError(t, err)
			_, err = os.Lstat(filepath.Join(b, object))
			require.True(t, os.IsNotExist(err))
		})
		t.Run("once the source is copyable the move runs to the end", func(t *testing.T) {
			require.NoError(t, os.Remove(filepath.Join(src, "fifo")))
			env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1", "--command-id", "m2")
			got, err := os.ReadFile(filepath.Join(b, object, "f"))
			require.NoError(t, err)
			require.Equal(t, "data", string(got))
			require.Zero(t, poolGet(t, env, "ceph-a").Reserved)
			require.Equal(t, 10*gib, poolGet(t, env, "nfs1").Reserved)
			noDrift(t, env)
		})
	})
}

// TestPoolCleanup: a copy a crash left behind (a cleanup entry) is removed
// by `pools cleanup` on a node that declares the pool.
func TestPoolCleanup(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a := t.TempDir()
		addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:" + a}})
		const object = "v-00000000000000ff"
		require.NoError(t, os.MkdirAll(filepath.Join(a, object, "d"), 0o755))
		env.Put(t, "/pools/ceph-a", `{"pool_id":"ceph-a","reserved_bytes":0,"version":0,"object_count":0,"cleanup_count":1,`+
			`"declared_at":"2026-11-30T12:00:00Z","lost_at":null,"cleanups":[{"object_id":"`+object+`","reason":"moved","command_id":"m1","bytes":5,"since":"2026-11-30T12:30:00Z"}]}`)
		var out struct {
			Removed []struct {
				Object string `json:"object_id"`
			} `json:"removed"`
		}
		env.OpOK(t, "storage", &out, "pools", "cleanup", "ceph-a", "--node", "n1")
		require.Len(t, out.Removed, 1)
		require.Equal(t, object, out.Removed[0].Object)
		_, err := os.Lstat(filepath.Join(a, object))
		require.True(t, os.IsNotExist(err))
		var rec struct {
			Count int `json:"cleanup_count"`
		}
		require.True(t, env.Record(t, "/pools/ceph-a", &rec))
		require.Zero(t, rec.Count)
		require.Equal(t, 2, env.Op(t, "storage", "pools", "cleanup", "ceph-a").Code, "--node is required")
	})
}

// TestPoolMoveProgress: `pools move --progress` prints its copy's progress
// on stderr (files and bytes of the total, what an earlier run had
// copied), while stdout stays the one JSON answer; without the flag and
// off a terminal it prints nothing there.
func TestPoolMoveProgress(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, _, objects := movablePoolObjects(t, env, 2)
		fill := func(object string) {
			require.NoError(t, os.MkdirAll(filepath.Join(a, object, "sub"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(a, object, "big"), make([]byte, 3<<20), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(a, object, "sub", "small"), make([]byte, 1<<20), 0o644))
		}
		answer := func(t *testing.T, res testenv.Result) {
			t.Helper()
			require.Equal(t, 0, res.Code, res.Stderr)
			var o struct {
				Pool string `json:"pool"`
			}
			require.NoError(t, json.Unmarshal([]byte(res.Stdout), &o), "stdout is the one JSON answer: %q", res.Stdout)
			require.Equal(t, "nfs1", o.Pool)
		}

		t.Run("the last progress line says every file and byte is copied, and stdout is the answer", func(t *testing.T) {
			fill(objects[0])
			res := env.Op(t, "storage", "pools", "move", objects[0], "--to", "nfs1", "--node", "n1", "--progress")
			answer(t, res)
			lines := strings.Split(strings.TrimSpace(res.Stderr), "\n")
			require.Equal(t, "storage: pools move "+objects[0]+": 2/2 files, 4 MiB/4 MiB (100%)", lines[len(lines)-1])
			require.Regexp(t, `^storage: pools move `+objects[0]+`: 0/2 files, 0 B/4 MiB \(0%\)$`, lines[0], "the first line comes before any byte")
		})
		t.Run("a resumed copy says what the earlier run had copied", func(t *testing.T) {
			fill(objects[1])
			// What an interrupted run leaves: the partial tree with the
			// finished files (docs/pools.md, the resume rule).
			partial := filepath.Join(b, "."+objects[1]+".partial")
			require.NoError(t, os.MkdirAll(partial, 0o700))
			done := filepath.Join(partial, "big")
			require.NoError(t, os.WriteFile(done, make([]byte, 3<<20), 0o644))
			info, err := os.Stat(filepath.Join(a, objects[1], "big"))
			require.NoError(t, err)
			require.NoError(t, os.Chtimes(done, info.ModTime(), info.ModTime()))
			res := env.Op(t, "storage", "pools", "move", objects[1], "--to", "nfs1", "--node", "n1", "--progress")
			answer(t, res)
			require.True(t, strings.HasSuffix(strings.TrimSpace(res.Stderr),
				"storage: pools move "+objects[1]+": 2/2 files, 4 MiB/4 MiB (100%), resumed: 3 MiB were already copied"), res.Stderr)
			noDrift(t, env)
		})
		t.Run("without --progress and off a terminal, stderr stays empty", func(t *testing.T) {
			res := env.Op(t, "storage", "pools", "move", objects[0], "--to", "ceph-a", "--node", "n1")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Empty(t, res.Stderr)
			require.NoError(t, json.Unmarshal([]byte(res.Stdout), new(map[string]any)))
		})
	})
}

// movablePoolObjects declares pools ceph-a and nfs1 (100G each) on node n1,
// at two temporary folders a and b, and places count 10 GiB objects in
// ceph-a, its default pool: objects a move can take to nfs1, and the
// workloads that hold them.
func movablePoolObjects(t *testing.T, env *testenv.Env, count int) (a, b string, workloads []json.RawMessage, objects []string) {
	t.Helper()
	a, b = t.TempDir(), t.TempDir()
	addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:" + a, "nfs1:" + b}, "default-pool": "ceph-a"})
	env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "100G", "--if-version", "0")
	env.OpOK(t, "storage", nil, "pools", "set-capacity", "nfs1", "100G", "--if-version", "0")
	d := deploy(t, env, "n1", count, obj{"volumes": []string{"POOL:/data:rw:10G"}})
	commit(t, env, "n1", d.WorkloadsResource, true)
	for _, w := range d.WorkloadsResource {
		objects = append(objects, poolPlans(t, w)["POOL:/data:rw:10737418240:0:0:0:0"].Object)
	}
	return a, b, d.WorkloadsResource, objects
}

package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// objectState is `pools object`'s answer, the fields a move changes.
type objectState struct {
	Pool     string `json:"pool"`
	State    string `json:"state"`
	MovingTo string `json:"moving_to"`
}

func poolObject(t *testing.T, env *testenv.Env, object string) objectState {
	t.Helper()
	var o objectState
	env.OpOK(t, "storage", &o, "pools", "object", object)
	return o
}

// requireBackInCephA checks the end of an aborted move of object from pool
// ceph-a into nfs1: the object is available in ceph-a, which holds reserved
// bytes, and nfs1 holds nothing and keeps no copy to clean up.
func requireBackInCephA(t *testing.T, env *testenv.Env, object string, reserved int64) {
	t.Helper()
	require.Equal(t, objectState{Pool: "ceph-a", State: "AVAILABLE"}, poolObject(t, env, object))
	require.Zero(t, poolGet(t, env, "nfs1").Reserved)
	require.Zero(t, poolGet(t, env, "nfs1").Cleanups)
	require.Equal(t, reserved, poolGet(t, env, "ceph-a").Reserved)
	noDrift(t, env)
}

// samePlace rewrites node n1's stored record so that pool nfs1 is declared
// at pool ceph-a's path a: a record written before two pools at one path
// were refused.
func samePlace(t *testing.T, env *testenv.Env, a, b string) {
	t.Helper()
	key := "/resource/storage/n1"
	rec, ok := env.Dump(t)[key]
	require.True(t, ok)
	require.Contains(t, rec, `"path":"`+b+`"`)
	env.Put(t, key, strings.ReplaceAll(rec, `"path":"`+b+`"`, `"path":"`+a+`"`))
}

// TestPoolsAtOnePath: two pools cannot be declared at one path on a node
// (nor one inside the other); a move between pools a node declares at one
// place is refused before anything is written; and an abort of a move
// started between them keeps the object's data.
func TestPoolsAtOnePath(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		shared := t.TempDir()
		t.Run("declaring two pools at one path is refused naming both and the path", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "add-node", obj{"nodename": "n0",
				"resource": obj{"storage": "1T", "pools": []string{"pa:" + shared, "pb:" + shared}}})
			require.Contains(t, line, "invalid_argument: pools pa and pb are both declared at "+shared)
			require.Equal(t, before, env.Dump(t))
		})

		a, b, _, objects := movablePoolObjects(t, env, 2)
		t.Run("adding a pool inside another pool's path is refused", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": true,
				"resource_request": obj{"pools": []string{"x:" + filepath.Join(a, "x")}}})
			require.Contains(t, line, "invalid_argument: pool x's path "+filepath.Join(a, "x")+" is inside pool ceph-a's path "+a)
			require.Equal(t, before, env.Dump(t))
		})

		// A copy that fails (a fifo) leaves objects[1] moving to nfs1,
		// reserved in both pools; then the record says nfs1 is at ceph-a's
		// path, as an old declaration could.
		stuck := objects[1]
		require.NoError(t, os.MkdirAll(filepath.Join(a, stuck), 0o755))
		require.NoError(t, syscall.Mkfifo(filepath.Join(a, stuck, "fifo"), 0o644))
		require.Equal(t, 7, env.Op(t, "storage", "pools", "move", stuck, "--to", "nfs1", "--node", "n1", "--command-id", "m1").Code)
		require.NoError(t, os.Remove(filepath.Join(a, stuck, "fifo")))
		require.NoError(t, os.WriteFile(filepath.Join(a, stuck, "f"), []byte("precious"), 0o644))
		samePlace(t, env, a, b)
		require.NoError(t, os.Mkdir(filepath.Join(a, "."+stuck+".partial"), 0o700))

		t.Run("a move between pools at one place is refused and writes nothing", func(t *testing.T) {
			object := objects[0]
			require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(a, object, "f"), []byte("data"), 0o644))
			before := env.Dump(t)
			res := env.Op(t, "storage", "pools", "move", object, "--to", "nfs1", "--node", "n1")
			require.Equal(t, 4, res.Code, res.Stderr)
			require.Equal(t, "storage: pools move: failed_precondition: node n1 declares pools ceph-a and nfs1 at one place (source and target pool paths "+
				a+" and "+a+" are one place): a move between them would copy object "+object+" onto itself; give each pool a path of its own\n", res.Stderr)
			require.Equal(t, before, env.Dump(t))
			got, err := os.ReadFile(filepath.Join(a, object, "f"))
			require.NoError(t, err)
			require.Equal(t, "data", string(got))
			require.Equal(t, objectState{Pool: "ceph-a", State: "AVAILABLE"}, poolObject(t, env, object))
		})
		t.Run("aborting a move started between them releases the target and keeps the data", func(t *testing.T) {
			require.Equal(t, "nfs1", poolObject(t, env, stuck).MovingTo)
			env.OpOK(t, "storage", nil, "pools", "move", stuck, "--to", "nfs1", "--node", "n1", "--command-id", "m1", "--abort")
			got, err := os.ReadFile(filepath.Join(a, stuck, "f"))
			require.NoError(t, err, "the abort removed the object's data")
			require.Equal(t, "precious", string(got))
			require.NoDirExists(t, filepath.Join(a, "."+stuck+".partial"), "the partial copy goes")
			requireBackInCephA(t, env, stuck, 20*gib)
		})
	})
}

// TestPoolDropWhileMovingIn: a node cannot drop a pool an object of its
// record is moving into (the move could then neither settle nor be
// aborted there); once the move is aborted the pool drops.
func TestPoolDropWhileMovingIn(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, _, objects := movablePoolObjects(t, env, 1)
		object := objects[0]
		require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
		require.NoError(t, syscall.Mkfifo(filepath.Join(a, object, "fifo"), 0o644))
		require.Equal(t, 7, env.Op(t, "storage", "pools", "move", object, "--to", "nfs1", "--node", "n1", "--command-id", "m1").Code)
		rm := obj{"nodename": "n1", "delta": false, "resource_request": obj{"rm-pools": "nfs1"}}

		t.Run("dropping the pool an object is moving into is refused naming the object and the move", func(t *testing.T) {
			before := env.Dump(t)
			line := env.Fail(t, "storage", "set-node-resource-capacity", rm)
			require.Contains(t, line, "failed_precondition: object "+object+" is moving from pool ceph-a into pool nfs1; finish or abort that move "+
				"(storage pools move "+object+" --to nfs1 --command-id m1 [--abort]) before dropping the pool")
			require.Equal(t, before, env.Dump(t))
		})
		t.Run("the move can still be aborted, and the pool then drops", func(t *testing.T) {
			env.OpOK(t, "storage", nil, "pools", "move", object, "--to", "nfs1", "--node", "n1", "--command-id", "m1", "--abort")
			requireBackInCephA(t, env, object, 10*gib)
			env.Call(t, "storage", "set-node-resource-capacity", rm, nil)
			require.Empty(t, poolGet(t, env, "nfs1").Attachments)
			_, err := os.Lstat(filepath.Join(b, object))
			require.True(t, os.IsNotExist(err))
			noDrift(t, env)
		})
	})
}

// TestPoolMoveCommandIDOfAnotherCommand: a move refuses a --command-id
// another operator command was run with (already_exists), writing nothing.
func TestPoolMoveCommandIDOfAnotherCommand(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, _, objects := movablePoolObjects(t, env, 1)
		object := objects[0]
		require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(a, object, "f"), []byte("data"), 0o644))
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "nfs1", "200G", "--if-version", "1", "--command-id", "c1")
		before := env.Dump(t)
		for _, abort := range []bool{false, true} {
			args := []string{"pools", "move", object, "--to", "nfs1", "--node", "n1", "--command-id", "c1"}
			if abort {
				args = append(args, "--abort")
			}
			res := env.Op(t, "storage", args...)
			require.Equal(t, 6, res.Code, res.Stderr)
			require.Equal(t, "storage: pools move: already_exists: command id c1 was used for another command; give the move an id of its own\n", res.Stderr)
			require.Equal(t, before, env.Dump(t))
		}
		require.Equal(t, objectState{Pool: "ceph-a", State: "AVAILABLE"}, poolObject(t, env, object))
		require.NoDirExists(t, filepath.Join(b, object))
	})
}

// TestPoolMoveIntoAPlaceAnotherPoolShares: a move into a pool that the node
// declares at the place of a third pool (a record written before that was
// refused) is refused before anything is written: the third pool's files
// at <target>/<object> — a copy it still keeps — would pass for a finished
// copy, and the move would settle on them.
func TestPoolMoveIntoAPlaceAnotherPoolShares(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, _, objects := movablePoolObjects(t, env, 1)
		object := objects[0]
		c := t.TempDir()
		env.Call(t, "storage", "set-node-resource-capacity", obj{"nodename": "n1", "delta": true,
			"resource_request": obj{"pools": []string{"old-nfs:" + c}}}, nil)
		samePlace(t, env, b, c) // old-nfs is declared at nfs1's path
		require.NoError(t, os.MkdirAll(filepath.Join(a, object), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(a, object, "f"), []byte("live"), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(b, object), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(b, object, "f"), []byte("stale"), 0o644))

		before := env.Dump(t)
		res := env.Op(t, "storage", "pools", "move", object, "--to", "nfs1", "--node", "n1")
		require.Equal(t, 4, res.Code, res.Stderr)
		require.Equal(t, "storage: pools move: failed_precondition: node n1 declares pools nfs1 and old-nfs at one place (source and target pool paths "+
			b+" and "+b+" are one place): a move into nfs1 could take old-nfs's files for its copy of object "+object+"; give each pool a path of its own\n", res.Stderr)
		require.Equal(t, before, env.Dump(t), "nothing written")
		for dir, want := range map[string]string{a: "live", b: "stale"} {
			got, err := os.ReadFile(filepath.Join(dir, object, "f"))
			require.NoError(t, err)
			require.Equal(t, want, string(got))
		}
		require.Equal(t, objectState{Pool: "ceph-a", State: "AVAILABLE"}, poolObject(t, env, object))
	})
}

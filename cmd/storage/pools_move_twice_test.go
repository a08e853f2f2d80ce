package main_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPoolMoveRunTwiceAtOnce: the same move run a second time while the
// first still copies (on another node that reaches both pools, or again
// in another terminal) is a resume to StartMove: both would copy into the
// one partial tree with the same scratch file names, the second truncating
// the first's file in progress (storage/pool/move's
// TestTwoCopiesOfOneObjectAtOnce shows the corrupt copy settled). The
// second run is refused, unavailable, and the first ends the move.
func TestPoolMoveRunTwiceAtOnce(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		a, b, _, objects := movablePoolObjects(t, env, 1)
		object := objects[0]
		require.NoError(t, os.Mkdir(filepath.Join(a, object), 0o755))
		data := bytes.Repeat([]byte{0xcd}, 256<<20)
		require.NoError(t, os.WriteFile(filepath.Join(a, object, "big"), data, 0o644))

		first := startStoppedMove(t, env, object)
		second := env.Op(t, "storage", "pools", "move", object, "--to", "nfs1", "--node", "n1")
		code, stderr := first.finish(t)
		require.Equal(t, 7, second.Code, "the second run is refused while the first copies: %s", second.Stdout)
		require.Contains(t, second.Stderr, "another process is copying or removing object "+object)
		require.Equal(t, 0, code, stderr)
		got, err := os.ReadFile(filepath.Join(b, object, "big"))
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, got))
		require.Equal(t, objectState{Pool: "nfs1", State: "AVAILABLE"}, poolObject(t, env, object))
		noDrift(t, env)
	})
}

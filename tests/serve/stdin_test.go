package serve_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestAStdinThatCannotBeReadIsReportedAsWithoutADaemon: a verb whose stdin
// fails to read (a directory) answers the same line and exit code through
// the front binary, with a daemon on the socket, as the full binary run
// alone: the front hands the engine its stdin, not what it managed to read.
func TestAStdinThatCannotBeReadIsReportedAsWithoutADaemon(t *testing.T) {
	t.Parallel() // a daemon and store of its own
	front := thinFront(t)
	env, d := servedEmbedded(t)
	run := func(path string, vars ...string) testenv.Result {
		dir, err := os.Open(t.TempDir())
		require.NoError(t, err)
		defer dir.Close()
		return execWith(t, env, path, dir, nil, []string{"get-node-resource-info"}, vars...)
	}
	want := run(testenv.Bin(t, "storage"), "ERU_RESOURCE_NO_FORWARD=1")
	require.Equal(t, 128, want.Code)
	require.Contains(t, want.Stderr, "is a directory")
	require.Equal(t, want, run(front+"/storage"))
	require.Equal(t, 0, d.Forwarded(t), "nothing was forwarded")
}

package serve_test

import (
	"bytes"
	"os"
	"os/exec"
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
	env := testenv.NewEmbedded(t)
	if d := env.Daemon(); d != nil {
		d.Stop(t)
	}
	addr := testenv.FreeAddr(t)
	withServe(t, env, "http: "+addr)
	d := env.Serve(t, addr)
	d.WaitHTTP(t)
	run := func(path string, vars ...string) (int, string, string) {
		dir, err := os.Open(t.TempDir())
		require.NoError(t, err)
		defer dir.Close()
		c := exec.Command(path, "get-node-resource-info")
		c.Dir = env.Dir
		c.Env = append(append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH="), vars...)
		var out, errb bytes.Buffer
		c.Stdin, c.Stdout, c.Stderr = dir, &out, &errb
		err = c.Run()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return code, out.String(), errb.String()
	}
	wantCode, wantOut, wantErr := run(testenv.Bin(t, "storage"), "ERU_RESOURCE_NO_FORWARD=1")
	require.Equal(t, 128, wantCode)
	require.Contains(t, wantErr, "is a directory")
	code, out, stderr := run(front + "/storage")
	require.Equal(t, [3]any{wantCode, wantOut, wantErr}, [3]any{code, out, stderr})
	require.Equal(t, 0, d.Forwarded(t), "nothing was forwarded")
}

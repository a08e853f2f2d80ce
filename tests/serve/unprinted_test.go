package serve_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestAnAnswerThatCannotBePrintedSaysWhetherTheCallWasApplied: with its
// stdout on a full disk (/dev/full), a verb that ran exits 128 with one
// line. A write's says it was applied (so no one takes it for a write that
// failed and retries it blindly), a read's that it could not print; the
// line is the same whether the binary ran the call or forwarded it.
func TestAnAnswerThatCannotBePrintedSaysWhetherTheCallWasApplied(t *testing.T) {
	t.Parallel() // a daemon and store of its own
	env, d := servedEmbedded(t)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	require.NoError(t, err)
	defer full.Close()
	run := func(t *testing.T, stdin []byte, verb string, vars ...string) (int, string) {
		t.Helper()
		res := execWith(t, env, testenv.Bin(t, "storage"), bytes.NewReader(stdin), full, []string{verb}, vars...)
		return res.Code, res.Stderr
	}
	for _, c := range []struct {
		name string
		vars []string
		node string
		via  int // calls the daemon answers
	}{
		{name: "run by the binary", vars: []string{"ERU_RESOURCE_NO_FORWARD=1"}, node: "local", via: 0},
		{name: "forwarded to the daemon", node: "forwarded", via: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := d.Forwarded(t)
			code, stderr := run(t, mustJSON(t, obj{"nodename": c.node, "resource": obj{"storage": "1T"}}), "add-node", c.vars...)
			require.Equal(t, 128, code)
			require.Equal(t, "storage: add-node: node "+c.node+": unavailable: outcome unknown: the call was applied, but its answer could not be printed: write /dev/stdout: no space left on device\n", stderr)
			got := local(t, env, "storage", mustJSON(t, obj{"nodename": c.node}), "get-node-resource-info")
			require.Equal(t, 0, got.Code, "the node was added: %s", got.Stderr)

			code, stderr = run(t, mustJSON(t, obj{"nodename": c.node}), "get-node-resource-info", c.vars...)
			require.Equal(t, 128, code)
			require.Equal(t, "storage: get-node-resource-info: node "+c.node+": unavailable: its answer could not be printed: write /dev/stdout: no space left on device\n", stderr)
			require.Equal(t, before+c.via, d.Forwarded(t))
		})
	}
}

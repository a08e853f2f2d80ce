package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestAnIsolatedNodesLedgerGivesBackItsUnlimitedBindings: removing a
// workload from an isolated node draws every component it held from the
// isolation ledger, its count of bindings charged no bytes too; a count
// left behind would later be taken from live usage, and the volume would
// stay counted as shared when nothing is on it.
func TestAnIsolatedNodesLedgerGivesBackItsUnlimitedBindings(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", obj{"volumes": []string{"/data0:100G", "/data1:50G"}, "storage": "100G"})
		d := deploy(t, env, "n1", 1, obj{"volumes": []string{"AUTO:/d:rw:30G", "AUTO:/u:rw:0"}})
		commit(t, env, "n1", d.WorkloadsResource, true)
		env.OpOK(t, "storage", nil, "nodes", "isolate", "n1")
		require.NotEmpty(t, nodeGet(t, env, "n1").Released["storage"], "the isolation released the workload")

		commit(t, env, "n1", d.WorkloadsResource, false)
		require.Empty(t, nodeGet(t, env, "n1").Released, "the removal drew everything from the ledger")
	})
}

package forward_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/storage"
)

// The front links none of the engine, so it keeps the verb facts it needs
// as constants; the engine's verb table is their owner.
func TestTheFrontsVerbsAreTheEnginesTable(t *testing.T) {
	table := engine.Table()
	names := make([]string, len(table))
	for i, v := range table {
		names[i] = v.Name
	}
	require.Equal(t, names, forward.Verbs(), "the forwarded verbs, in the protocol's order")
	for _, v := range table {
		t.Run(v.Name+" reads stdin and writes as the engine's table says", func(t *testing.T) {
			write, ok := forward.Write(v.Name)
			require.True(t, ok)
			require.Equal(t, v.Writes, write)
			require.Equal(t, !v.Input, forward.NoInput(v.Name))
		})
	}
	_, ok := forward.Write("nodes")
	require.False(t, ok, "an operator command is not a forwarded verb")
}

// The front says the plugins' names itself; the plugins' rules own them.
func TestTheFrontsPluginNamesAreThePlugins(t *testing.T) {
	require.Equal(t, []string{storage.Rules{}.Name(), overcommit.Rules{}.Name()}, forward.Plugins[:])
}

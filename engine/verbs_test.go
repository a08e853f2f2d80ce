package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

func TestTheVerbTable(t *testing.T) {
	t.Run("lists the protocol's fifteen verbs once each, every one with usage and a handler", func(t *testing.T) {
		seen := map[string]bool{}
		for _, v := range engine.Table() {
			require.False(t, seen[v.Name], "%s twice", v.Name)
			seen[v.Name] = true
			require.NotEmpty(t, v.Usage, v.Name)
			require.NotNil(t, v.Handle, v.Name)
		}
		require.Len(t, seen, 15)
	})
	t.Run("the verbs without input are the ones core calls without a request", func(t *testing.T) {
		var none []string
		for _, v := range engine.Table() {
			if !v.Input {
				none = append(none, v.Name)
			}
		}
		require.Equal(t, []string{"name", "get-metrics-description"}, none)
	})
	t.Run("an unknown verb is invalid_argument", func(t *testing.T) {
		_, err := engine.Call(context.Background(), newEngine(nil), "no-such-verb", &types.Request{})
		require.Equal(t, types.InvalidArgument, types.ClassOf(err))
	})
	t.Run("a verb about one node refuses a request that names none before opening the store", func(t *testing.T) {
		opened := false
		e := newEngine(nil)
		e.Open = func(context.Context, bool) (store.Store, error) { opened = true; return nil, nil }
		for _, v := range engine.Table() {
			if !v.Node {
				continue
			}
			_, err := engine.Call(context.Background(), e, v.Name, &types.Request{})
			require.ErrorContains(t, err, "nodename is missing", v.Name)
		}
		require.False(t, opened)
	})
	t.Run("name answers without a store", func(t *testing.T) {
		out, err := engine.Call(context.Background(), &engine.Engine[*storage.Node, *storage.WorkloadRequest]{Res: storage.Rules{}}, "name", &types.Request{})
		require.NoError(t, err)
		require.Equal(t, types.NameAnswer("storage"), out)
	})
}

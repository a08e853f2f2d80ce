package etcdstore

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

func TestRefusedSize(t *testing.T) {
	sh := shapeOf("/p", []store.Cond{{Key: "/a"}}, []store.Op{{Key: "/a", Value: []byte("12345")}})
	require.Equal(t, txnShape{compares: 2, ops: 2, bytes: 4 + 9}, sh)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"too many operations is resource_exhausted naming the operations limit", errTooManyOps, "more operations than etcd takes"},
		{"a request too large is resource_exhausted naming the size limit", errRequestTooLarge, "more bytes than etcd takes"},
		{"a request the client will not send is resource_exhausted naming the size limit", notSent{Status{codeResourceExhausted, "trying to send message larger than max (3145800 vs. 2097152)"}}, "more bytes than etcd takes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := refusedSize("http://e:2379", c.err, sh)
			require.Equal(t, types.ResourceExhausted, types.ClassOf(err))
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "2 compares and 2 operations (13 bytes")
			require.ErrorContains(t, err, "128 operations")
			require.ErrorContains(t, err, "1.5 MiB")
			require.ErrorContains(t, err, "nothing was written")
		})
	}
	t.Run("any other error is not classified here", func(t *testing.T) {
		require.NoError(t, refusedSize("http://e:2379", errors.New("connection reset"), sh))
		require.NoError(t, refusedSize("http://e:2379", errLeaseNotFound, sh))
		require.NoError(t, refusedSize("http://e:2379", Status{codeResourceExhausted, "grpc: trying to send message larger than max (3145800 vs. 2097152)"}, sh),
			"etcd could not send its answer: the request was applied")
	})
}

package depstest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/depstest"
)

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		dep, entry string
		want       bool
	}{
		{"net", "net", true},
		{"net/http", "net", true},
		{"netip", "net", false},
		{"go.etcd.io/etcd/client/v3", "go.etcd.io/etcd/", true},
		{"go.etcd.io/bbolt", "go.etcd.io/etcd/", false},
		{"google.golang.org/grpc/codes", "google.golang.org/grpc", true},
		{"google.golang.org/grpcx", "google.golang.org/grpc", false},
	} {
		t.Run(c.dep+" against "+c.entry, func(t *testing.T) {
			require.Equal(t, c.want, depstest.Matches(c.dep, c.entry))
		})
	}
}

func TestForbidPassesAPackageWithinItsBudget(t *testing.T) {
	depstest.Forbid(t, []string{"."}, []string{"github.com/eru-extend/resources/internal/depstest"}, []string{"go.etcd.io/etcd/", "google.golang.org/grpc"})
}

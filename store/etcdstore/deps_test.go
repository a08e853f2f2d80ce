package etcdstore_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheStoreLinksNoGRPC: a plugin call is one short process, and the
// initialisation of grpc, clientv3, etcd's generated API and the protobuf
// runtime costs it more than its call. The store and the config that opens
// it must link none of them (nor zap, which clientv3 brings).
func TestTheStoreLinksNoGRPC(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "../../cmd/config").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/eru-extend/resources/store/etcdstore", "the list is the store's")
	require.Contains(t, deps, "github.com/eru-extend/resources/cmd/config", "and the config's")
	for _, dep := range deps {
		for _, heavy := range []string{"google.golang.org/grpc", "google.golang.org/protobuf/", "google.golang.org/genproto/", "go.etcd.io/etcd/", "go.uber.org/zap", "github.com/gogo/", "github.com/golang/protobuf/"} {
			require.False(t, dep == heavy || strings.HasPrefix(dep, strings.TrimSuffix(heavy, "/")+"/"), "the store links %s", dep)
		}
	}
}

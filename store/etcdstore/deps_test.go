package etcdstore_test

import (
	"testing"

	"github.com/eru-extend/resources/internal/depstest"
)

// TestTheStoreLinksNoGRPC: a plugin call is one short process, and the
// initialisation of grpc, clientv3, etcd's generated API and the protobuf
// runtime costs it more than its call. The store and the config that opens
// it must link none of them (nor zap, which clientv3 brings).
func TestTheStoreLinksNoGRPC(t *testing.T) {
	depstest.Forbid(t, []string{".", "../../cmd/config"},
		[]string{"github.com/eru-extend/resources/store/etcdstore", "github.com/eru-extend/resources/cmd/config"},
		[]string{"google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto", "go.etcd.io/etcd/", "go.uber.org/zap", "github.com/gogo/", "github.com/golang/protobuf"})
}

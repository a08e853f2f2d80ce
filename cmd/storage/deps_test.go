package main_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestThePluginsLinkNoneOfTheDaemon: core execs storage and compute once
// per call, and every exec runs the package initialisation of everything
// the binary links. The serve daemon (its own binary, cmd/serve) links
// Prometheus' client (with procfs and expvar), statsd and the watch cache;
// the plugins must link none of it. Nor do they link gRPC, etcd's client
// and API packages or the protobuf runtime: the etcd store speaks etcd's
// gRPC protocol over net/http (store/etcdstore), and those packages'
// initialisation alone cost a cold call more than its etcd round trip.
func TestThePluginsLinkNoneOfTheDaemon(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../storage", "../compute").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/eru-extend/resources/cmd", "the list is the plugins'")
	for _, dep := range deps {
		for _, prefix := range []string{
			"github.com/prometheus/", "github.com/cornelk/", "github.com/alexcesaro/",
			"google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto",
			"go.etcd.io/etcd/", "github.com/gogo/", "github.com/golang/protobuf", "go.uber.org/zap",
		} {
			require.False(t, strings.HasPrefix(dep, prefix), "the plugins link %s", dep)
		}
		for _, pkg := range []string{"expvar", "github.com/eru-extend/resources/serve", "github.com/eru-extend/resources/serve/cache"} {
			require.NotEqual(t, pkg, dep, "the plugins link %s", dep)
		}
	}
}

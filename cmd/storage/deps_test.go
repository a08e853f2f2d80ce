package main_test

import (
	"testing"

	"github.com/eru-extend/resources/internal/depstest"
)

// TestThePluginsLinkNoneOfTheDaemon: core execs storage and compute once
// per call, and every exec runs the package initialisation of everything
// the binary links. The serve daemon (its own binary, cmd/serve) links
// Prometheus' client (with procfs and expvar), statsd and the watch cache;
// the plugins must link none of it. Nor do they link gRPC, etcd's client
// and API packages or the protobuf runtime: the etcd store speaks etcd's
// gRPC protocol over net/http (store/etcdstore), and those packages'
// initialisation alone cost a cold call more than its etcd round trip.
// runtime/metrics builds a table of every metric at its initialisation:
// the cold GC reads the heap without it.
func TestThePluginsLinkNoneOfTheDaemon(t *testing.T) {
	depstest.Forbid(t, []string{"../storage", "../compute"}, []string{"github.com/eru-extend/resources/cmd"}, []string{
		"github.com/prometheus/", "github.com/cornelk/", "github.com/alexcesaro/", "expvar",
		"github.com/eru-extend/resources/serve", "runtime/metrics",
		"google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto",
		"go.etcd.io/etcd/", "github.com/gogo/", "github.com/golang/protobuf", "go.uber.org/zap",
	})
}

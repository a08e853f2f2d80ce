package main

import (
	"testing"

	"github.com/eru-extend/resources/internal/depstest"
)

// TestTheFrontLinksNothingHeavy: the front's start is most of a forwarded
// call. It must not link the store clients, YAML or Prometheus (their
// package initialisation alone costs milliseconds), nor package net, which
// makes a cgo build link the C library dynamically (the dynamic loader then
// runs at every start), nor encoding/json (a quarter more binary to map, for
// reading two names of a request: forward.Names reads them).
func TestTheFrontLinksNothingHeavy(t *testing.T) {
	depstest.Forbid(t, []string{"."}, []string{"github.com/eru-extend/resources/internal/forward"}, []string{
		"net", "runtime/cgo", "os/user", "encoding/json", "gopkg.in/yaml.v3",
		"go.etcd.io/", "google.golang.org/grpc", "github.com/prometheus/", "go.uber.org/zap",
	})
}

package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheFrontLinksNothingHeavy: the front's start is most of a forwarded
// call. It must not link the store clients, YAML or Prometheus (their
// package initialisation alone costs milliseconds), nor package net, which
// makes a cgo build link the C library dynamically (the dynamic loader then
// runs at every start), nor encoding/json (a quarter more binary to map, for
// reading two names of a request: forward.Names reads them).
func TestTheFrontLinksNothingHeavy(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/eru-extend/resources/internal/forward", "the list is the front's")
	for _, dep := range deps {
		for _, heavy := range []string{"net", "runtime/cgo", "os/user", "go.etcd.io/", "google.golang.org/grpc", "gopkg.in/yaml", "github.com/prometheus/", "go.uber.org/zap", "go.etcd.io/bbolt", "encoding/json"} {
			if strings.HasSuffix(heavy, "/") {
				require.False(t, strings.HasPrefix(dep, heavy), "the front links %s", dep)
			} else {
				require.NotEqual(t, heavy, dep, "the front links %s", dep)
			}
		}
	}
}

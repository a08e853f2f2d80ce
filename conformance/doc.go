// Package conformance checks the plugin binaries of this repository the way
// eru core uses them: through core's own binary plugin client
// (github.com/projecteru2/core/resource/plugins/binary) and its resource
// manager (resource/cobalt, which also loads core's built-in cpumem
// plugin), against a real etcd server.
//
// It is a module of its own so that core's dependency tree never enters
// the main module. The tests build ./cmd/storage and ./cmd/compute fresh
// from the repository root (and ./cmd/serve, the daemon, as
// libexec/serve beside them), install them under their resource names in a
// temporary plugin folder with storage.yaml and compute.yaml naming the
// test's etcd, and start that etcd inside the test process (the server
// release core's client is built against) on free loopback ports: nothing
// needs installing. A setup failure fails every test with the reason;
// nothing is skipped.
//
// The e2e package beside it goes one step further and runs the real eru
// core server with the binaries in its plugin folder (make e2e).
//
// Run from this folder (make conformance leaves e2e out):
//
//	go test . ./internal/...
package conformance

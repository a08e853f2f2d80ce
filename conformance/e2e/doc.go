// Package e2e runs the real eru core server with this repository's plugins
// and drives it through core's gRPC API with core's own Go client (rpc/gen),
// the way eru-cli does.
//
// The suite builds core's server from the release this module pins (once
// per release and Go toolchain; the binary is cached under the user's cache
// folder, so a re-run does not rebuild), builds ./cmd/storage and
// ./cmd/compute fresh, starts etcd inside the test process, writes core's
// config (store and locks in etcd, resource_plugin.dir holding the two
// binaries, the daemon's in libexec/ where core does not look, and their
// non-executable storage.yaml and compute.yaml) and
// starts core on free loopback ports. Nodes have mock:// endpoints, core's
// fake engine, so no container runtime is needed.
//
// Run from the conformance folder (ERU_E2E_KEEP=1 keeps the run's folder,
// with core's log, for a look afterwards):
//
//	go test ./e2e/
package e2e

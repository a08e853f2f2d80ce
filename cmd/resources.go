package cmd

import (
	"context"
	"log/slog"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/storage"
	"github.com/eru-extend/resources/store"
)

// setup is what every resource's engine is built from.
type setup struct {
	open       func(ctx context.Context, write bool) (store.Store, error)
	registered []nodes.Resource
	policy     nodes.Policy
	maxDeploy  int
	log        *slog.Logger
	snapshots  engine.SnapshotReader
}

// resource is one resource this project ships: its name in core (the
// binary's name), the node registry's view of its records, and its verb
// engine. Adding a resource is adding a row to resources.
type resource struct {
	name    string
	records nodes.Resource
	engine  func(s setup) engine.Handlers
	// decoder decodes its records ahead of reads (the serve daemon's cache).
	decoder engine.Decoder
}

// resources are every resource plugin of the cluster.
func resources() []resource {
	return []resource{
		{
			name:    "storage",
			records: engine.Registered(storage.Rules{}),
			decoder: engine.RecordDecoder(storage.Rules{}),
			engine: func(s setup) engine.Handlers {
				return &engine.Engine[*storage.Node, *storage.WorkloadRequest]{
					Res: storage.Rules{}, Open: s.open, Resources: s.registered, Policy: s.policy, MaxDeploy: s.maxDeploy, Log: s.log, Snapshots: s.snapshots,
					CapacityMetrics: []string{"storage_capacity", "storage_volume_capacity"},
				}
			},
		},
		{
			name:    "compute",
			records: engine.Registered(overcommit.Rules{}),
			decoder: engine.RecordDecoder(overcommit.Rules{}),
			engine: func(s setup) engine.Handlers {
				return &engine.Engine[*overcommit.Node, *overcommit.WorkloadRequest]{
					Res: overcommit.Rules{}, Open: s.open, Resources: s.registered, Policy: s.policy, MaxDeploy: s.maxDeploy, Log: s.log, Snapshots: s.snapshots,
					CapacityMetrics: []string{"compute_cpu_schedulable_millis", "compute_memory_schedulable_bytes"},
				}
			},
		},
	}
}

// registered are every resource plugin of the cluster, as the registry sees
// them.
func registered() []nodes.Resource {
	var out []nodes.Resource
	for _, r := range resources() {
		out = append(out, r.records)
	}
	return out
}

// lookupResource finds the resource a binary serves.
func lookupResource(name string) (resource, bool) {
	for _, r := range resources() {
		if r.name == name {
			return r, true
		}
	}
	return resource{}, false
}

// Decoders are how a cache decodes every resource's node records and the
// registrations ahead of reads (see engine.Snapshot).
func Decoders() engine.Decoders {
	out := engine.Decoders{engine.RegistrationDecoder()}
	for _, r := range resources() {
		out = append(out, r.decoder)
	}
	return out
}

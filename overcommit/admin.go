package overcommit

import (
	"context"
	"encoding/json"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// RecordKey is where compute keeps a node's record.
func RecordKey(node string) string { return nodes.RecordPrefix("compute") + node }

// Admin runs the overcommit operator commands against a store.
type Admin struct {
	Store store.Store
	Clock types.Clock
}

// GetDefaults reads the cluster-wide ratios.
func (a *Admin) GetDefaults(ctx context.Context) (Defaults, error) {
	data, ok, err := store.Get(ctx, a.Store, DefaultsKey)
	if err != nil {
		return Defaults{}, err
	}
	return DecodeDefaults(data, ok)
}

// SetDefaults replaces both cluster-wide ratios and advances their version.
func (a *Admin) SetDefaults(ctx context.Context, cpu, memory int64, cmd nodes.Command) (nodes.Answer[Defaults], error) {
	if err := CheckRatio("cpu", cpu); err != nil {
		return nodes.Answer[Defaults]{}, err
	}
	if err := CheckRatio("memory", memory); err != nil {
		return nodes.Answer[Defaults]{}, err
	}
	return nodes.Run(ctx, a.Store, cmd, []string{DefaultsKey}, a.Clock.Now(), func(tx *store.Tx) (Defaults, error) {
		data, ok := tx.Get(DefaultsKey)
		d, err := DecodeDefaults(data, ok)
		if err != nil {
			return Defaults{}, err
		}
		if err := cmd.CheckVersion("overcommit defaults", d.Version); err != nil {
			return Defaults{}, err
		}
		d = Defaults{CPU: cpu, Memory: memory, Version: d.Version + 1}
		out, err := json.Marshal(d)
		if err != nil {
			return Defaults{}, err
		}
		tx.Put(DefaultsKey, out)
		return d, nil
	})
}

// NodeOvercommit is the ratios in effect on one node and their sources.
type NodeOvercommit struct {
	NodeID  string    `json:"node_id"`
	CPU     Effective `json:"cpu"`
	Memory  Effective `json:"memory"`
	Version int64     `json:"version"`
}

func nodeOvercommit(node string, n *Node, d Defaults) NodeOvercommit {
	cpu, mem := n.Ratios(d)
	return NodeOvercommit{NodeID: node, CPU: cpu, Memory: mem, Version: n.Version}
}

func (a *Admin) read(node string, get func(string) ([]byte, bool)) (*Node, Defaults, error) {
	data, ok := get(DefaultsKey)
	d, err := DecodeDefaults(data, ok)
	if err != nil {
		return nil, d, err
	}
	rec, ok := get(RecordKey(node))
	if !ok {
		return nil, d, types.Errorf(types.NotFound, "node %s has no compute record (add it with a compute resource first)", node)
	}
	n, err := DecodeNode(rec)
	if err != nil {
		return nil, d, types.Wrap(types.Internal, err, "node "+node)
	}
	return n, d, nil
}

// GetNode reads the ratios in effect on a node.
func (a *Admin) GetNode(ctx context.Context, node string) (NodeOvercommit, error) {
	snap, err := a.Store.Read(ctx, []string{RecordKey(node), DefaultsKey}, nil)
	if err != nil {
		return NodeOvercommit{}, err
	}
	n, d, err := a.read(node, snap.Get)
	if err != nil {
		return NodeOvercommit{}, err
	}
	return nodeOvercommit(node, n, d), nil
}

// SetNode replaces a node's overrides: a ratio left out (nil) clears that
// override, so the node follows the default again.
func (a *Admin) SetNode(ctx context.Context, node string, cpu, memory *int64, cmd nodes.Command) (nodes.Answer[NodeOvercommit], error) {
	for _, r := range []struct {
		what  string
		ratio *int64
	}{{"cpu", cpu}, {"memory", memory}} {
		if r.ratio == nil {
			continue
		}
		if err := CheckRatio(r.what, *r.ratio); err != nil {
			return nodes.Answer[NodeOvercommit]{}, err
		}
	}
	return nodes.Run(ctx, a.Store, cmd, []string{RecordKey(node), DefaultsKey}, a.Clock.Now(), func(tx *store.Tx) (NodeOvercommit, error) {
		n, d, err := a.read(node, tx.Get)
		if err != nil {
			return NodeOvercommit{}, err
		}
		if err := cmd.CheckVersion("node "+node+" compute record", n.Version); err != nil {
			return NodeOvercommit{}, err
		}
		if n.Version, err = nextVersion(node, n.Version); err != nil {
			return NodeOvercommit{}, err
		}
		n.Override = Override{CPU: cpu, Memory: memory}
		out, err := json.Marshal(n)
		if err != nil {
			return NodeOvercommit{}, err
		}
		tx.Put(RecordKey(node), out)
		return nodeOvercommit(node, n, d), nil
	})
}

package storage

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
	tib = int64(1) << 40
	pib = int64(1) << 50
)

// raw is shorthand for a JSON document written inline.
func raw(s string) json.RawMessage { return json.RawMessage(s) }

// mustBinding parses a binding of a request (unsigned).
func mustBinding(t testing.TB, s string) *VolumeBinding {
	t.Helper()
	b, err := ParseBinding(s, false)
	require.NoError(t, err, "binding %q", s)
	return b
}

// mustBindings parses a list of request bindings.
func mustBindings(t testing.TB, ss ...string) []*VolumeBinding {
	t.Helper()
	out := make([]*VolumeBinding, 0, len(ss))
	for _, s := range ss {
		out = append(out, mustBinding(t, s))
	}
	return out
}

// mustNode builds a record from capacity and usage in stored form.
func mustNode(t testing.TB, capacity, usage string) *Node {
	t.Helper()
	var u json.RawMessage
	if usage != "" {
		u = raw(usage)
	}
	n, err := Restore(raw(capacity), u)
	require.NoError(t, err)
	return n
}

// mustRequest parses a workload request.
func mustRequest(t testing.TB, s string, signed bool) *WorkloadRequest {
	t.Helper()
	w, err := ParseWorkloadRequest(raw(s), signed)
	require.NoError(t, err, "request %s", s)
	return w
}

// requireClass checks that err is a types.Error of the given class.
func requireClass(t testing.TB, err error, class types.Class) {
	t.Helper()
	require.Error(t, err)
	var e *types.Error
	require.True(t, errors.As(err, &e), "error %v has no class", err)
	require.Equal(t, class, e.Class, "error %v", err)
}

// hostOf is the scheduler's view of a node.
func hostOf(n *Node) *Host { return NewHost(&n.Capacity, &n.Usage) }

// placement is one binding's place in a plan, for readable expectations.
type placement struct {
	Device string
	Size   int64
	Disk   int
}

// placements renders plans as [plan][binding]placement.
func placements(plans []Plan) [][]placement {
	out := make([][]placement, 0, len(plans))
	for _, p := range plans {
		row := make([]placement, len(p.Device))
		for i := range p.Device {
			row[i] = placement{p.Device[i], p.Size[i], p.Disk[i]}
		}
		out = append(out, row)
	}
	return out
}

// usageAfter commits workloads to a node's usage the way core does
// (set-node-resource-usage, delta, incr) and settles the record.
func usageAfter(t testing.TB, n *Node, wls ...*Workload) *Node {
	t.Helper()
	data, err := json.Marshal(wls)
	require.NoError(t, err)
	next, err := nextUsage(n, nil, nil, data, true, true)
	require.NoError(t, err)
	settled, err := next.Settle()
	require.NoError(t, err)
	return settled
}

// mustJSON encodes v.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// mustParams derives a workload's engine params.
func mustParams(t testing.TB, w *Workload) *EngineParams {
	t.Helper()
	p, err := w.EngineParams()
	require.NoError(t, err)
	return p
}

// setCapacity is set-node-resource-capacity's decision as the engine drives
// it: the change picked from resource and request (types.ChangeOf), decoded,
// then applied to n.
func setCapacity(n *Node, resource, request json.RawMessage, delta, incr bool) (*Node, error) {
	c, err := types.ChangeOf(&types.Request{Resource: resource, ResourceRequest: request}, false)
	if err != nil {
		return nil, err
	}
	edit, err := DecodeCapacityChange(c, delta, incr)
	if err != nil {
		return nil, err
	}
	return edit.Apply(n)
}

// nextUsage is set-node-resource-usage's decision as the engine drives it
// (without the isolation ledger, which is the engine's).
func nextUsage(n *Node, resource, request, workloads json.RawMessage, delta, incr bool) (*Node, error) {
	c, err := types.ChangeOf(&types.Request{Resource: resource, ResourceRequest: request, WorkloadsResource: workloads}, true)
	if err != nil {
		return nil, err
	}
	edit, err := DecodeUsageChange(c, delta, incr)
	if err != nil {
		return nil, err
	}
	return edit.Apply(n)
}

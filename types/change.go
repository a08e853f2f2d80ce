package types

import "encoding/json"

// Form says in which shape a change to a node's capacity or usage came
// (docs/protocol.md): what a person typed, the plugin's own stored shape, or
// a list of stored workload resources to be summed.
type Form int

// Forms of a change.
const (
	// NoChange: the request carried none of the keys.
	NoChange Form = iota
	// RequestForm is resource_request: what a person typed, or a rollback
	// snapshot of capacity in stored form.
	RequestForm
	// StoredForm is resource: the plugin's stored shape (a usage rollback
	// snapshot comes this way).
	StoredForm
	// WorkloadsForm is workloads_resource: stored workload resources whose
	// sum is the change.
	WorkloadsForm
)

// Change is the one change a set-node-resource-* call carries, picked by
// the protocol's precedence rule: resource_request, else resource, else the
// sum of workloads_resource.
type Change struct {
	Form Form
	Raw  json.RawMessage
}

// ChangeOf applies the precedence rule to a request. workloads says whether
// the verb accepts workloads_resource as a change (set-node-resource-usage
// does, set-node-resource-capacity does not).
func ChangeOf(req *Request, workloads bool) Change {
	switch {
	case !IsNull(req.ResourceRequest):
		return Change{Form: RequestForm, Raw: req.ResourceRequest}
	case !IsNull(req.Resource):
		return Change{Form: StoredForm, Raw: req.Resource}
	case workloads:
		return Change{Form: WorkloadsForm, Raw: req.WorkloadsResource}
	}
	return Change{Form: NoChange}
}

// Figure is one named count a resource contributes to an operator answer
// (released_volumes, released_cpu_millis, ...).
type Figure struct {
	Name  string
	Value int64
}

// Keys gives the change back as the request keys it came from (only one of
// them set), for a resource whose code reads those keys.
func (c Change) Keys() (resource, request, workloads json.RawMessage) {
	switch c.Form {
	case RequestForm:
		return nil, c.Raw, nil
	case StoredForm:
		return c.Raw, nil, nil
	case WorkloadsForm:
		return nil, nil, c.Raw
	}
	return nil, nil, nil
}

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
	// Raw is the key's value as it came.
	Raw json.RawMessage
	// Members are a request- or stored-form change split once into its
	// members (both are JSON objects); they say which keys the change
	// carries, and the resource decodes each of them. A key the engine
	// takes for itself is taken out of Members only.
	Members map[string]json.RawMessage
}

// ChangeOf applies the precedence rule to a request. workloads says whether
// the verb accepts workloads_resource as a change (set-node-resource-usage
// does, set-node-resource-capacity does not). A request- or stored-form
// change that is not a JSON object is refused, naming its key.
func ChangeOf(req *Request, workloads bool) (Change, error) {
	switch {
	case !IsNull(req.ResourceRequest):
		m, err := DecodeObject(req.ResourceRequest, "resource_request")
		return Change{Form: RequestForm, Raw: req.ResourceRequest, Members: m}, err
	case !IsNull(req.Resource):
		m, err := DecodeObject(req.Resource, "resource")
		return Change{Form: StoredForm, Raw: req.Resource, Members: m}, err
	case workloads:
		return Change{Form: WorkloadsForm, Raw: req.WorkloadsResource}, nil
	}
	return Change{Form: NoChange}, nil
}

// Figure is one named count a resource contributes to an operator answer
// (released_volumes, released_cpu_millis, ...).
type Figure struct {
	Name  string
	Value int64
}

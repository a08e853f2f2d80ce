// Package types holds the wire types of eru core's binary plugin protocol
// (requests, responses, engine info) and the domain errors and quantities the
// packages of this project share.
package types

import (
	"context"
	"encoding/base64"
	"encoding/json"
)

// Request is the union of every verb's request keys (docs/protocol.md). core
// sends one JSON object on stdin; each verb reads the keys it needs. The
// resource payloads stay raw: only the resource that owns them knows their
// shape.
type Request struct {
	Nodename  string    `json:"nodename"`
	Nodenames []string  `json:"nodenames"`
	Podname   string    `json:"podname"`
	Nodes     []NodeRef `json:"nodes"`

	Resource        json.RawMessage `json:"resource"`
	ResourceRequest json.RawMessage `json:"resource_request"`
	Info            *EngineInfo     `json:"info"`
	Capacity        json.RawMessage `json:"capacity"`
	Usage           json.RawMessage `json:"usage"`
	Delta           bool            `json:"delta"`
	Incr            bool            `json:"incr"`

	DeployCount             int             `json:"deploy_count"`
	WorkloadResource        json.RawMessage `json:"workload_resource"`
	WorkloadResourceRequest json.RawMessage `json:"workload_resource_request"`
	// WorkloadsResource is a list of stored workload resources, except for
	// calculate-remap where it is an object keyed by workload id.
	WorkloadsResource json.RawMessage `json:"workloads_resource"`
}

// Env is what a resource plugin's decisions may read besides a node's
// record: the scheduler limit and the values of the plugin's shared keys
// (cluster-wide settings) as read in the same snapshot as the records.
type Env struct {
	MaxDeployCount int
	Shared         map[string][]byte
	// Ctx is the call's context: a long decision (a plan search) stops
	// with deadline_exceeded when it is done. nil means no deadline.
	Ctx context.Context
}

// NodeRef names one node of a pod, as get-metrics accepts them in a batch.
type NodeRef struct {
	Podname  string `json:"podname"`
	Nodename string `json:"nodename"`
}

// EngineInfo is core's engine report handed to add-node. core marshals a Go
// struct without JSON tags, so the keys are capitalised; Resources values are
// byte slices and arrive base64-encoded.
type EngineInfo struct {
	Type         string                `json:"Type"`
	ID           string                `json:"ID"`
	NCPU         int64                 `json:"NCPU"`
	MemTotal     int64                 `json:"MemTotal"`
	StorageTotal int64                 `json:"StorageTotal"`
	Resources    map[string]RawOrBytes `json:"Resources"`
}

// RawOrBytes is a JSON document carried either as a base64 string (what core
// sends for a []byte) or inline (what a person typing a request would write).
type RawOrBytes []byte

// UnmarshalJSON accepts a base64 string or any inline JSON value.
func (r *RawOrBytes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return err
		}
		*r = b
		return nil
	}
	*r = append((*r)[:0], data...)
	return nil
}

// NodeCapacity is one node's answer to get-nodes-deploy-capacity. core reads
// it with case-insensitive decoding into {Capacity int, Usage, Rate, Weight
// float64}.
type NodeCapacity struct {
	Capacity int     `json:"capacity"`
	Usage    float64 `json:"usage"`
	Rate     float64 `json:"rate"`
	Weight   float64 `json:"weight"`
}

// DeployCapacity is the answer of get-nodes-deploy-capacity. The map is
// never nil: core reads a null map as "no constraint".
type DeployCapacity struct {
	Nodes map[string]NodeCapacity `json:"nodes_deploy_capacity_map"`
	Total int                     `json:"total"`

	// order is Nodes' names as their maker had them (InOrder): when they
	// are Nodes' keys, sorted, AppendJSON writes them in it instead of
	// sorting the keys itself.
	order []string
}

// InOrder is d told the names of its Nodes in the order its maker had them
// (a capacity query's nodes as core listed them, which is sorted: etcd
// lists keys in order). It only spares AppendJSON a sort of 10,000 names:
// names that are not Nodes' keys, or not sorted, are ignored.
func (d DeployCapacity) InOrder(names []string) DeployCapacity {
	d.order = names
	return d
}

// NodeResource is the answer of add-node, the capacity and usage of a node in
// the resource's own stored form.
type NodeResource struct {
	Capacity any `json:"capacity"`
	Usage    any `json:"usage"`
}

// NodeResourceInfo is the answer of get-node-resource-info and
// fix-node-resource.
type NodeResourceInfo struct {
	Capacity any      `json:"capacity"`
	Usage    any      `json:"usage"`
	Diffs    []string `json:"diffs"`
}

// BeforeAfter is the answer of the set-node-resource-* verbs: before is the
// snapshot core replays to roll the call back.
type BeforeAfter struct {
	Before any `json:"before"`
	After  any `json:"after"`
}

// MostIdle is the answer of get-most-idle-node.
type MostIdle struct {
	Nodename string `json:"nodename"`
	Priority int    `json:"priority"`
}

// Deploy is the answer of calculate-deploy: one entry per workload in both
// lists.
type Deploy struct {
	EnginesParams     []any `json:"engines_params"`
	WorkloadsResource []any `json:"workloads_resource"`
}

// Realloc is the answer of calculate-realloc.
type Realloc struct {
	EngineParams     any `json:"engine_params"`
	DeltaResource    any `json:"delta_resource"`
	WorkloadResource any `json:"workload_resource"`
}

// Remap is the answer of calculate-remap.
type Remap struct {
	EngineParamsMap map[string]any `json:"engine_params_map"`
}

// MetricDescription declares one metric and its label names.
type MetricDescription struct {
	Name   string   `json:"name"`
	Help   string   `json:"help"`
	Type   string   `json:"type"`
	Labels []string `json:"labels"`
}

// Metric is one sample: label values in the order of the description, the
// statsd key and the value as a string.
type Metric struct {
	Name   string   `json:"name"`
	Labels []string `json:"labels"`
	Key    string   `json:"key"`
	Value  string   `json:"value"`
}

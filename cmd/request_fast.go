package cmd

import (
	"encoding/json"

	"github.com/eru-extend/resources/internal/fastjson"
	"github.com/eru-extend/resources/types"
)

// decodeRequestFast decodes a request in the form core's encoding/json
// writes it (no white space, no escapes in the strings, each key once and
// spelt as the field's tag) without reflection: a capacity query of 10,000
// nodes spends most of its decoding in encoding/json reading the names.
// It answers false on anything else, req untouched, and the caller
// decodes with encoding/json, which then reads what it always did
// (FuzzDecodeRequestFast holds the two to the same answer).
func decodeRequestFast(data []byte, req *types.Request) bool {
	var r types.Request
	var seen [13]bool
	d := fastjson.New(data)
	raw := func(seen *bool, into *json.RawMessage) bool {
		if d.Null() { // encoding/json hands a RawMessage the literal
			*into = json.RawMessage("null")
			return fastjson.Once(seen)
		}
		v, ok := d.Composite()
		if !ok || !fastjson.Once(seen) {
			return false
		}
		*into = append(json.RawMessage(nil), v...)
		return true
	}
	str := func(seen *bool, into *string) bool {
		v, ok := d.Str()
		*into = v
		return ok && fastjson.Once(seen)
	}
	flag := func(seen *bool, into *bool) bool {
		v, ok := d.Bool()
		*into = v
		return ok && fastjson.Once(seen)
	}
	ok := d.Object(func(key []byte) bool {
		switch string(key) {
		case "nodename":
			return str(&seen[0], &r.Nodename)
		case "podname":
			return str(&seen[1], &r.Podname)
		case "nodenames":
			if !fastjson.Once(&seen[2]) {
				return false
			}
			r.Nodenames = []string{}
			return d.Array(func() bool {
				n, ok := d.Str()
				r.Nodenames = append(r.Nodenames, n)
				return ok
			})
		case "deploy_count":
			n, ok := d.Int()
			r.DeployCount = int(n)
			return ok && fastjson.Once(&seen[3])
		case "delta":
			return flag(&seen[4], &r.Delta)
		case "incr":
			return flag(&seen[5], &r.Incr)
		case "resource":
			return raw(&seen[6], &r.Resource)
		case "resource_request":
			return raw(&seen[7], &r.ResourceRequest)
		case "capacity":
			return raw(&seen[8], &r.Capacity)
		case "usage":
			return raw(&seen[9], &r.Usage)
		case "workload_resource":
			return raw(&seen[10], &r.WorkloadResource)
		case "workload_resource_request":
			return raw(&seen[11], &r.WorkloadResourceRequest)
		case "workloads_resource":
			return raw(&seen[12], &r.WorkloadsResource)
		}
		// nodes, info, and any other key (encoding/json
		// matches keys without regard to case) are left to encoding/json.
		return false
	})
	if !ok || !d.Done() {
		return false
	}
	*req = r
	return true
}

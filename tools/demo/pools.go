package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// poolSteps walk a storage pool shared by two nodes: declare it, set its
// capacity, place workloads with POOL bindings, end one node's session
// (its host died), isolate it, and attach its object on the other node,
// whose engine gets the same object under its own path of the pool.
func (d *demo) poolSteps() []func() error {
	paths := map[string]string{"p1": filepath.Join(d.dir, "mnt", "p1", "ceph-a"), "p2": filepath.Join(d.dir, "mnt", "p2", "ceph-a")}
	var onP1 []json.RawMessage
	var object string
	return []func() error{
		func() error {
			say("pools: nodes p1 and p2 both mount the Ceph pool ceph-a, each at its own path")
			for _, n := range []string{"p1", "p2"} {
				if err := os.MkdirAll(paths[n], 0o755); err != nil {
					return err
				}
				if _, err := d.brief("add-node", obj{"nodename": n, "resource": obj{"storage": "1T", "pools": []string{"ceph-a:" + paths[n]}}}, "", "capacity.pools"); err != nil {
					return err
				}
			}
			say("pools: a new pool takes no objects until an operator sets its capacity (--if-version is the version read)")
			if _, err := d.op("storage", "pools", "get", "ceph-a", "-o", "table"); err != nil {
				return err
			}
			_, err := d.op("storage", "pools", "set-capacity", "ceph-a", "300G", "--if-version", "0", "-o", "table")
			return err
		},
		func() error {
			say("pools: room for three 100G objects, dealt between the nodes that reach the pool (the capacities add up to 3)")
			_, err := d.call("storage", "get-nodes-deploy-capacity", obj{"nodenames": []string{"p1", "p2"},
				"workload_resource": obj{"volumes": []string{"POOL@ceph-a:/data:rw:100G"}}}, false)
			return err
		},
		func() error {
			say("pools: one workload with a POOL binding on each node; the engine gets the node's path of the pool")
			for _, n := range []string{"p1", "p2"} {
				w, err := d.deploy(n, "POOL@ceph-a:/data:rw:100G")
				if err != nil {
					return err
				}
				if n == "p1" {
					onP1 = w
				}
			}
			if _, err := d.op("storage", "pools", "objects", "ceph-a", "-o", "table"); err != nil {
				return err
			}
			var plan struct {
				Plans map[string]struct {
					Object string `json:"object"`
				} `json:"pool_plan_request"`
			}
			if err := json.Unmarshal(onP1[0], &plan); err != nil {
				return err
			}
			for _, p := range plan.Plans {
				object = p.Object
			}
			if object == "" {
				return fmt.Errorf("p1's workload planned no pool object")
			}
			return nil
		},
		func() error {
			say("pools: p1's agent reports (a live session); isolating p1 is refused while the session lives")
			if err := d.opBrief([]string{"status", "session.live"}, "storage", "nodes", "heartbeat", "p1", "--ttl", "1m", "--pool-check", "exists"); err != nil {
				return err
			}
			if err := d.opFail("storage", "nodes", "isolate", "p1"); err != nil {
				return err
			}
			say("pools: p1's host dies: its session ends (here at once; a lapsed --ttl does the same)")
			if err := d.opBrief([]string{"status", "unschedulable_reasons"}, "storage", "nodes", "end-session", "p1"); err != nil {
				return err
			}
			say("pools: p1 is isolated: its object is unheld but still reserved (the data is in the pool)")
			if err := d.opBrief([]string{"node.status", "released_pool_objects", "released_pool_bytes"}, "storage", "nodes", "isolate", "p1"); err != nil {
				return err
			}
			_, err := d.op("storage", "pools", "objects", "ceph-a", "-o", "table")
			return err
		},
		func() error {
			say("pools: fail over: p2 attaches p1's object %s with POOL@ceph-a/%s — same data, p2's path, the reservation unchanged", object, object)
			if _, err := d.deploy("p2", "POOL@ceph-a/"+object+":/data:rw"); err != nil {
				return err
			}
			if _, err := d.op("storage", "pools", "objects", "ceph-a", "-o", "table"); err != nil {
				return err
			}
			say("pools: core removes the dead workload from p1: a no-op for the attached object, never a second release")
			if _, err := d.brief("set-node-resource-usage", obj{"nodename": "p1", "workloads_resource": onP1, "delta": true, "incr": false},
				`{"nodename":"p1","workloads_resource":[<p1's workload>],"delta":true,"incr":false}`, "before.pool_objects", "after.pool_objects"); err != nil {
				return err
			}
			if _, err := d.op("storage", "pools", "get", "ceph-a", "-o", "table"); err != nil {
				return err
			}
			_, err := d.op("storage", "pools", "check")
			return err
		},
	}
}

// deploy plans one workload with a pool binding on node and commits its
// usage, as core does; it returns the workload resources.
func (d *demo) deploy(node, binding string) ([]json.RawMessage, error) {
	req := obj{"nodename": node, "deploy_count": 1, "workload_resource_request": obj{"volumes": []string{binding}}}
	out, err := d.brief("calculate-deploy", req, "", "engines_params.0.volumes", "workloads_resource.0.pool_plan_request")
	if err != nil {
		return nil, err
	}
	var w struct {
		Workloads []json.RawMessage `json:"workloads_resource"`
	}
	if err := json.Unmarshal(out, &w); err != nil {
		return nil, err
	}
	_, err = d.brief("set-node-resource-usage", obj{"nodename": node, "workloads_resource": w.Workloads, "delta": true, "incr": true},
		`{"nodename":"`+node+`","workloads_resource":[<the plan above>],"delta":true,"incr":true}`, "after.pool_objects")
	return w.Workloads, err
}

// brief runs a storage verb that must succeed, like call, but prints only
// the members of the answer at paths (dot-separated, array indexes as
// numbers), and shown in place of a long request when it is not empty.
func (d *demo) brief(verb string, req any, shown string, paths ...string) (json.RawMessage, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if shown == "" {
		shown = string(in)
	}
	fmt.Printf("\n$ storage %s <<< %s\n", verb, shown)
	out, code, err := d.exec("storage", in, verb)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("storage %s exited %d: %s", verb, code, out)
	}
	if err := printPaths(out, paths); err != nil {
		return nil, fmt.Errorf("storage %s: %w", verb, err)
	}
	return out, nil
}

// opBrief runs an operator command that must succeed and prints only the
// members of its JSON answer at paths.
func (d *demo) opBrief(paths []string, binary string, args ...string) error {
	fmt.Printf("\n$ %s %s\n", binary, strings.Join(args, " "))
	out, code, err := d.exec(binary, nil, args...)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%s %v exited %d: %s", binary, args, code, out)
	}
	return printPaths(out, paths)
}

// printPaths prints the members of a JSON answer at paths (dot-separated,
// array indexes as numbers), one line each.
func printPaths(out []byte, paths []string) error {
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		return err
	}
	for _, p := range paths {
		at := v
		for _, k := range strings.Split(p, ".") {
			switch x := at.(type) {
			case map[string]any:
				at = x[k]
			case []any:
				i, err := strconv.Atoi(k)
				if err != nil || i >= len(x) {
					return fmt.Errorf("no %s in the answer", p)
				}
				at = x[i]
			default:
				return fmt.Errorf("no %s in the answer", p)
			}
		}
		b, err := json.Marshal(at)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s\n", p, b)
	}
	return nil
}

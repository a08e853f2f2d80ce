// Command demo walks the eru flow against the built plugin binaries on the
// embedded store — no etcd needed — printing every request and answer the
// way core would exchange them: add nodes, ask capacity, deploy, commit
// usage, realloc up and down, read diffs and fix them, metrics, overcommit,
// drain and retire a node, and fail a workload over between two nodes
// that share a storage pool.
//
//	go run ./tools/demo -bin ./bin
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	binDir := flag.String("bin", "bin", "folder holding the storage and compute binaries")
	keep := flag.Bool("keep", false, "keep the demo's plugin folder (and its store) afterwards")
	flag.Parse()
	if err := run(*binDir, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	bin, dir string
}

// call runs one plugin verb as core does and returns its answer; a failure
// ends the demo unless wantFail.
func (d *demo) call(binary, verb string, req any, wantFail bool) (json.RawMessage, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	fmt.Printf("\n$ %s %s <<< %s\n", binary, verb, in)
	out, code, err := d.exec(binary, in, verb)
	if err != nil {
		return nil, err
	}
	if wantFail {
		if code == 0 {
			return nil, fmt.Errorf("%s %s should have been refused", binary, verb)
		}
		fmt.Printf("(exit %d) %s", code, out)
		return nil, nil
	}
	if code != 0 {
		return nil, fmt.Errorf("%s %s exited %d: %s", binary, verb, code, out)
	}
	fmt.Println(pretty(out))
	return bytes.TrimSpace(out), nil
}

// op runs an operator command.
func (d *demo) op(binary string, args ...string) (json.RawMessage, error) {
	fmt.Printf("\n$ %s %s\n", binary, strings.Join(args, " "))
	out, code, err := d.exec(binary, nil, args...)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("%s %v exited %d: %s", binary, args, code, out)
	}
	fmt.Println(pretty(out))
	return bytes.TrimSpace(out), nil
}

// opFail runs an operator command that must be refused, and shows why.
func (d *demo) opFail(binary string, args ...string) error {
	fmt.Printf("\n$ %s %s\n", binary, strings.Join(args, " "))
	out, code, err := d.exec(binary, nil, args...)
	if err != nil {
		return err
	}
	if code == 0 {
		return fmt.Errorf("%s %v should have been refused", binary, args)
	}
	fmt.Printf("(exit %d) %s", code, out)
	return nil
}

func (d *demo) exec(binary string, stdin []byte, args ...string) ([]byte, int, error) {
	cmd := exec.Command(filepath.Join(d.bin, binary), args...)
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return out, exit.ExitCode(), nil
		}
		return nil, 0, err
	}
	return out, 0, nil
}

func pretty(out []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, bytes.TrimSpace(out), "", "  ") != nil {
		return string(out)
	}
	return buf.String()
}

func say(format string, args ...any) {
	fmt.Printf("\n### "+format+"\n", args...)
}

type obj = map[string]any

func run(binDir string, keep bool) error {
	bin, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "eru-plugins-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	config := "embedded:\n  path: eru-resources.db\nscheduler:\n  max_deploy_count: 10000\n"
	for _, name := range []string{"storage.yaml", "compute.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(config), 0o644); err != nil {
			return err
		}
	}
	d := &demo{bin: bin, dir: dir}
	fmt.Printf("plugin folder (core's resource_plugin.dir): %s\nconfig: %s", dir, config)
	var w struct {
		Workloads []json.RawMessage `json:"workloads_resource"`
	}
	// realloc resizes the first workload by a binding's delta and commits the
	// change as core does.
	realloc := func(binding string) error {
		out, err := d.call("storage", "calculate-realloc", obj{"nodename": "n1", "workload_resource": w.Workloads[0],
			"workload_resource_request": obj{"volumes": []string{binding}}}, false)
		if err != nil {
			return err
		}
		var r struct {
			Delta    json.RawMessage `json:"delta_resource"`
			Workload json.RawMessage `json:"workload_resource"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return err
		}
		w.Workloads[0] = r.Workload
		_, err = d.call("storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": []json.RawMessage{r.Delta}, "delta": true, "incr": true}, false)
		return err
	}
	steps := []func() error{
		func() error {
			say("eru-cli node add --resource storage=... for two nodes: two 1T volumes and a disk on n1, one 500G volume on n2")
			if _, err := d.call("storage", "add-node", obj{"nodename": "n1", "resource": obj{
				"volumes": []string{"/data0:1T", "/data1:1T"}, "disks": []string{"/dev/vda:/,/data0:1000:1000:1G:1G"}, "storage": "2T"}}, false); err != nil {
				return err
			}
			_, err := d.call("storage", "add-node", obj{"nodename": "n2", "resource": obj{"volumes": []string{"/data0:500G"}},
				"info": obj{"StorageTotal": 1 << 40}}, false)
			return err
		},
		func() error {
			say("core asks how many workloads with a 100G volume fit on each node")
			_, err := d.call("storage", "get-nodes-deploy-capacity", obj{"nodenames": []string{"n1", "n2"},
				"workload_resource": obj{"volumes": []string{"AUTO:/data:rw:100G:100:100:0:0"}}}, false)
			return err
		},
		func() error {
			say("core deploys two of them on n1: the plans, then it commits their usage")
			out, err := d.call("storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 2,
				"workload_resource_request": obj{"volumes": []string{"AUTO:/data:rw:100G:100:100:0:0"}, "storage": "10G"}}, false)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(out, &w); err != nil {
				return err
			}
			_, err = d.call("storage", "set-node-resource-usage", obj{"nodename": "n1", "workloads_resource": w.Workloads, "delta": true, "incr": true}, false)
			return err
		},
		func() error {
			say("a deploy asking more than fits is refused with the reason")
			_, err := d.call("storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 9,
				"workload_resource_request": obj{"volumes": []string{"AUTO:/data:rw:100G:100:100:0:0"}}}, true)
			return err
		},
		func() error {
			say("realloc: the first workload's volume grows by 50G and stays on its device; core commits the delta")
			return realloc("AUTO:/data:rw:50G")
		},
		func() error {
			say("realloc: it shrinks by 120G")
			return realloc("AUTO:/data:rw:-120G")
		},
		func() error {
			say("node info with the workloads core knows: usage agrees, no diffs")
			if _, err := d.call("storage", "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": w.Workloads}, false); err != nil {
				return err
			}
			say("someone writes usage by hand; info shows the diffs and fix repairs them")
			if _, err := d.call("storage", "set-node-resource-usage", obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data1:5G"}}, "delta": true, "incr": true}, false); err != nil {
				return err
			}
			if _, err := d.call("storage", "get-node-resource-info", obj{"nodename": "n1", "workloads_resource": w.Workloads}, false); err != nil {
				return err
			}
			_, err := d.call("storage", "fix-node-resource", obj{"nodename": "n1", "workloads_resource": w.Workloads}, false)
			return err
		},
		func() error {
			say("metrics for Prometheus and statsd")
			_, err := d.call("storage", "get-metrics", obj{"podname": "pod1", "nodename": "n1"}, false)
			return err
		},
		func() error {
			say("compute: 16 cores at 4x overcommit take 64 vCPUs")
			if _, err := d.call("compute", "add-node", obj{"nodename": "n1", "resource": obj{"cpu": 16, "memory": "64G"}}, false); err != nil {
				return err
			}
			if _, err := d.op("compute", "overcommit", "set-defaults", "--cpu", "4000", "--memory", "1000"); err != nil {
				return err
			}
			_, err := d.call("compute", "get-nodes-deploy-capacity", obj{"nodenames": []string{"n1"}, "workload_resource": obj{"cpu": 1, "memory": "512M"}}, false)
			return err
		},
		func() error {
			say("the operator drains n2; with no usage it is DRAINED at once, takes no placement, and is retired")
			if _, err := d.op("storage", "nodes", "drain", "n2", "-o", "table"); err != nil {
				return err
			}
			if _, err := d.call("storage", "get-nodes-deploy-capacity", obj{"nodenames": []string{"n1", "n2"}, "workload_resource": obj{"volumes": []string{"AUTO:/data:rw:10G"}}}, false); err != nil {
				return err
			}
			if _, err := d.op("storage", "nodes", "retire", "n2"); err != nil {
				return err
			}
			_, err := d.op("storage", "nodes", "list", "-o", "table")
			return err
		},
	}
	steps = append(steps, d.poolSteps()...)
	steps = append(steps, d.serveStep)
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	fmt.Println("\ndemo finished: every exchange above is what core would send and receive.")
	return nil
}

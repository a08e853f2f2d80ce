package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A check judges one timed run's standard output; i is the run's index.
// Every answer the bench times is checked: a wrong answer fails the bench.
type check func(i int, stdout []byte) error

// exactly wants stdout to be want and nothing else.
func exactly(want string) check {
	return func(_ int, out []byte) error {
		if string(out) != want {
			return fmt.Errorf("answered %q, want %q", clip(out), want)
		}
		return nil
	}
}

// resource is a storage capacity or usage as the plugin answers it.
type resource struct {
	Volumes map[string]int64 `json:"volumes"`
	Storage int64            `json:"storage"`
}

type nodeInfo struct {
	Capacity *resource `json:"capacity"`
	Usage    *resource `json:"usage"`
	Diffs    []string  `json:"diffs"`
}

// checkRecord wants a node's capacity as loaded and its usage of /data0 and
// of the flat budget to be u.
func checkRecord(info nodeInfo, u int64) error {
	if info.Capacity == nil || info.Usage == nil {
		return fmt.Errorf("no capacity or usage")
	}
	if c := info.Capacity.Volumes; c["/data0"] != tib || c["/data1"] != tib || len(c) != 2 {
		return fmt.Errorf("capacity volumes %v, want /data0 and /data1 of %d", c, tib)
	}
	if info.Capacity.Storage != storageCapacity {
		return fmt.Errorf("capacity storage %d, want %d", info.Capacity.Storage, storageCapacity)
	}
	if got := info.Usage.Volumes["/data0"]; got != u {
		return fmt.Errorf("usage of /data0 %d, want %d", got, u)
	}
	if info.Usage.Storage != u {
		return fmt.Errorf("usage of storage %d, want %d", info.Usage.Storage, u)
	}
	return nil
}

// nodeInfoOf wants get-node-resource-info's answer for node i, which holds
// no workload it does not account for (used(i) is 0).
func nodeInfoOf(i int) check {
	return func(_ int, out []byte) error {
		var info nodeInfo
		if err := decode(out, &info); err != nil {
			return err
		}
		if err := checkRecord(info, used(i)); err != nil {
			return err
		}
		if len(info.Diffs) != 0 {
			return fmt.Errorf("diffs %q, want none", info.Diffs)
		}
		return nil
	}
}

// alternatingUsage wants set-node-resource-usage's answer for node i when
// run r adds 1 GiB to /data0 (r even) or takes it back (r odd), starting
// from used(i): before and after must be the node's usage just before and
// just after this run.
func alternatingUsage(i int) check {
	return func(r int, out []byte) error {
		var ans struct {
			Before *resource `json:"before"`
			After  *resource `json:"after"`
		}
		if err := decode(out, &ans); err != nil {
			return err
		}
		low, high := used(i), used(i)+gib
		before, after := low, high
		if r%2 == 1 {
			before, after = high, low
		}
		if err := checkUsage(ans.Before, before); err != nil {
			return fmt.Errorf("before: %w", err)
		}
		if err := checkUsage(ans.After, after); err != nil {
			return fmt.Errorf("after: %w", err)
		}
		return nil
	}
}

// checkUsage wants a usage of want bytes of /data0, and as much of the flat
// budget (a volume counts in it; the node holds no other storage).
func checkUsage(u *resource, want int64) error {
	if u == nil {
		return fmt.Errorf("no usage")
	}
	if got := u.Volumes["/data0"]; got != want {
		return fmt.Errorf("usage of /data0 %d, want %d", got, want)
	}
	if u.Storage != want {
		return fmt.Errorf("usage of storage %d, want %d", u.Storage, want)
	}
	return nil
}

// capacityOf wants get-nodes-deploy-capacity's answer for exactly names:
// each node's capacity wantCapacity, the total their sum.
func capacityOf(names []string) check {
	return func(_ int, out []byte) error {
		var ans struct {
			Nodes map[string]struct {
				Capacity int `json:"capacity"`
			} `json:"nodes_deploy_capacity_map"`
			Total int `json:"total"`
		}
		if err := decode(out, &ans); err != nil {
			return err
		}
		if len(ans.Nodes) != len(names) {
			return fmt.Errorf("answered %d nodes, want %d", len(ans.Nodes), len(names))
		}
		total := 0
		for _, name := range names {
			got, ok := ans.Nodes[name]
			if !ok {
				return fmt.Errorf("node %s missing from the answer", name)
			}
			want := wantCapacity(nodeIndex(name))
			if got.Capacity != want {
				return fmt.Errorf("node %s: capacity %d, want %d", name, got.Capacity, want)
			}
			total += want
		}
		if ans.Total != total {
			return fmt.Errorf("total %d, want %d", ans.Total, total)
		}
		return nil
	}
}

// metricsOf wants get-metrics' answer for exactly names: for every node its
// used and offered storage and the use of each of its two volumes.
func metricsOf(names []string) check {
	return func(_ int, out []byte) error {
		var samples []struct {
			Name   string   `json:"name"`
			Labels []string `json:"labels"`
			Value  string   `json:"value"`
		}
		if err := decode(out, &samples); err != nil {
			return err
		}
		seen := make(map[string]int, len(names))
		for _, s := range samples {
			if len(s.Labels) < 2 {
				return fmt.Errorf("sample %s has labels %q", s.Name, s.Labels)
			}
			node := s.Labels[1]
			i := nodeIndex(node)
			if i < 0 {
				return fmt.Errorf("sample %s names node %q", s.Name, node)
			}
			var want int64 = -1
			switch {
			case s.Name == "storage_used":
				want = used(i)
			case s.Name == "storage_capacity":
				want = storageCapacity
			case s.Name == "storage_volume_capacity":
				want = tib
			case s.Name == "storage_volume_used" && len(s.Labels) == 3 && s.Labels[2] == "/data0":
				want = used(i)
			case s.Name == "storage_volume_used" && len(s.Labels) == 3 && s.Labels[2] == "/data1":
				want = 0
			}
			if want >= 0 {
				if s.Value != strconv.FormatInt(want, 10) {
					return fmt.Errorf("node %s: %s %q = %s, want %d", node, s.Name, s.Labels, s.Value, want)
				}
				seen[node]++
			}
		}
		for _, name := range names {
			if seen[name] != 6 {
				return fmt.Errorf("node %s: %d of its 6 samples", name, seen[name])
			}
		}
		if len(seen) != len(names) {
			return fmt.Errorf("samples of %d nodes, want %d", len(seen), len(names))
		}
		return nil
	}
}

// etcdctlRecord wants etcdctl get's output of node i's storage record.
func etcdctlRecord(key string, i int) check {
	return func(_ int, out []byte) error {
		k, v, _ := strings.Cut(strings.TrimSuffix(string(out), "\n"), "\n")
		if k != key {
			return fmt.Errorf("etcdctl printed key %q, want %q", k, key)
		}
		var info nodeInfo
		if err := decode([]byte(v), &info); err != nil {
			return err
		}
		return checkRecord(info, used(i))
	}
}

// etcdctlTxn wants etcdctl txn's output of the gets of a capacity query:
// SUCCESS, then keys and values, count[p] keys under each prefix p.
func etcdctlTxn(count map[string]int) check {
	return func(_ int, out []byte) error {
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 64<<20)
		if !sc.Scan() || sc.Text() != "SUCCESS" {
			return fmt.Errorf("etcdctl txn printed %q, want SUCCESS first", clip(out))
		}
		got := map[string]int{}
		for sc.Scan() {
			line := sc.Text()
			for p := range count {
				if strings.HasPrefix(line, p) {
					got[p]++
				}
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		for p, want := range count {
			if got[p] != want {
				return fmt.Errorf("etcdctl txn printed %d keys under %s, want %d", got[p], p, want)
			}
		}
		return nil
	}
}

// nodeIndex is the index in the name of a node made by nodeName, or -1.
func nodeIndex(name string) int {
	digits, ok := strings.CutPrefix(name, "node-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(digits)
	if err != nil || nodeName(i) != name {
		return -1
	}
	return i
}

// decode reads exactly one JSON value from out.
func decode(out []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(out))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("answer %q is not the JSON wanted: %w", clip(out), err)
	}
	if dec.More() {
		return fmt.Errorf("answer %q holds more than one JSON value", clip(out))
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

package overcommit

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// randomCPU is a CPU count as a person writes it: whole, one decimal,
// three decimals, or a fraction of one CPU.
func randomCPU(r *rand.Rand) string {
	switch r.Intn(4) {
	case 0:
		return fmt.Sprintf("%d", r.Intn(8)+1)
	case 1:
		return fmt.Sprintf("%d.%d", r.Intn(4), r.Intn(9)+1)
	case 2:
		return fmt.Sprintf("%d.%03d", r.Intn(3), r.Intn(999)+1)
	}
	return fmt.Sprintf("0.%02d", r.Intn(99)+1)
}

// randomMemory is a memory size in one of go-units' spellings.
func randomMemory(r *rand.Rand) string {
	units := []string{"", "K", "M", "G", "m", "g", "MiB", "GB"}
	return fmt.Sprintf("%d%s", r.Intn(900)+1, units[r.Intn(len(units))])
}

func TestPropertyCapacityAndDeployAgree(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	p := Rules{}
	for range 20000 {
		n := &Node{Capacity: Amount{CPUMillis: int64(r.Intn(64000) + 1), MemoryBytes: int64(r.Intn(64)+1) * gib},
			Usage: Amount{CPUMillis: int64(r.Intn(100000)), MemoryBytes: r.Int63n(80 * gib)}}
		if r.Intn(2) == 0 {
			n.Override.CPU = ptr(int64(r.Intn(MaxRatio) + 1))
		}
		d := Defaults{CPU: int64(r.Intn(MaxRatio) + 1), Memory: int64(r.Intn(MaxRatio) + 1)}
		req := map[string]any{}
		for _, k := range []string{"cpu", "cpu-request", "cpu-limit"} {
			if r.Intn(3) == 0 {
				req[k] = randomCPU(r)
			}
		}
		for _, k := range []string{"memory", "memory-request", "memory-limit"} {
			if r.Intn(3) == 0 {
				req[k] = randomMemory(r)
			}
		}
		raw, err := json.Marshal(req)
		require.NoError(t, err)
		w, err := p.ParseRequest(raw)
		require.NoError(t, err, "%s", raw)
		env := envWith(t, &d)
		env.MaxDeployCount = r.Intn(200) + 1
		c := p.DeployCapacity(n, w, env).Capacity
		if c > 0 {
			_, err := p.Deploy(n, w, c, env)
			require.NoError(t, err, "the capacity query answered %d for %s on %+v at %+v", c, raw, n, d)
		}
		_, err = p.Deploy(n, w, c+1, env)
		require.Error(t, err, "the capacity query answered %d for %s on %+v at %+v, and %d were admitted", c, raw, n, d, c+1)
	}
}

// Random deploys, reallocs and removals, recorded as core records them
// (set-node-resource-usage with the workloads, or realloc's delta_resource,
// delta and incr), keep the usage the sum of the workloads' requests, and
// bring it back to zero exactly; a realloc of limits alone leaves it as it
// is.
func TestPropertyUsageFollowsTheWorkloads(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	p := Rules{}
	n := &Node{Capacity: Amount{CPUMillis: 16000, MemoryBytes: 64 * gib}}
	env := envWith(t, &Defaults{CPU: 4000, Memory: 1500})
	var live []json.RawMessage
	record := func(ws []json.RawMessage, incr bool) {
		t.Helper()
		raw, err := json.Marshal(ws)
		require.NoError(t, err)
		edit, err := p.UsageChange(types.Change{Form: types.WorkloadsForm, Raw: raw}, true, incr)
		require.NoError(t, err)
		n, err = edit.Apply(n)
		require.NoError(t, err)
		require.NoError(t, n.Validate())
	}
	signed := func(s string) string {
		if r.Intn(2) == 0 {
			return "-" + s
		}
		return s
	}
	for range 5000 {
		switch r.Intn(3) {
		case 0:
			req, err := json.Marshal(map[string]any{"cpu-request": randomCPU(r), "cpu-limit": randomCPU(r), "memory-request": randomMemory(r), "memory-limit": randomMemory(r)})
			require.NoError(t, err)
			w, err := p.ParseRequest(req)
			require.NoError(t, err)
			out, err := p.Deploy(n, w, 1, env)
			if err != nil {
				continue
			}
			one, err := json.Marshal(out.WorkloadsResource[0])
			require.NoError(t, err)
			record([]json.RawMessage{one}, true)
			live = append(live, one)
		case 1:
			if len(live) == 0 {
				continue
			}
			k := r.Intn(len(live))
			delta, limitsOnly := map[string]any{}, true
			for _, key := range []string{"cpu", "cpu-request", "cpu-limit", "memory", "memory-request", "memory-limit"} {
				if r.Intn(3) != 0 {
					continue
				}
				if key[0] == 'c' {
					delta[key] = signed(randomCPU(r))
				} else {
					delta[key] = signed(randomMemory(r))
				}
				limitsOnly = limitsOnly && (key == "cpu-limit" || key == "memory-limit")
			}
			raw, err := json.Marshal(delta)
			require.NoError(t, err)
			resize, err := p.ParseResize(live[k], raw)
			require.NoError(t, err)
			out, _, err := resize.Plan(n, env)
			if err != nil {
				continue
			}
			diff := out.DeltaResource.(*Workload)
			if limitsOnly {
				require.Zero(t, diff.CPURequestMillis, "a realloc of %s moved the cpu reserved", raw)
				require.Zero(t, diff.MemoryRequest, "a realloc of %s moved the memory reserved", raw)
			}
			one, err := json.Marshal(diff)
			require.NoError(t, err)
			record([]json.RawMessage{one}, true)
			live[k], err = json.Marshal(out.WorkloadResource)
			require.NoError(t, err)
		case 2:
			if len(live) == 0 {
				continue
			}
			k := r.Intn(len(live))
			record([]json.RawMessage{live[k]}, false)
			live = append(live[:k], live[k+1:]...)
		}
		list, err := json.Marshal(live)
		require.NoError(t, err)
		_, diffs, err := Rules{}.Recompute(n, list, nil)
		require.NoError(t, err)
		require.Empty(t, diffs)
	}
	for _, w := range live {
		record([]json.RawMessage{w}, false)
	}
	require.Equal(t, Amount{}, n.Usage)
}

package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// killedAfter runs a plugin process (stdin given) and SIGKILLs it after
// delay unless it finished first; it reports whether the kill cut it short.
func (r *racer) killedAfter(delay time.Duration, stdin []byte, args ...string) bool {
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.env.Dir
	cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	cmd.Stdin = bytes.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.failf("%v: %v", args, err)
		return false
	}
	timer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	err := cmd.Wait()
	timer.Stop()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}

// TestPoolRaceKilledProcesses is race 12: a short chaos run in which
// usage writes (increases, decreases, core's rollbacks) and moves between
// two pools are SIGKILLed at random points, several at a time. Every kill
// leaves the old state or the new one: no object is in two records, the
// counters are exactly the objects, and `pools check` finds no drift.
// Every interrupted move is then resumed by the same command and settles,
// with its data in the target and nothing left of the source once
// `pools cleanup` ran.
func TestPoolRaceKilledProcesses(t *testing.T) {
	run := func(t *testing.T, env *testenv.Env) {
		dirA, dirB := t.TempDir(), t.TempDir()
		for _, n := range []string{"n1", "n2"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:" + dirA, "nfs1:" + dirB}, "default-pool": "ceph-a"})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "1T", "--if-version", "0")
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "nfs1", "1T", "--if-version", "0")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:1G"}}

		// Objects to move, each with data worth copying.
		var moving []string
		for range sizes(3, 2) {
			wl := placed(t, env, "n1", 1, "2G")[0]
			id := planObjects(wl)[0]
			require.NoError(t, os.MkdirAll(filepath.Join(dirA, id, "d"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dirA, id, "d", "f"), bytes.Repeat([]byte{'x'}, 8<<20), 0o644))
			moving = append(moving, id)
		}

		r := newRacer(t, env)
		var kills atomic.Int64
		kill := func(maxDelay time.Duration, req any, args ...string) {
			var in []byte
			if req != nil {
				var err error
				if in, err = json.Marshal(req); err != nil {
					r.failf("%v", err)
					return
				}
			}
			if r.killedAfter(time.Duration(rand.Int64N(int64(maxDelay))), in, args...) {
				kills.Add(1)
			}
		}
		var planned []json.RawMessage
		for round := range sizes(6, 3) {
			for _, node := range []string{"n1", "n2"} {
				wl, ok := r.planDeploy(node, request)
				if !ok {
					continue
				}
				planned = append(planned, wl)
				r.goes(func() {
					kill(150*time.Millisecond, obj{"nodename": node, "workloads_resource": []json.RawMessage{wl}, "delta": true, "incr": true}, "set-node-resource-usage")
				})
			}
			if round > 0 {
				old := planned[rand.IntN(len(planned)-2)]
				r.goes(func() {
					for _, node := range []string{"n1", "n2"} {
						kill(150*time.Millisecond, obj{"nodename": node, "workloads_resource": []json.RawMessage{old}, "delta": true, "incr": false}, "set-node-resource-usage")
					}
				})
			}
			r.goes(func() {
				// A write and core's rollback of it, both at risk.
				wl, ok := r.planDeploy("n2", request)
				if !ok {
					return
				}
				before, ok := r.write("n2", true, []json.RawMessage{wl})
				if ok {
					kill(150*time.Millisecond, obj{"nodename": "n2", "resource": before, "resource_request": nil, "workloads_resource": nil, "delta": false, "incr": false}, "set-node-resource-usage")
				}
			})
			id := moving[round%len(moving)]
			r.goes(func() {
				kill(400*time.Millisecond, nil, "pools", "move", id, "--to", "nfs1", "--node", "n1", "--command-id", "m-"+id)
			})
			r.wg.Wait()
		}
		r.done(t)
		require.Positive(t, kills.Load(), "no process was cut short")
		t.Logf("%d processes killed", kills.Load())

		exactPool(t, env, "ceph-a")
		exactPool(t, env, "nfs1")

		for _, id := range moving {
			var o struct {
				Pool  string `json:"pool"`
				State string `json:"state"`
			}
			env.OpOK(t, "storage", &o, "pools", "move", id, "--to", "nfs1", "--node", "n1", "--command-id", "m-"+id)
			require.Equal(t, "nfs1", o.Pool, "object %s", id)
			require.Equal(t, "AVAILABLE", o.State)
			got, err := os.ReadFile(filepath.Join(dirB, id, "d", "f"))
			require.NoError(t, err)
			require.Len(t, got, 8<<20)
		}
		env.OpOK(t, "storage", nil, "pools", "cleanup", "ceph-a", "--node", "n1")
		for _, id := range moving {
			_, err := os.Lstat(filepath.Join(dirA, id))
			require.True(t, os.IsNotExist(err), "the source of %s is removed", id)
		}
		left, err := os.ReadDir(dirB)
		require.NoError(t, err)
		for _, e := range left {
			require.NotContains(t, e.Name(), ".partial", "no partial copy is left")
		}
		living := exactPool(t, env, "nfs1")
		require.Len(t, living, len(moving))
		exactPool(t, env, "ceph-a")
		var rec struct {
			Cleanups int `json:"cleanup_count"`
		}
		require.True(t, env.Record(t, "/pools/ceph-a", &rec))
		require.Zero(t, rec.Cleanups)
	}
	races(t, run)
}

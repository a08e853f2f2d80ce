package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// killedWhen runs an operator command and SIGKILLs it as soon as path
// exists (or after limit); it reports whether the kill cut it short.
func (r *racer) killedWhen(path string, limit time.Duration, args ...string) bool {
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.env.Dir
	cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	if err := cmd.Start(); err != nil {
		r.failf("%v: %v", args, err)
		return false
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(limit)
	for {
		select {
		case <-exited:
			return false
		case <-deadline:
		case <-time.After(time.Millisecond):
			if _, err := os.Lstat(path); err != nil {
				continue
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := <-exited
		var exit *exec.ExitError
		return errors.As(err, &exit) && !exit.Exited()
	}
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
	t.Parallel()
	run := func(t *testing.T, env *testenv.Env) {
		dirA, dirB := t.TempDir(), t.TempDir()
		for _, n := range []string{"n1", "n2"} {
			addNode(t, env, n, obj{"storage": "1T", "pools": []string{"ceph-a:" + dirA, "nfs1:" + dirB}, "default-pool": "ceph-a"})
		}
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "ceph-a", "1T", "--if-version", "0")
		env.OpOK(t, "storage", nil, "pools", "set-capacity", "nfs1", "1T", "--if-version", "0")
		request := obj{"volumes": []string{"POOL@ceph-a:/data:rw:1G"}}

		// Objects to move back and forth, each with data worth copying.
		dirs := map[string]string{"ceph-a": dirA, "nfs1": dirB}
		other := map[string]string{"ceph-a": "nfs1", "nfs1": "ceph-a"}
		const dataSize = 16 << 20
		var moving []string
		command := map[string]string{}
		for range sizes(3, 2) {
			wl := placed(t, env, "n1", 1, "2G")[0]
			id := planObjects(wl)[0]
			require.NoError(t, os.MkdirAll(filepath.Join(dirA, id, "d"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dirA, id, "d", "f"), bytes.Repeat([]byte{'x'}, dataSize), 0o644))
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
		interrupted := 0
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
			// A move cut short once its copy has begun: the object is left
			// moving, reserved in both pools; the next round resumes it.
			id := moving[round%len(moving)]
			o := allObjects(t, env)[id]
			to := o.MovingTo
			if to == "" {
				to = other[o.Pool]
				command[id] = fmt.Sprintf("m%d-%s", round, id)
			}
			cmdID := command[id]
			r.goes(func() {
				if r.killedWhen(filepath.Join(dirs[to], "."+id+".partial"), 5*time.Second, "pools", "move", id, "--to", to, "--node", "n1", "--command-id", cmdID) {
					kills.Add(1)
					r.locked(func() { interrupted++ })
				}
			})
			r.wg.Wait()
		}
		r.done(t)
		require.Positive(t, kills.Load(), "no process was cut short")

		exactPool(t, env, "ceph-a")
		exactPool(t, env, "nfs1")
		t.Logf("%d processes killed, %d moves cut short while copying", kills.Load(), interrupted)
		require.Positive(t, interrupted, "no move was cut short while copying")

		for _, id := range moving {
			if o := allObjects(t, env)[id]; o.MovingTo != "" {
				env.OpOK(t, "storage", nil, "pools", "move", id, "--to", o.MovingTo, "--node", "n1", "--command-id", command[id])
			}
		}
		for _, p := range []string{"ceph-a", "nfs1"} {
			env.OpOK(t, "storage", nil, "pools", "cleanup", p, "--node", "n1")
		}
		objs := allObjects(t, env)
		for _, id := range moving {
			o := objs[id]
			require.Empty(t, o.MovingTo, "object %s settled", id)
			got, err := os.ReadFile(filepath.Join(dirs[o.Pool], id, "d", "f"))
			require.NoError(t, err, "object %s has its data in %s", id, o.Pool)
			require.Len(t, got, dataSize)
			_, err = os.Lstat(filepath.Join(dirs[other[o.Pool]], id))
			require.True(t, os.IsNotExist(err), "no copy of %s is left in %s", id, other[o.Pool])
		}
		for _, dir := range dirs {
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range left {
				require.NotRegexp(t, `\.(partial|scratch)$`, e.Name(), "no partial copy is left")
			}
		}
		exactPool(t, env, "ceph-a")
		exactPool(t, env, "nfs1")
		for _, p := range []string{"ceph-a", "nfs1"} {
			var rec struct {
				Cleanups int `json:"cleanup_count"`
			}
			require.True(t, env.Record(t, "/pools/"+p, &rec))
			require.Zero(t, rec.Cleanups, "pool %s keeps no cleanup", p)
		}
	}
	races(t, run)
}

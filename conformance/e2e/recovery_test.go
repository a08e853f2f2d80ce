package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/projecteru2/core/rpc/gen"
	"github.com/stretchr/testify/require"
)

// TestACoreKilledMidDeployFixesThePluginsUsageOnRestart kills core while
// storage holds the usage write of a deploy's allocation: every plugin has
// charged the workload, and no workload exists. core logged the allocation
// in its WAL first; on restart it replays it with GetNodeResource's fix,
// which is each plugin's fix-node-resource with the node's workloads (none).
func TestACoreKilledMidDeployFixesThePluginsUsageOnRestart(t *testing.T) {
	c := theCluster(t)
	const pod, nodeName = "crash", "cr1"
	c.addPod(t, pod)
	_, err := c.addNode(t, pod, nodeName, node())
	require.NoError(t, err)

	committed, release := c.holdAfterUsageWrite(t, "storage", nodeName)
	// the tests after this one need a core, whatever became of this one
	t.Cleanup(func() {
		if c.core == nil {
			require.NoError(t, c.startCore())
		}
	})
	deployed := make(chan error, 1)
	go func() {
		_, err := c.tryDeploy(t, "crashed", pod, []string{nodeName}, 1, web(), pb.DeployOptions_EACH)
		deployed <- err
	}()

	step(t, "storage has charged the workload when core is killed", func(t *testing.T) {
		require.Eventually(t, func() bool {
			_, err := os.Stat(committed)
			return err == nil
		}, 60*time.Second, 100*time.Millisecond, "storage's usage write of the deploy")
		c.killCore(t)
		require.Error(t, <-deployed, "the deploy died with core")
		release()
		// core's node lock lives on a lease of lock_timeout: let it lapse,
		// so the replay's fix does not wait on a lock its dead owner holds
		locks := corePrefix + "/__lock__" + corePrefix
		require.NotEmpty(t, c.keys(t, locks), "the dead core's locks")
		require.Eventually(t, func() bool { return len(c.keys(t, locks)) == 0 },
			60*time.Second, 500*time.Millisecond, "the killed core's locks lapse")
		var record struct {
			Usage storageNode `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(c.record(t, "storage", nodeName), &record))
		require.Equal(t, 10*GiB, record.Usage.Storage, "storage holds the workload's volume")
	})

	step(t, "the restarted core replays the allocation and every plugin's usage is exactly zero", func(t *testing.T) {
		require.NoError(t, c.startCore())
		require.Empty(t, c.workloads(t, nodeName), "no workload was created")
		r := c.nodeResource(t, nodeName, false)
		require.Empty(t, r.Diffs)
		require.Equal(t, zero, r.stored(t))
	})

	_, err = c.rpc.RemoveNode(ctx(t), &pb.RemoveNodeOptions{Nodename: nodeName})
	require.NoError(t, err)
	require.Empty(t, c.nodeKeys(t, nodeName))
}

// holdAfterUsageWrite puts a wrapper in front of a plugin binary for the
// rest of the test: its set-node-resource-usage of node runs the real
// binary, which commits, then creates the file committed and holds its
// answer until release is called. Every other call goes straight through.
func (c *cluster) holdAfterUsageWrite(t *testing.T, binary, node string) (committed string, release func()) {
	t.Helper()
	path := filepath.Join(c.pluginDir, binary)
	real := filepath.Join(c.dir, "real-"+binary)
	committed = filepath.Join(c.dir, "committed-"+binary)
	held := filepath.Join(c.dir, "held-"+binary)
	require.NoError(t, os.WriteFile(held, nil, 0o644))
	require.NoError(t, os.Link(path, real))
	script := fmt.Sprintf(`#!/bin/sh
# a held answer, put by the e2e suite
in=$(cat)
if [ "$1" = set-node-resource-usage ]; then
  case "$in" in *'"nodename":"%[1]s"'*)
    out=$(printf '%%s' "$in" | %[2]q "$@") || exit $?
    : > %[3]q
    i=0
    while [ -e %[4]q ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
    printf '%%s' "$out"
    exit 0;;
  esac
fi
printf '%%s' "$in" | exec %[2]q "$@"
`, node, real, committed, held)
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(script), 0o755))
	require.NoError(t, os.Rename(tmp, path))
	release = func() { _ = os.Remove(held) }
	t.Cleanup(func() {
		release()
		require.NoError(t, os.Rename(real, path))
	})
	return committed, release
}

// killCore ends core at once (SIGKILL), as a crash or an OOM kill would.
func (c *cluster) killCore(t *testing.T) {
	t.Helper()
	require.NotNil(t, c.core)
	require.NoError(t, c.core.Process.Kill())
	<-c.exited
	c.core = nil
}

// record is a plugin's etcd record of node, read without core.
func (c *cluster) record(t *testing.T, resource, node string) []byte {
	t.Helper()
	resp, err := c.kv.Get(ctx(t), pluginPrefix+"/resource/"+resource+"/"+node)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the %s record of %s", resource, node)
	return resp.Kvs[0].Value
}

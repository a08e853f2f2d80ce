package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestDemoRunsToTheEnd runs `make demo`'s walk on freshly built binaries:
// every step must succeed (or be refused where the demo expects it), and
// the pool failover must print what it says it shows.
func TestDemoRunsToTheEnd(t *testing.T) {
	bin := filepath.Dir(testenv.Bin(t, "storage"))
	stdout := os.Stdout
	path := filepath.Join(t.TempDir(), "demo.out")
	out, err := os.Create(path)
	require.NoError(t, err)
	os.Stdout = out
	err = run(bin, false)
	os.Stdout = stdout
	require.NoError(t, out.Close())
	data, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	require.NoError(t, err, "the demo failed; its output:\n%s", data)
	text := string(data)
	require.Contains(t, text, "\ndemo finished: ")

	dir := regexp.MustCompile(`plugin folder \(core's resource_plugin.dir\): (\S+)`).FindStringSubmatch(text)
	require.NotNil(t, dir)
	pools := text[strings.Index(text, "### pools:"):strings.Index(text, "### an operator starts `storage serve`")]

	t.Run("the new pool has no capacity until the operator sets it, and the capacities add up to the room for three", func(t *testing.T) {
		require.Regexp(t, `(?m)^CAPACITY +unset \(takes no objects\)$`, pools)
		require.Regexp(t, `(?m)^CAPACITY +300 GiB\nRESERVED +0 B\nOBJECTS +0\nCLEANUPS +0\nVERSION +1$`, pools)
		require.Contains(t, pools, `"total": 3`)
	})
	p1 := regexp.MustCompile(`engines_params.0.volumes: \["` + regexp.QuoteMeta(dir[1]+"/mnt/p1/ceph-a/") + `(v-[0-9a-f]{16}):/data:rw:107374182400"\]`).FindStringSubmatch(pools)
	require.NotNil(t, p1, "p1's engine gets its object under p1's path of the pool:\n%s", pools)
	object := p1[1]
	t.Run("isolating p1 is refused while its session lives, then releases its object, still reserved", func(t *testing.T) {
		require.Contains(t, pools, "(exit 4) storage: nodes isolate: failed_precondition: node p1 is READY: its session is live until ")
		require.Contains(t, pools, "$ storage nodes end-session p1\nstatus: \"UNAVAILABLE\"\n")
		require.Contains(t, pools, "released_pool_objects: 1\nreleased_pool_bytes: 107374182400\n")
		require.Regexp(t, `(?m)^`+object+` +ceph-a +100 GiB +p1 +no +AVAILABLE +-$`, pools)
	})
	t.Run("p2 attaches the same object under p2's path, and the pool still reserves it once", func(t *testing.T) {
		require.Contains(t, pools, `engines_params.0.volumes: ["`+dir[1]+"/mnt/p2/ceph-a/"+object+`:/data:rw:107374182400"]`)
		require.Regexp(t, `(?m)^`+object+` +ceph-a +100 GiB +p2 +yes +AVAILABLE +-$`, pools)
		require.Contains(t, pools, "before.pool_objects: null\nafter.pool_objects: null\n", "p1's decrease releases nothing")
		require.Regexp(t, `(?m)^RESERVED +200 GiB\nOBJECTS +2$`, pools)
		require.Regexp(t, `(?m)^p2 +\S+/mnt/p2/ceph-a +yes +yes +2$`, pools)
		require.Contains(t, pools, `"drifted": false`)
	})
}

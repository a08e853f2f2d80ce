package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// storeCalls are every verb of both binaries that touches the store, and
// the operator commands, as calls to run.
func storeCalls(t *testing.T) (calls []call, names []string) {
	t.Helper()
	for _, bin := range bins {
		for _, c := range verbCases(bin) {
			if c.store {
				calls = append(calls, verbCall(t, bin, c.verb, c.req))
				names = append(names, "")
			}
		}
	}
	for _, c := range operatorCommands {
		calls = append(calls, call{bin: c.bin, args: c.args})
		names = append(names, c.name)
	}
	return calls, names
}

// TestADamagedEmbeddedStoreIsDataLoss: a state file that is truncated,
// empty or not a store at all makes every verb of both binaries and every
// operator command fail in one line, class data_loss naming the file (exit
// 128 for verbs, 11 for commands), with no panic and the file left as it
// was: not even add-node initialises a new store over it.
func TestADamagedEmbeddedStoreIsDataLoss(t *testing.T) {
	env := testenv.NewEmbedded(t)
	for _, bin := range bins {
		seed(t, env, bin)
	}
	whole, err := os.ReadFile(env.DB)
	require.NoError(t, err)
	calls, names := storeCalls(t)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"a state file truncated to its first pages", whole[:4*4096], "truncated: its pages reach"},
		{"a zero-length state file", []byte{}, "is empty (0 bytes), not a store"},
		{"a state file that holds text", bytes.Repeat([]byte("# notes\n"), 4096), "not a store of this project, or damaged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(env.DB, c.data, 0o644))
			results := runAll(t, env, calls)
			for i, res := range results {
				what := calls[i].bin + " " + strings.Join(calls[i].args, " ")
				t.Run(what+" fails in one data_loss line naming the file", func(t *testing.T) {
					require.NotContains(t, res.Stderr, "goroutine", "no panic")
					var line string
					if names[i] == "" {
						line = refusedVerb(t, res, calls[i].bin, calls[i].args[0])
					} else {
						line = refusedCommand(t, res, calls[i].bin, names[i], 11)
					}
					require.Contains(t, line, "data_loss: embedded store "+env.DB+": "+c.want)
				})
			}
			after, err := os.ReadFile(env.DB)
			require.NoError(t, err)
			require.Equal(t, c.data, after, "the file is left as it was")
		})
	}
	t.Run("the whole file back, every call works again", func(t *testing.T) {
		require.NoError(t, os.WriteFile(env.DB, whole, 0o644))
		answered(t, env.Verb(t, "storage", "get-node-resource-info", obj{"nodename": seeded}), "storage get-node-resource-info")
		answered(t, env.Op(t, "storage", "nodes", "list"), "storage nodes list")
	})
}

// asUser runs a plugin binary in dir as another user: as root (how the
// suite runs here) uid/gid 65534; as anyone else the same user, whom the
// files' modes alone restrict.
func asUser(t *testing.T, bin, dir string, stdin []byte, args ...string) testenv.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	cmd.Stdin = bytes.NewReader(stdin)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := testenv.Result{Stdout: out.String(), Stderr: errb.String()}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "running %s %v: %v", bin, args, err)
		res.Code = exit.ExitCode()
	}
	return res
}

// binariesForAll copies the plugin binaries where any user may run them.
func binariesForAll(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	out := map[string]string{}
	for _, bin := range bins {
		data, err := os.ReadFile(testenv.Bin(t, bin))
		require.NoError(t, err)
		out[bin] = filepath.Join(dir, bin)
		require.NoError(t, os.WriteFile(out[bin], data, 0o755))
	}
	return out
}

// TestAReadOnlyUserOfTheEmbeddedStore: a user who may read the plugin
// folder and the state file but write nothing there lists and reads nodes
// with both binaries; that user's writes are permission_denied (exit 9)
// naming the file; and a state file the user may not read is
// permission_denied too, not unavailable.
func TestAReadOnlyUserOfTheEmbeddedStore(t *testing.T) {
	binaries := binariesForAll(t)
	env := testenv.NewEmbedded(t)
	for _, bin := range bins {
		seed(t, env, bin)
	}
	require.NoError(t, os.Chmod(filepath.Dir(env.Dir), 0o755))
	for _, f := range []string{env.DB, env.DB + ".lock", env.DB + ".gate", filepath.Join(env.Dir, "storage.yaml"), filepath.Join(env.Dir, "compute.yaml")} {
		require.NoError(t, os.Chmod(f, 0o444))
	}
	require.NoError(t, os.Chmod(env.Dir, 0o555))
	t.Cleanup(func() { _ = os.Chmod(env.Dir, 0o755) })
	before, err := os.ReadFile(env.DB)
	require.NoError(t, err)

	t.Run("nodes list answers the seeded node", func(t *testing.T) {
		res := asUser(t, binaries["storage"], env.Dir, nil, "nodes", "list")
		answered(t, res, "storage nodes list")
		var list struct {
			Nodes []struct {
				NodeID string `json:"node_id"`
			} `json:"nodes"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &list))
		require.Len(t, list.Nodes, 1)
		require.Equal(t, seeded, list.Nodes[0].NodeID)
	})
	for _, c := range []struct {
		bin, verb string
		req       obj
	}{
		{"storage", "get-node-resource-info", obj{"nodename": seeded}},
		{"compute", "get-nodes-deploy-capacity", obj{"nodenames": []string{seeded}, "workload_resource": obj{"cpu": 1}}},
	} {
		t.Run(c.bin+" "+c.verb+" answers", func(t *testing.T) {
			answered(t, asUser(t, binaries[c.bin], env.Dir, mustJSON(t, c.req), c.verb), c.bin+" "+c.verb)
		})
	}
	t.Run("a write is permission_denied naming the store", func(t *testing.T) {
		line := refusedCommand(t, asUser(t, binaries["storage"], env.Dir, nil, "nodes", "drain", seeded), "storage", "nodes drain", 9)
		require.Contains(t, line, "permission_denied: embedded store "+env.DB+": ")
		line = refusedVerb(t, asUser(t, binaries["compute"], env.Dir, mustJSON(t, obj{"nodename": seeded, "resource_request": obj{"cpu": 1}, "delta": true, "incr": true}), "set-node-resource-usage"), "compute", "set-node-resource-usage")
		require.Contains(t, line, "permission_denied: embedded store "+env.DB+": ")
	})
	t.Run("a state file the user may not read is permission_denied naming it", func(t *testing.T) {
		require.NoError(t, os.Chmod(env.DB, 0o000))
		defer func() { require.NoError(t, os.Chmod(env.DB, 0o444)) }()
		line := refusedCommand(t, asUser(t, binaries["storage"], env.Dir, nil, "nodes", "list"), "storage", "nodes list", 9)
		require.Contains(t, line, "permission_denied: embedded store "+env.DB+": open "+env.DB+": permission denied")
		line = refusedVerb(t, asUser(t, binaries["storage"], env.Dir, mustJSON(t, obj{"nodename": seeded}), "get-node-resource-info"), "storage", "get-node-resource-info")
		require.Contains(t, line, "permission_denied: embedded store "+env.DB+": ")
	})
	after, err := os.ReadFile(env.DB)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing was written")
}

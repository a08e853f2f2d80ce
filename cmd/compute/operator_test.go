package main_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

func TestOvercommitDefaults(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G") // an embedded store exists once a plugin verb wrote
		t.Run("before any set the defaults are 1000/1000 at version 0", func(t *testing.T) {
			var d defaults
			raw := env.OpOK(t, bin, &d, "overcommit", "get-defaults")
			require.JSONEq(t, `{"cpu": 1000, "memory": 1000, "version": 0}`, string(raw))
			require.NotContains(t, env.Dump(t), "/overcommit/defaults", "reading writes nothing")
		})
		t.Run("set-defaults replaces both ratios and advances the version each time", func(t *testing.T) {
			for i, ratios := range [][2]string{{"4000", "1000"}, {"4000", "1500"}, {"1", "16000"}} {
				var d defaults
				env.OpOK(t, bin, &d, "overcommit", "set-defaults", "--cpu", ratios[0], "--memory", ratios[1])
				var want defaults
				env.OpOK(t, bin, &want, "overcommit", "get-defaults")
				require.Equal(t, want, d)
				require.Equal(t, int64(i+1), d.Version)
			}
			require.JSONEq(t, `{"cpu": 1, "memory": 16000, "version": 3}`, env.Dump(t)["/overcommit/defaults"])
		})
		t.Run("set-defaults needs both ratios", func(t *testing.T) {
			for _, args := range [][]string{{"--cpu", "2000"}, {"--memory", "2000"}, {}} {
				unchanged(t, env, func() {
					line := opFail(t, env, 2, append([]string{"overcommit", "set-defaults"}, args...)...)
					require.Equal(t, "compute: overcommit set-defaults: invalid_argument: set-defaults replaces both ratios: give --cpu and --memory", line)
				})
			}
		})
		t.Run("the storage binary answers the same overcommit commands on the same store", func(t *testing.T) {
			var fromStorage, fromCompute defaults
			env.OpOK(t, "storage", &fromStorage, "overcommit", "get-defaults")
			env.OpOK(t, bin, &fromCompute, "overcommit", "get-defaults")
			require.Equal(t, fromCompute, fromStorage)
			var n nodeRatios
			env.OpOK(t, "storage", &n, "overcommit", "get-node", "n1")
			require.Equal(t, effective{1, "DEFAULT"}, n.CPU)
		})
		t.Run("the table output names each figure", func(t *testing.T) {
			res := env.Op(t, bin, "overcommit", "get-defaults", "-o", "table")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Empty(t, res.Stderr)
			require.Equal(t, []string{"CPU RATIO     1 (0.001x)", "MEMORY RATIO  16000 (16x)", "VERSION       3"}, strings.Split(strings.TrimSpace(res.Stdout), "\n"))
		})
		t.Run("an output format other than json, yaml or table is refused", func(t *testing.T) {
			line := opFail(t, env, 2, "overcommit", "get-defaults", "-o", "xml")
			require.Equal(t, `compute: overcommit get-defaults: invalid_argument: --output "xml": want json, yaml or table`, line)
		})
		t.Run("a positional argument is refused", func(t *testing.T) {
			unchanged(t, env, func() {
				require.Contains(t, opFail(t, env, 2, "overcommit", "get-defaults", "n1"), `unexpected argument "n1"`)
				require.Contains(t, opFail(t, env, 2, "overcommit", "set-defaults", "n1", "--cpu", "1000", "--memory", "1000"), `unexpected argument "n1"`)
			})
		})
	})
}

func TestOvercommitNode(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		addNode(t, env, "n2", 16, "64G")
		env.OpOK(t, bin, nil, "overcommit", "set-defaults", "--cpu", "3000", "--memory", "1200")
		t.Run("a node without overrides follows the defaults", func(t *testing.T) {
			raw := env.OpOK(t, bin, nil, "overcommit", "get-node", "n1")
			require.JSONEq(t, `{"node_id": "n1", "cpu": {"ratio": 3000, "source": "DEFAULT"}, "memory": {"ratio": 1200, "source": "DEFAULT"}, "version": 0}`, string(raw))
		})
		t.Run("set-node replaces the overrides and advances the record's version", func(t *testing.T) {
			raw := env.OpOK(t, bin, nil, "overcommit", "set-node", "n1", "--cpu", "4000", "--memory", "1500")
			require.JSONEq(t, `{"node_id": "n1", "cpu": {"ratio": 4000, "source": "NODE"}, "memory": {"ratio": 1500, "source": "NODE"}, "version": 1}`, string(raw))
			require.JSONEq(t, `{"capacity": {"cpu_millis": 16000, "memory_bytes": 68719476736}, "usage": {"cpu_millis": 0, "memory_bytes": 0},
				"override": {"cpu": 4000, "memory": 1500}, "version": 1}`, env.Dump(t)["/resource/compute/n1"])
			require.Equal(t, int64(64000), info(t, env, "n1").Capacity.SchedulableCPUMillis)
		})
		t.Run("a ratio left out clears that override only", func(t *testing.T) {
			raw := env.OpOK(t, bin, nil, "overcommit", "set-node", "n1", "--memory", "1500")
			require.JSONEq(t, `{"node_id": "n1", "cpu": {"ratio": 3000, "source": "DEFAULT"}, "memory": {"ratio": 1500, "source": "NODE"}, "version": 2}`, string(raw))
		})
		t.Run("flags may stand before or after the node", func(t *testing.T) {
			before := env.OpOK(t, bin, nil, "overcommit", "set-node", "--cpu", "5000", "n2")
			require.JSONEq(t, `{"node_id": "n2", "cpu": {"ratio": 5000, "source": "NODE"}, "memory": {"ratio": 1200, "source": "DEFAULT"}, "version": 1}`, string(before))
			after := env.OpOK(t, bin, nil, "overcommit", "set-node", "n2", "--cpu", "6000", "--if-version", "1")
			require.JSONEq(t, `{"node_id": "n2", "cpu": {"ratio": 6000, "source": "NODE"}, "memory": {"ratio": 1200, "source": "DEFAULT"}, "version": 2}`, string(after))
			read := env.OpOK(t, bin, nil, "overcommit", "get-node", "-o", "json", "n2")
			require.JSONEq(t, string(after), string(read))
		})
		t.Run("the table output shows each ratio and its source", func(t *testing.T) {
			for _, args := range [][]string{{"get-node", "n1", "-o", "table"}, {"get-node", "-o", "table", "n1"}} {
				res := env.Op(t, bin, append([]string{"overcommit"}, args...)...)
				require.Equal(t, 0, res.Code, res.Stderr)
				require.Equal(t, []string{"NODE          n1", "CPU RATIO     3000 (3x), default", "MEMORY RATIO  1500 (1.5x), node", "VERSION       2"},
					strings.Split(strings.TrimSpace(res.Stdout), "\n"))
			}
			res := env.Op(t, bin, "overcommit", "set-node", "n1", "--memory", "1500", "-o", "table")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Contains(t, res.Stdout, "MEMORY RATIO  1500 (1.5x), node")
			require.Contains(t, res.Stdout, "VERSION       3")
		})
		t.Run("an extra positional argument is refused and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				for _, args := range [][]string{{"get-node", "n1", "n2"}, {"set-node", "n1", "n2", "--cpu", "2000"}, {"set-node", "n1", "--cpu", "2000", "n2"}, {"get-node"}, {"set-node", "--cpu", "2000"}} {
					line := opFail(t, env, 2, append([]string{"overcommit"}, args...)...)
					require.Contains(t, line, "invalid_argument: want 1 argument(s) (NODE), got")
				}
			})
		})
		t.Run("an unknown node is not found and nothing is written", func(t *testing.T) {
			unchanged(t, env, func() {
				require.Equal(t, "compute: overcommit get-node: not_found: node ghost has no compute record (add it with a compute resource first)",
					opFail(t, env, 3, "overcommit", "get-node", "ghost"))
				require.Equal(t, "compute: overcommit set-node: not_found: node ghost has no compute record (add it with a compute resource first)",
					opFail(t, env, 3, "overcommit", "set-node", "ghost", "--cpu", "2000"))
			})
			require.NotContains(t, env.Dump(t), "/nodes/ghost")
		})
	})
}

func TestOvercommitCommandID(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		first := env.OpOK(t, bin, nil, "overcommit", "set-node", "n1", "--cpu", "4000", "--command-id", "c1")
		require.JSONEq(t, `{"node_id": "n1", "cpu": {"ratio": 4000, "source": "NODE"}, "memory": {"ratio": 1000, "source": "DEFAULT"}, "version": 1}`, string(first))
		require.Contains(t, env.Dump(t), "/commands/c1")
		env.OpOK(t, bin, nil, "overcommit", "set-node", "n1", "--cpu", "2000") // someone else changes the node since

		t.Run("a replay with the same arguments answers the first answer and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				again := env.Op(t, bin, "overcommit", "set-node", "--command-id", "c1", "--cpu", "4000", "n1")
				require.Equal(t, 0, again.Code, again.Stderr)
				require.JSONEq(t, string(first), again.Stdout)
				require.Contains(t, again.Stderr, bin+": overcommit set-node: replay of command c1: the answer given at ")
			})
			require.Equal(t, effective{2000, "NODE"}, getNode(t, env, "n1").CPU, "the replay did not apply the ratio again")
		})
		t.Run("the same id with other arguments is already_exists and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				line := opFail(t, env, 6, "overcommit", "set-node", "n1", "--cpu", "5000", "--command-id", "c1")
				require.Equal(t, `compute: overcommit set-node: already_exists: command id c1 was used for "overcommit set-node n1 --cpu=4000"`, line)
				require.Contains(t, opFail(t, env, 6, "overcommit", "set-defaults", "--cpu", "4000", "--memory", "1000", "--command-id", "c1"), "already_exists: command id c1 was used for")
			})
		})
		t.Run("set-defaults replays the same way", func(t *testing.T) {
			d1 := env.OpOK(t, bin, nil, "overcommit", "set-defaults", "--cpu", "4000", "--memory", "1000", "--command-id", "d1")
			require.JSONEq(t, `{"cpu": 4000, "memory": 1000, "version": 1}`, string(d1))
			unchanged(t, env, func() {
				again := env.Op(t, bin, "overcommit", "set-defaults", "--memory", "1000", "--command-id", "d1", "--cpu", "4000")
				require.Equal(t, 0, again.Code, again.Stderr)
				require.JSONEq(t, string(d1), again.Stdout)
				require.Contains(t, again.Stderr, "replay of command d1")
			})
			var d defaults
			env.OpOK(t, bin, &d, "overcommit", "get-defaults")
			require.Equal(t, int64(1), d.Version, "the replay did not advance the version")
		})
	})
}

func TestOvercommitIfVersion(t *testing.T) {
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", 16, "64G")
		env.OpOK(t, bin, nil, "overcommit", "set-defaults", "--cpu", "2000", "--memory", "1000")
		env.OpOK(t, bin, nil, "overcommit", "set-node", "n1", "--cpu", "3000")
		t.Run("a stale version is aborted and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				require.Equal(t, "compute: overcommit set-node: aborted: node n1 compute record is at version 1, not 0",
					opFail(t, env, 5, "overcommit", "set-node", "n1", "--cpu", "4000", "--if-version", "0"))
				require.Equal(t, "compute: overcommit set-defaults: aborted: overcommit defaults is at version 1, not 7",
					opFail(t, env, 5, "overcommit", "set-defaults", "--if-version", "7", "--cpu", "4000", "--memory", "1000"))
				require.Contains(t, opFail(t, env, 5, "overcommit", "set-node", "--if-version", "2", "n1", "--command-id", "v1"), "aborted")
			})
		})
		t.Run("a negative version is invalid_argument and writes nothing", func(t *testing.T) {
			unchanged(t, env, func() {
				require.Equal(t, "compute: overcommit set-node: invalid_argument: --if-version -1: a record's version is 0 or more",
					opFail(t, env, 2, "overcommit", "set-node", "n1", "--cpu", "4000", "--if-version", "-1"))
			})
		})
		t.Run("the current version passes", func(t *testing.T) {
			var n nodeRatios
			env.OpOK(t, bin, &n, "overcommit", "set-node", "n1", "--cpu", "4000", "--if-version", "1")
			require.Equal(t, nodeRatios{NodeID: "n1", CPU: effective{4000, "NODE"}, Memory: effective{1000, "DEFAULT"}, Version: 2}, n)
			var d defaults
			env.OpOK(t, bin, &d, "overcommit", "set-defaults", "--cpu", "4000", "--memory", "1000", "--if-version", "1")
			require.Equal(t, defaults{CPU: 4000, Memory: 1000, Version: 2}, d)
		})
	})
}

func TestOvercommitNeverCreatesAStore(t *testing.T) {
	env := testenv.NewEmbedded(t)
	for _, args := range [][]string{
		{"overcommit", "get-defaults"},
		{"overcommit", "set-defaults", "--cpu", "4000", "--memory", "1000"},
		{"overcommit", "get-node", "n1"},
		{"overcommit", "set-node", "n1", "--cpu", "4000"},
	} {
		t.Run(strings.Join(args, " ")+" fails naming the missing state file", func(t *testing.T) {
			line := opFail(t, env, 4, args...)
			require.Contains(t, line, "compute: "+args[0]+" "+args[1]+": failed_precondition: embedded store "+env.DB)
			require.Contains(t, line, "state file does not exist")
			_, err := os.Stat(env.DB)
			require.True(t, os.IsNotExist(err), "no store was created")
		})
	}
}

package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/tests/testenv"
)

// usedNode is standardNode holding 10 GiB on /data0.
func usedNode(t *testing.T, env *testenv.Env, node string) {
	t.Helper()
	addNode(t, env, node, standardNode)
	env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": node, "resource_request": obj{"volumes": []string{"/data0:10G"}}, "delta": true, "incr": true}, nil)
}

func release(t *testing.T, env *testenv.Env, node string) {
	t.Helper()
	env.Call(t, "storage", "set-node-resource-usage", obj{"nodename": node, "resource_request": obj{"volumes": []string{"/data0:10G"}}, "delta": true, "incr": false}, nil)
}

func TestOperatorOutputFormats(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		usedNode(t, env, "n1")
		t.Run("an empty list says so in a table", func(t *testing.T) {
			res := env.Op(t, "storage", "nodes", "list", "--status", "RETIRED", "-o", "table")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Equal(t, "No RETIRED nodes.\n", res.Stdout)
		})
		t.Run("a table shows sizes in binary units, usage in percent, and no JSON", func(t *testing.T) {
			res := env.Op(t, "storage", "nodes", "get", "n1", "-o", "table")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Empty(t, res.Stderr)
			require.NotContains(t, res.Stdout, "{")
			require.Regexp(t, `(?m)^storage +volume /data0 +10 GiB +1 TiB +<1%$`, res.Stdout)
			require.Regexp(t, `(?m)^storage +disk /dev/vda read bps +0 B/s +1 GiB/s +0%$`, res.Stdout)
			require.Regexp(t, `(?m)^SESSION +never$`, res.Stdout)
			require.Regexp(t, `(?m)^CREATED +\d+s ago$`, res.Stdout, "times are relative")
		})
		t.Run("a list has one header per column and shows the session's age", func(t *testing.T) {
			heartbeat(t, env, "n1", procRoot(t, "boot-1", 4<<20))
			res := env.Op(t, "storage", "nodes", "list", "-o", "table")
			require.Equal(t, 0, res.Code, res.Stderr)
			lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
			require.Len(t, lines, 2)
			require.Equal(t, []string{"NODE", "STATUS", "REASONS", "SESSION", "USAGE", "INCARNATION", "VERSION"}, strings.Fields(lines[0]))
			require.Regexp(t, `^n1 +READY(,Unschedulable)? +\S.* +live, seen \d+s ago +storage <1% +1 +\d+$`, lines[1])
		})
		t.Run("yaml is the JSON answer as YAML", func(t *testing.T) {
			res := env.Op(t, "storage", "nodes", "get", "n1", "-o", "yaml")
			require.Equal(t, 0, res.Code, res.Stderr)
			var fromYAML, fromJSON map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(res.Stdout), &fromYAML))
			require.NoError(t, json.Unmarshal(env.OpOK(t, "storage", nil, "nodes", "get", "n1"), &fromJSON))
			require.Equal(t, fromJSON["node_id"], fromYAML["node_id"])
			require.Equal(t, fromJSON["status"], fromYAML["status"])
			require.True(t, strings.HasPrefix(res.Stdout, "node_id: n1\n"), "keys in the JSON's order: %s", res.Stdout)
		})
		t.Run("json to a pipe is one line", func(t *testing.T) {
			res := env.Op(t, "storage", "nodes", "get", "n1")
			require.Equal(t, 1, strings.Count(res.Stdout, "\n"))
		})
	})
}

func TestVersion(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	for _, bin := range []string{"storage", "compute"} {
		for _, flag := range []string{"--version", "-v"} {
			res := env.Op(t, bin, flag)
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Regexp(t, `^`+bin+` \S+ .*go1\.\d+`, res.Stdout)
			require.Empty(t, res.Stderr)
		}
	}
}

func TestHeartbeatFlags(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		proc := procRoot(t, "boot-1", 4<<20)
		cases := []struct {
			name string
			args []string
			want string
		}{
			{"a ttl above 10 minutes", []string{"--ttl", "11m"}, "--ttl 11m0s: want more than 0 and at most 10m0s"},
			{"a ttl whose rounding to seconds would overflow", []string{"--ttl", "2562047h47m16s"}, "want more than 0 and at most 10m0s"},
			{"a zero ttl", []string{"--ttl", "0s"}, "--ttl 0s"},
			{"an interval as long as the ttl", []string{"--ttl", "10s", "--interval", "10s"}, "--interval 10s: want more than 0 and less than the session ttl 10s"},
			{"a proc root that does not exist", []string{"--proc-root", filepath.Join(t.TempDir(), "nope")}, "--proc-root"},
			{"a command id", []string{"--command-id", "h1"}, "flag provided but not defined: -command-id"},
			{"an expected version", []string{"--if-version", "1"}, "flag provided but not defined: -if-version"},
		}
		for _, c := range cases {
			t.Run(c.name+" is invalid_argument and writes nothing", func(t *testing.T) {
				args := append([]string{"nodes", "heartbeat", "n1", "--proc-root", proc}, c.args...)
				line := opFails(t, env, 2, args...)
				require.Contains(t, line, c.want)
				require.False(t, nodeGet(t, env, "n1").Session.Ever, "no session was written")
			})
		}
		t.Run("--clock-sync SYNCHRONIZED without --clock-max-error reports no error", func(t *testing.T) {
			r := nodeOp(t, env, "heartbeat", "n1", "--proc-root", proc, "--clock-sync", "SYNCHRONIZED")
			require.NotNil(t, r.Observation)
			require.Nil(t, r.Observation.Clock.MaxErrorMs, "the kernel's error belongs to the kernel's state")
			require.False(t, r.Observation.Clock.ExceedsTolerance)
		})
		t.Run("a name no plugin knows is not_found unless --register", func(t *testing.T) {
			line := opFails(t, env, 3, "nodes", "heartbeat", "ghost", "--proc-root", proc)
			require.Contains(t, line, "not_found: node ghost is not registered and no plugin has a record of it")
			r := nodeOp(t, env, "heartbeat", "ghost", "--proc-root", proc, "--register")
			require.Equal(t, "READY", r.Status)
		})
		t.Run("forget deletes a registration no plugin records, and refuses one a plugin records", func(t *testing.T) {
			r := nodeOp(t, env, "forget", "ghost")
			require.Equal(t, "ghost", r.NodeID)
			opFails(t, env, 3, "nodes", "get", "ghost")
			line := opFails(t, env, 4, "nodes", "forget", "n1")
			require.Contains(t, line, "the storage plugin still has a record of it")
		})
		t.Run("the node name defaults to the host name", func(t *testing.T) {
			host, err := os.Hostname()
			require.NoError(t, err)
			r := nodeOp(t, env, "heartbeat", "--proc-root", proc, "--register")
			require.Equal(t, host, r.NodeID)
			nodeOp(t, env, "forget", host)
		})
		t.Run("end-session makes a live node UNAVAILABLE at once", func(t *testing.T) {
			require.True(t, nodeGet(t, env, "n1").Session.Live)
			r := nodeOp(t, env, "end-session", "n1")
			require.False(t, r.Session.Live)
			require.Equal(t, "UNAVAILABLE", r.Status)
			require.Equal(t, "UNAVAILABLE", nodeGet(t, env, "n1").Status)
		})
	})
}

// agent is a background operator command whose stderr is read line by
// line.
type agent struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	mu     sync.Mutex
	lines  []string
	done   chan struct{}
}

func startAgent(t *testing.T, env *testenv.Env, args ...string) *agent {
	t.Helper()
	a := &agent{cmd: exec.Command(testenv.Bin(t, "storage"), args...), done: make(chan struct{})}
	a.cmd.Dir = env.Dir
	a.cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	a.cmd.Stdout = &a.stdout
	stderr, err := a.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, a.cmd.Start())
	go func() {
		defer close(a.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			a.mu.Lock()
			a.lines = append(a.lines, sc.Text())
			a.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = a.cmd.Process.Kill()
		_ = a.cmd.Wait()
	})
	return a
}

// waitLine waits for a stderr line containing s.
func (a *agent) waitLine(t *testing.T, s string) {
	t.Helper()
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, l := range a.lines {
			if strings.Contains(l, s) {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "no line %q on stderr", s)
}

// wait waits for the command to exit and returns its status.
func (a *agent) wait(t *testing.T) int {
	t.Helper()
	<-a.done
	err := a.cmd.Wait()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

func (a *agent) stderr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.lines, "\n")
}

func TestHeartbeatAgent(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		addNode(t, env, "n1", standardNode)
		proc := procRoot(t, "boot-1", 4<<20)
		a := startAgent(t, env, "nodes", "heartbeat", "n1", "--interval", "300ms", "--ttl", "3s", "--proc-root", proc, "--clock-sync", "SYNCHRONIZED")
		a.waitLine(t, "nodes heartbeat n1: READY, heartbeat every 300ms")
		first := nodeGet(t, env, "n1")
		require.True(t, first.Session.Live)
		require.Eventually(t, func() bool {
			return nodeGet(t, env, "n1").Observation.Version > first.Observation.Version
		}, 10*time.Second, 100*time.Millisecond, "the agent keeps heartbeating")

		// SIGTERM (systemd's stop) on etcd, SIGINT (a person's ^C) on the
		// embedded store: both end the session.
		sig := syscall.SIGTERM
		if env.Etcd == nil {
			sig = syscall.SIGINT
		}
		require.NoError(t, a.cmd.Process.Signal(sig))
		require.Equal(t, 0, a.wait(t), a.stderr())
		require.Contains(t, a.stderr(), "stopped, ending the session")
		var last registration
		require.NoError(t, json.Unmarshal(a.stdout.Bytes(), &last), a.stdout.String())
		require.False(t, last.Session.Live)
		require.Equal(t, "UNAVAILABLE", last.Status, "the session ended with the agent, not when its lease lapses")
		require.Equal(t, "UNAVAILABLE", nodeGet(t, env, "n1").Status)
	})
	t.Run("an agent of a retired node stops with the refusal", func(t *testing.T) {
		env := testenv.NewEmbedded(t)
		addNode(t, env, "n1", standardNode)
		nodeOp(t, env, "drain", "n1")
		nodeOp(t, env, "retire", "n1")
		res := env.Op(t, "storage", "nodes", "heartbeat", "n1", "--interval", "100ms", "--proc-root", t.TempDir())
		require.Equal(t, 4, res.Code)
		require.Contains(t, res.Stderr, "failed_precondition: node n1 is RETIRED")
	})
}

func TestDrainWait(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		usedNode(t, env, "n1")
		a := startAgent(t, env, "nodes", "drain", "n1", "--wait", "--timeout", "1m")
		a.waitLine(t, "nodes drain n1: DRAINING, usage left: storage: storage 10 GiB, volume /data0 10 GiB")
		require.Equal(t, "DRAINING", nodeGet(t, env, "n1").Status)
		release(t, env, "n1")
		require.Equal(t, 0, a.wait(t), a.stderr())
		var r registration
		require.NoError(t, json.Unmarshal(a.stdout.Bytes(), &r), a.stdout.String())
		require.Equal(t, "DRAINED", r.Status)
		require.Contains(t, a.stderr(), "nodes drain n1: DRAINED")

		t.Run("a wait that times out is deadline_exceeded and leaves the drain", func(t *testing.T) {
			usedNode(t, env, "n2")
			res := env.Op(t, "storage", "nodes", "drain", "n2", "--wait", "--timeout", "1s")
			require.Equal(t, 12, res.Code, res.Stderr)
			require.Empty(t, res.Stdout)
			require.Contains(t, res.Stderr, "storage: nodes drain n2: DRAINING, usage left: storage: storage 10 GiB, volume /data0 10 GiB\n")
			require.Contains(t, res.Stderr, "storage: nodes drain: deadline_exceeded: node n2 still holds usage after 1s (usage left: storage: storage 10 GiB, volume /data0 10 GiB); the drain is written and stays\n")
			require.Equal(t, "DRAINING", nodeGet(t, env, "n2").Status)
		})
		t.Run("an isolated node that holds nothing is drained, though its status is UNAVAILABLE", func(t *testing.T) {
			addNode(t, env, "n3", standardNode)
			nodeOp(t, env, "isolate", "n3")
			res := env.Op(t, "storage", "nodes", "drain", "n3", "--wait", "--timeout", "5s")
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Equal(t, "storage: nodes drain n3: drained, no usage left (status UNAVAILABLE)\n", res.Stderr)
			var r registration
			require.NoError(t, json.Unmarshal([]byte(res.Stdout), &r), res.Stdout)
			require.True(t, r.Drain)
			require.Equal(t, "UNAVAILABLE", r.Status)
		})
		t.Run("a dead host's node is drained once isolation releases its usage", func(t *testing.T) {
			usedNode(t, env, "n4")
			a := startAgent(t, env, "nodes", "drain", "n4", "--wait", "--timeout", "1m")
			a.waitLine(t, "nodes drain n4: DRAINING, usage left: storage: storage 10 GiB, volume /data0 10 GiB")
			nodeOp(t, env, "isolate", "n4")
			require.Equal(t, 0, a.wait(t), a.stderr())
			require.Contains(t, a.stderr(), "nodes drain n4: drained, no usage left (status UNAVAILABLE)")
		})
		t.Run("a drain cancelled while it waits fails the wait, saying the drain was written", func(t *testing.T) {
			usedNode(t, env, "n5")
			a := startAgent(t, env, "nodes", "drain", "n5", "--wait", "--timeout", "1m")
			a.waitLine(t, "nodes drain n5: DRAINING, usage left:")
			nodeOp(t, env, "cancel-drain", "n5")
			require.Equal(t, 4, a.wait(t), a.stderr())
			require.Contains(t, a.stderr(), "storage: nodes drain: failed_precondition: node n5: the drain was written, then cancelled while --wait waited (the node is READY)")
		})
		t.Run("a replayed drain waits on the usage held now, not on the kept answer", func(t *testing.T) {
			usedNode(t, env, "n6")
			for range 2 {
				res := env.Op(t, "storage", "nodes", "drain", "n6", "--command-id", "d6", "--wait", "--timeout", "1s")
				require.Equal(t, 12, res.Code, res.Stderr)
				require.Contains(t, res.Stderr, "node n6 still holds usage after 1s")
			}
		})
		t.Run("--timeout without --wait is invalid_argument", func(t *testing.T) {
			opFails(t, env, 2, "nodes", "drain", "n2", "--timeout", "1s")
		})
	})
}

func TestDryRuns(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		usedNode(t, env, "n1")
		t.Run("isolate --dry-run answers what would be released and writes nothing", func(t *testing.T) {
			before := env.Dump(t)
			var out struct {
				Node      registration `json:"node"`
				Volumes   int64        `json:"released_volumes"`
				Storage   int64        `json:"released_storage_bytes"`
				CPUMillis int64        `json:"released_cpu_millis"`
			}
			env.OpOK(t, "storage", &out, "nodes", "isolate", "n1", "--dry-run")
			require.True(t, out.Node.Isolated)
			require.Equal(t, int64(1), out.Volumes)
			require.Equal(t, int64(10<<30), out.Storage)
			require.Equal(t, before, env.Dump(t), "nothing written")
			require.False(t, nodeGet(t, env, "n1").Isolated)
		})
		t.Run("retire --dry-run answers the refusal, and writes nothing either way", func(t *testing.T) {
			line := opFails(t, env, 4, "nodes", "retire", "n1", "--dry-run")
			require.Contains(t, line, "node n1 is READY: only a drained node with no usage, or an isolated one, can be retired")
			nodeOp(t, env, "drain", "n1")
			release(t, env, "n1")
			before := env.Dump(t)
			r := nodeOp(t, env, "retire", "n1", "--dry-run")
			require.Equal(t, "RETIRED", r.Status)
			require.Equal(t, before, env.Dump(t))
			require.Equal(t, "DRAINED", nodeGet(t, env, "n1").Status)
		})
		t.Run("--dry-run with --command-id is invalid_argument", func(t *testing.T) {
			opFails(t, env, 2, "nodes", "retire", "n1", "--dry-run", "--command-id", "r1")
		})
	})
}

func TestOperatorActionsAreLogged(t *testing.T) {
	t.Parallel()
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		usedNode(t, env, "n1")
		logFile := filepath.Join(t.TempDir(), "plugin.log")
		for _, name := range []string{"storage.yaml", "compute.yaml"} {
			require.NoError(t, os.WriteFile(filepath.Join(env.Dir, name), []byte(env.ConfigYAML()+"log:\n  file: "+logFile+"\n"), 0o644))
		}
		env.OpOK(t, "storage", nil, "nodes", "drain", "n1", "--command-id", "c1")
		opFails(t, env, 4, "nodes", "retire", "n1")
		env.OpOK(t, "compute", nil, "overcommit", "set-defaults", "--cpu", "2000", "--memory", "1000")
		env.OpOK(t, "storage", nil, "nodes", "get", "n1")
		env.Fail(t, "storage", "calculate-deploy", obj{"nodename": "n1", "deploy_count": 1, "workload_resource_request": obj{"volumes": []string{"AUTO:/d:rw:1G"}}})

		data, err := os.ReadFile(logFile)
		require.NoError(t, err)
		var entries []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			entries = append(entries, m)
		}
		host, _ := os.Hostname()
		find := func(msg, command string) map[string]any {
			for _, e := range entries {
				if e["msg"] == msg && (command == "" || e["command"] == command) {
					return e
				}
			}
			require.Failf(t, "no log entry", "%s %s in %s", msg, command, data)
			return nil
		}
		drain := find("operator action", "nodes drain")
		require.Equal(t, "INFO", drain["level"])
		require.Equal(t, "c1", drain["command_id"])
		require.Equal(t, float64(os.Getuid()), drain["uid"])
		require.Equal(t, host, drain["host"])
		require.Equal(t, []any{"n1"}, drain["args"])
		retire := find("operator action refused", "nodes retire")
		require.Equal(t, "WARN", retire["level"])
		require.Equal(t, "failed_precondition", retire["class"])
		setDefaults := find("operator action", "overcommit set-defaults")
		require.Equal(t, "INFO", setDefaults["level"])
		require.Equal(t, "overcommit set-defaults --cpu=2000 --memory=1000", setDefaults["call"], "the record says what the ratios were set to")
		require.Equal(t, "nodes drain n1", drain["call"])
		require.Equal(t, "WARN", find("verb refused", "")["level"])
		for _, e := range entries {
			if e["command"] == "nodes get" {
				require.NotContains(t, e["msg"], "operator action", "reads are not actions")
			}
		}
	})
}

func TestHelpShowsRealDefaults(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	res := env.Op(t, "storage", "nodes", "heartbeat", "--help")
	require.Equal(t, 0, res.Code, res.Stderr)
	require.Regexp(t, `--ttl value +.*\(default: nodes\.session_ttl, 30s unless configured\)`, res.Stdout)
	require.NotContains(t, res.Stdout, "--command-id")
	require.NotContains(t, res.Stdout, "--if-version")
	res = env.Op(t, "storage", "nodes", "drain", "--help")
	require.Equal(t, 0, res.Code, res.Stderr)
	require.Regexp(t, `--if-version value +refuse \(aborted\) unless the record is at this version \(default: none, unguarded\)\n`, res.Stdout)
	require.Regexp(t, `--timeout value +.*\(default: 10m0s\)`, res.Stdout)
	res = env.Op(t, "compute", "overcommit", "set-node", "--help")
	require.Regexp(t, `--cpu value +.*\(default: none\)`, res.Stdout)
}

// TestAnOperatorAnswerThatCannotBePrintedSaysWhetherTheCommandWrote: with
// stdout on a full disk, a command that wrote exits 13 (outcome unknown,
// "the call was applied") and its write is there; a read, a dry run and a
// replay exit 7; each names the command.
func TestAnOperatorAnswerThatCannotBePrintedSaysWhetherTheCommandWrote(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	addNode(t, env, "n1", standardNode)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	require.NoError(t, err)
	defer full.Close()
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"nodes", "drain", "n1", "--command-id", "c1"}, 13, "storage: nodes drain: unavailable: outcome unknown: the call was applied, but its answer could not be printed: write /dev/stdout: no space left on device\n"},
		{[]string{"nodes", "get", "n1"}, 7, "storage: nodes get: unavailable: its answer could not be printed: write /dev/stdout: no space left on device\n"},
		{[]string{"nodes", "isolate", "n1", "--dry-run", "-o", "table"}, 7, "storage: nodes isolate: unavailable: its answer could not be printed: write /dev/stdout: no space left on device\n"},
		{[]string{"nodes", "drain", "n1", "--command-id", "c1"}, 7, "storage: nodes drain: unavailable: its answer could not be printed"}, // a replay writes nothing
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cmd := exec.Command(testenv.Bin(t, "storage"), c.args...)
			cmd.Dir = env.Dir
			cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH="+filepath.Join(env.Dir, "storage.yaml"), "ERU_RESOURCE_NO_FORWARD=1")
			var errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = full, &errb
			err := cmd.Run()
			exit, ok := err.(*exec.ExitError)
			require.True(t, ok, "%v", err)
			require.Equal(t, c.code, exit.ExitCode(), errb.String())
			require.Contains(t, errb.String(), c.says)
		})
	}
	require.True(t, nodeGet(t, env, "n1").Drain, "the drain was written")
}

package reliability_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// faultCalls are every call of both binaries a fault test runs: each plugin
// verb (store says whether it needs the store) and each operator command.
type faultCall struct {
	call
	name    string // the subtest's subject
	command string // the operator command's name; empty for a plugin verb
	store   bool
}

func faultCalls(t testing.TB) []faultCall {
	t.Helper()
	var out []faultCall
	for _, bin := range bins {
		for _, c := range verbCases(bin) {
			out = append(out, faultCall{call: verbCall(t, bin, c.verb, c.req), name: bin + " " + c.verb, store: c.store})
		}
	}
	for _, c := range operatorCommands {
		out = append(out, faultCall{call: call{bin: c.bin, args: c.args}, name: c.bin + " " + strings.Join(c.args, " "), command: c.name, store: true})
	}
	return out
}

// requireUnavailable checks one call against an etcd that does not serve:
// a plugin verb exits 128, an operator command 7 (unavailable), each with one
// line naming the endpoint, within the time bounds. A call that needs no
// store answers as usual.
func requireUnavailable(t *testing.T, c faultCall, res testenv.Result, endpoint string, least, most time.Duration) {
	t.Helper()
	if !c.store {
		answered(t, res, c.name)
		return
	}
	var line string
	if c.command == "" {
		line = refusedVerb(t, res, c.bin, c.args[0])
	} else {
		line = refusedCommand(t, res, c.bin, c.command, 7)
	}
	require.Contains(t, line, "unavailable: etcd "+endpoint+": ", "the line names the class and the endpoint")
	require.GreaterOrEqual(t, res.Took, least, "gave up before the dial timeout: %s", line)
	require.Less(t, res.Took, most, "took too long: %s", line)
}

// timeoutConfigs are the dial timeouts the dead etcd tests run with and the
// wall time each allows a failing process. A process that honours a dial
// timeout of 300ms ends before the default's 2s could have: its bound is
// below 2s, with the rest left for starting processes on a loaded machine
// (a bound of 1s above the timeout was missed at a load of 12).
var timeoutConfigs = []struct {
	name        string
	etcdKeys    obj
	least, most time.Duration
}{
	{"with the default dial timeout", nil, 0, 3500 * time.Millisecond},
	{"with etcd.dial_timeout 300ms", obj{"dial_timeout": "300ms"}, 300 * time.Millisecond, 1900 * time.Millisecond},
}

// TestDeadEtcdFailsFastAndWritesNothing: core bounds every plugin call, so a
// plugin whose etcd is down must fail well inside that bound, say so in one
// line naming the endpoint, and leave the store as it was. Verbs that need
// no store keep answering.
func TestDeadEtcdFailsFastAndWritesNothing(t *testing.T) {
	skipUnderShort(t)
	nobody := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))

	clientPort, peerPort := freePort(t), freePort(t)
	dir := t.TempDir()
	stopped, stop := startEtcd(t, dir, fixedPorts(clientPort, peerPort))
	prefix := newPrefix()
	live := etcdEnv(t, stopped, prefix, etcdConfig(stopped.Endpoint, prefix, nil))
	for _, bin := range bins {
		seed(t, live, bin)
	}
	before := live.Dump(t)
	require.NotEmpty(t, before)
	stop()

	targets := []struct{ name, endpoint string }{
		{"an endpoint nobody listens on", nobody},
		{"an etcd that was started and then stopped", stopped.Endpoint},
	}
	for _, target := range targets {
		for _, tc := range timeoutConfigs {
			t.Run(target.name+" "+tc.name, func(t *testing.T) {
				env := etcdEnv(t, nil, prefix, etcdConfig(target.endpoint, prefix, tc.etcdKeys))
				calls := faultCalls(t)
				plain := make([]call, len(calls))
				for i, c := range calls {
					plain[i] = c.call
				}
				results := runAll(t, env, plain)
				for i, c := range calls {
					subject := c.name + " fails in time with one line naming the endpoint"
					if !c.store {
						subject = c.name + " needs no store and answers"
					}
					t.Run(subject, func(t *testing.T) {
						requireUnavailable(t, c, results[i], target.endpoint, tc.least, tc.most)
					})
				}
			})
		}
	}

	t.Run("the stopped etcd, started again, holds exactly what it held", func(t *testing.T) {
		restarted, _ := startEtcd(t, dir, fixedPorts(clientPort, peerPort))
		require.Equal(t, stopped.Endpoint, restarted.Endpoint)
		require.Equal(t, before, dumpEtcd(t, restarted.Client(t), prefix))
	})
}

package reliability_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestSlowEtcdFailsWithinTheCallTimeoutAndWritesNothing puts a proxy that
// holds every byte stream back by 5s between the plugins and a real etcd:
// each call that needs the store gives up within etcd.call_timeout (1s),
// in one line naming the endpoint, and once the late bytes have all reached
// etcd and the delay is gone, the store is exactly as it was.
func TestSlowEtcdFailsWithinTheCallTimeoutAndWritesNothing(t *testing.T) {
	skipUnderShort(t)
	const delay = 5 * time.Second
	modes := []struct {
		name string
		mode stall
	}{
		{"an etcd whose every byte arrives 5s late", stallEverything},
		{"a connected etcd whose requests arrive 5s late", stallRequests},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			direct := testenv.NewEtcd(t)
			for _, bin := range bins {
				seed(t, direct, bin)
			}
			before := direct.Dump(t)

			proxy := newSlowProxy(t, direct.Etcd.Endpoint, m.mode, delay)
			slow := etcdEnv(t, nil, direct.Prefix, etcdConfig(proxy.Endpoint(), direct.Prefix, obj{"call_timeout": "1s"}))
			var calls []faultCall
			for _, c := range faultCalls(t) {
				if c.store {
					calls = append(calls, c)
				}
			}
			plain := make([]call, len(calls))
			for i, c := range calls {
				plain[i] = c.call
			}
			results := runAll(t, slow, plain)
			for i, c := range calls {
				t.Run(c.name+" gives up within the call timeout with one line naming the endpoint", func(t *testing.T) {
					requireUnavailable(t, c, results[i], proxy.Endpoint(), time.Second, 2*time.Second)
				})
			}
			require.GreaterOrEqual(t, proxy.seen.Load(), int64(len(calls)), "every call went through the proxy")

			t.Run("once every late byte has reached etcd, nothing was written", func(t *testing.T) {
				proxy.WaitIdle(t, 4*delay)
				require.Equal(t, before, direct.Dump(t))
			})
			t.Run("without the delay the same config works and reads the unchanged records", func(t *testing.T) {
				proxy.SetDelay(0)
				for _, bin := range bins {
					want := direct.Call(t, bin, "get-node-resource-info", obj{"nodename": seeded}, nil)
					got := slow.Call(t, bin, "get-node-resource-info", obj{"nodename": seeded}, nil)
					require.JSONEq(t, string(want), string(got))
				}
				require.Equal(t, before, direct.Dump(t))
			})
		})
	}
}

// TestAWriteReportedFailedDoesNotLandLater: the proxy lets each verb's read
// through at once and holds the write that follows it back by 5s. The verb
// gives up within the call timeout and exits 128, so core takes the change
// as not made (and rolls back or retries on that belief); the write must
// then not land when its bytes reach etcd after all.
func TestAWriteReportedFailedDoesNotLandLater(t *testing.T) {
	skipUnderShort(t)
	const delay = 5 * time.Second
	writes := []struct {
		bin, verb string
		req       obj
	}{
		{"storage", "add-node", obj{"nodename": "n2", "resource": seedResource["storage"]}},
		{"storage", "remove-node", obj{"nodename": seeded}},
		{"storage", "set-node-resource-capacity", obj{"nodename": seeded, "resource_request": obj{"storage": "3T"}}},
		{"storage", "set-node-resource-usage", obj{"nodename": seeded, "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true}},
		{"compute", "set-node-resource-usage", obj{"nodename": seeded, "resource_request": obj{"cpu": 1}, "delta": true, "incr": true}},
		{"compute", "set-node-resource-info", obj{"nodename": seeded, "capacity": obj{"cpu_millis": 8000, "memory_bytes": 8 << 30}, "usage": obj{"cpu_millis": 0, "memory_bytes": 0}}},
	}
	shared := testenv.SharedEtcd(t)
	proxy := newSlowProxy(t, shared.Endpoint, stallWrites, delay)
	type target struct {
		direct, slow *testenv.Env
		before       map[string]string
	}
	targets := make([]target, len(writes))
	calls := make([]call, len(writes))
	for i, w := range writes {
		direct := testenv.NewEtcd(t)
		seed(t, direct, w.bin)
		targets[i] = target{direct, etcdEnv(t, nil, direct.Prefix, etcdConfig(proxy.Endpoint(), direct.Prefix, obj{"call_timeout": "1s"})), direct.Dump(t)}
		calls[i] = verbCall(t, w.bin, w.verb, w.req)
	}
	results := make([]testenv.Result, len(writes))
	for i := range writes {
		results[i] = runAll(t, targets[i].slow, calls[i:i+1])[0]
	}
	proxy.WaitIdle(t, 4*delay)
	require.Equal(t, int64(len(writes)), proxy.held.Load(), "each verb sent its write, and the proxy held it back")
	for i, w := range writes {
		t.Run(w.bin+" "+w.verb+" fails within the call timeout and its late write does not land", func(t *testing.T) {
			line := refusedVerb(t, results[i], w.bin, w.verb)
			require.Contains(t, line, "etcd "+proxy.Endpoint()+": ")
			require.Less(t, results[i].Took, 2*time.Second)
			require.Equal(t, targets[i].before, targets[i].direct.Dump(t), "the verb reported failure but its write landed")
		})
	}
}

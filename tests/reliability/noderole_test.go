package reliability_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/eru-extend/resources/tests/testenv"
)

// nodeRole is the etcd role a node's heartbeat agent needs, exactly as the
// README documents it: read its own plugin records and the overcommit
// defaults, read and write its own registration and session, and write the
// throwaway guard keys every write binds to its deadline.
type nodeRange struct {
	key, end string // end "" is the key alone
	perm     clientv3.PermissionType
}

func nodeRole(prefix, node string) []nodeRange {
	read, rw := clientv3.PermissionType(clientv3.PermRead), clientv3.PermissionType(clientv3.PermReadWrite)
	return []nodeRange{
		{prefix + "/resource/storage/" + node, "", read},
		{prefix + "/resource/compute/" + node, "", read},
		{prefix + "/overcommit/defaults", "", read},
		{prefix + "/nodes/" + node, "", rw},
		{prefix + "/sessions/" + node, "", rw},
		{prefix + "/guards/", clientv3.GetPrefixRangeEnd(prefix + "/guards/"), rw},
	}
}

// TestANodeHeartbeatsWithARoleLimitedToItsOwnKeys: an etcd with
// authentication on, a user for node n1 holding only the documented role.
// Its heartbeat, its agent's end of session and its own record's reads
// work; another node's heartbeat, a write of its plugin record and an
// operator action on another node are refused and write nothing.
func TestANodeHeartbeatsWithARoleLimitedToItsOwnKeys(t *testing.T) {
	skipUnderShort(t)
	const (
		rootPassword = "root-Secret-8Hq2"
		eruPassword  = "eru-Secret-Jd41"
		nodePassword = "node-Secret-Xw93"
	)
	server, _ := startEtcd(t, t.TempDir(), nil)
	prefix := newPrefix()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	setup := server.Client(t)
	steps := []func() error{
		func() error { _, err := setup.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := setup.RoleAdd(ctx, "root"); return err },
		func() error { _, err := setup.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := setup.UserAdd(ctx, "eru", eruPassword); return err },
		func() error { _, err := setup.RoleAdd(ctx, "eru"); return err },
		func() error {
			_, err := setup.RoleGrantPermission(ctx, "eru", prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := setup.UserGrantRole(ctx, "eru", "eru"); return err },
		func() error { _, err := setup.UserAdd(ctx, "node-n1", nodePassword); return err },
		func() error { _, err := setup.RoleAdd(ctx, "eru-node-n1"); return err },
	}
	for _, r := range nodeRole(prefix, "n1") {
		steps = append(steps, func() error {
			_, err := setup.RoleGrantPermission(ctx, "eru-node-n1", r.key, r.end, r.perm)
			return err
		})
	}
	steps = append(steps,
		func() error { _, err := setup.UserGrantRole(ctx, "node-n1", "eru-node-n1"); return err },
		func() error { _, err := setup.AuthEnable(ctx); return err },
	)
	for _, step := range steps {
		require.NoError(t, step())
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Endpoint}, Username: "root", Password: rootPassword, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })

	as := func(user, password string) *testenv.Env {
		// Every process signs in, and etcd checks its password with
		// bcrypt: on a loaded machine that alone can take a second, so
		// the calls get more than the default budget (this test is about
		// permissions, not time).
		cfg := etcdConfig(server.Endpoint, prefix, obj{"auth": obj{"username": user, "password": password}, "call_timeout": "10s"})
		return etcdEnv(t, nil, prefix, cfg)
	}
	core, node := as("eru", eruPassword), as("node-n1", nodePassword)
	for _, n := range []string{"n1", "n2"} {
		core.Call(t, "storage", "add-node", obj{"nodename": n, "resource": seedResource["storage"]}, nil)
		core.Call(t, "compute", "add-node", obj{"nodename": n, "resource": seedResource["compute"]}, nil)
	}
	proc := t.TempDir()

	t.Run("the node's heartbeat works with exactly the role", func(t *testing.T) {
		for _, bin := range bins {
			var v struct {
				Status  string `json:"status"`
				Session struct {
					Live bool `json:"live"`
				} `json:"session"`
			}
			node.OpOK(t, bin, &v, "nodes", "heartbeat", "n1", "--proc-root", proc, "--clock-sync", "SYNCHRONIZED")
			require.True(t, v.Session.Live)
			require.Equal(t, "READY", v.Status)
		}
	})
	t.Run("the node ends its own session", func(t *testing.T) {
		var v struct {
			Status string `json:"status"`
		}
		node.OpOK(t, "storage", &v, "nodes", "end-session", "n1")
		require.Equal(t, "UNAVAILABLE", v.Status)
	})
	t.Run("the node reads its own registration", func(t *testing.T) {
		raw := node.OpOK(t, "storage", nil, "nodes", "get", "n1")
		require.True(t, json.Valid(raw))
	})
	before := dumpEtcd(t, root, prefix)
	refusals := []struct {
		name string
		bin  string
		args []string
		verb obj
	}{
		{name: "another node's heartbeat", bin: "storage", args: []string{"nodes", "heartbeat", "n2", "--proc-root", proc, "--clock-sync", "SYNCHRONIZED"}},
		{name: "an operator action on another node", bin: "storage", args: []string{"nodes", "drain", "n2"}},
		{name: "the overcommit defaults", bin: "compute", args: []string{"overcommit", "set-defaults", "--cpu", "2000", "--memory", "1000"}},
		{name: "a write of its own plugin record", bin: "storage", args: []string{"set-node-resource-usage"},
			verb: obj{"nodename": "n1", "resource_request": obj{"volumes": []string{"/data0:1G"}}, "delta": true, "incr": true}},
	}
	for _, c := range refusals {
		t.Run(c.name+" is refused as permission denied and writes nothing", func(t *testing.T) {
			var stdin []byte
			if c.verb != nil {
				stdin = mustJSON(t, c.verb)
			}
			res := node.Exec(t, c.bin, stdin, c.args...)
			require.NotEqual(t, 0, res.Code, res.Stdout)
			require.Empty(t, res.Stdout)
			require.Contains(t, res.Stderr, "permission denied")
			require.Equal(t, before, dumpEtcd(t, root, prefix))
		})
	}
}

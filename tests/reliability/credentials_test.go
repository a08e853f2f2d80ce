package reliability_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAUserNameWithoutAPasswordSaysThePasswordIsMissing: etcd's client
// signs in only with both a user name and a password, so a config with
// only etcd.auth.username used to reach etcd with no credentials and come
// back as "user name is empty". It is refused before any connection, in
// one line naming the file and the key that is missing: verbs exit 128, an
// operator command invalid_argument (2).
func TestAUserNameWithoutAPasswordSaysThePasswordIsMissing(t *testing.T) {
	for _, c := range []struct {
		name string
		auth obj
		want string
	}{
		{"only a user name", obj{"username": "eru"}, `etcd.auth.password: missing: etcd.auth.username "eru" is set (line 3), and etcd's client signs in only with both`},
		{"only a password", obj{"password": "eru-Secret-Q1"}, "etcd.auth.username: missing: etcd.auth.password is set"},
	} {
		t.Run(c.name+" is refused naming the missing key", func(t *testing.T) {
			cfg := etcdConfig("http://127.0.0.1:1", newPrefix(), obj{"auth": c.auth})
			env := etcdEnv(t, nil, "", cfg)
			file := filepath.Join(env.Dir, "storage.yaml")
			results := runAll(t, env, []call{
				verbCall(t, "storage", "get-node-resource-info", obj{"nodename": seeded}),
				verbCall(t, "compute", "add-node", obj{"nodename": seeded, "resource": seedResource["compute"]}),
				{bin: "storage", args: []string{"nodes", "list"}},
			})
			lines := []string{
				refusedVerb(t, results[0], "storage", "get-node-resource-info"),
				refusedVerb(t, results[1], "compute", "add-node"),
				refusedCommand(t, results[2], "storage", "nodes list", 2),
			}
			for i, line := range lines {
				f := file
				if i == 1 {
					f = filepath.Join(env.Dir, "compute.yaml")
				}
				require.Contains(t, line, "invalid_argument: config "+f+": "+c.want)
				require.NotContains(t, line, "eru-Secret-Q1")
			}
		})
	}
}

package config

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// TestAProblemFoundAfterDecodingNamesTheLineOfTheKey: the checks made once
// the file is decoded — in Parse, and the etcd settings the store refuses
// when it is opened — name the line the key is written on, as the checks
// made while decoding do, merges and aliases followed to where the value
// is written.
// noEndpoint is the refusal of an etcd.machines that is written but names
// no endpoint: each host would otherwise run on a store of its own.
const noEndpoint = "etcd.machines: names no endpoint: list etcd's endpoints, or leave the key out (comment it) for the embedded store"

func TestAProblemFoundAfterDecodingNamesTheLineOfTheKey(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"a prefix without a leading slash", "log:\n  file: x.log\netcd:\n  prefix: eru\n",
			`etcd.prefix: "eru" must start with / (line 4)`},
		{"a prefix brought in by a merge", "_base: &base\n  prefix: eru\netcd:\n  <<: *base\n",
			`etcd.prefix: "eru" must start with / (line 2)`},
		{"a count out of range", "scheduler:\n  maxshare: 1\n  max_deploy_count: 0\n",
			"scheduler.max_deploy_count: 0 is not between 1 and 1000000 (line 3)"},
		{"an empty store path", "etcd: {}\nembedded:\n  path: ''\n",
			"embedded.path: empty: name the store's file, or leave the key out for eru-resources.db (line 3)"},
		{"an empty store path in a section given by an alias", "_e: &e\n  path: ''\nembedded: *e\n",
			"embedded.path: empty: name the store's file, or leave the key out for eru-resources.db (line 2)"},
		{"a user name without a password", "etcd:\n  auth:\n    username: eru\n",
			`etcd.auth.password: missing: etcd.auth.username "eru" is set (line 3), and etcd's client signs in only with both`},
		{"a password without a user name", "etcd:\n  auth:\n\n    password: x\n",
			"etcd.auth.username: missing: etcd.auth.password is set (line 4), and etcd's client signs in only with both"},
		{"machines a template left empty", "etcd:\n  prefix: /eru\n  machines:\n",
			noEndpoint + " (line 3)"},
		{"machines that are an empty string", "etcd:\n  machines: ''\n", noEndpoint + " (line 2)"},
		{"machines that are an empty list", "etcd:\n  machines: []\n", noEndpoint + " (line 2)"},
		{"machines that are a list of blanks", "etcd:\n  machines:\n    - ''\n    - \"\"\n", noEndpoint + " (line 3)"},
	} {
		t.Run(c.name+" is refused naming its line", func(t *testing.T) {
			_, err := Parse([]byte(c.doc), "/x/storage.yaml")
			require.EqualError(t, err, "config /x/storage.yaml: "+c.want)
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
		})
	}
	for _, c := range []struct{ name, doc, want string }{
		{"an endpoint without its port, second in a list", "etcd:\n  machines:\n    - 127.0.0.1:1\n    - localhost\n",
			`etcd.machines: endpoint "localhost": not host:port, http://host:port or https://host:port (line 4)`},
		{"an endpoint without its port, given alone", "etcd:\n  machines: localhost\n",
			`etcd.machines: endpoint "localhost": not host:port, http://host:port or https://host:port (line 2)`},
		{"a CA file that is not there", "etcd:\n  machines: [127.0.0.1:1]\n  ca: /nonexistent/ca.pem\n",
			"etcd.ca: open /nonexistent/ca.pem: no such file or directory (line 3)"},
		{"a client certificate without its key", "etcd:\n  machines: [127.0.0.1:1]\n  cert: /nonexistent/cert.pem\n",
			"etcd.key: missing: etcd.cert is set, and a client certificate needs both"},
	} {
		t.Run(c.name+" is refused when the store is opened naming its line", func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "storage.yaml")
			cfg, err := Parse([]byte(c.doc), file)
			require.NoError(t, err)
			_, err = cfg.Open(context.Background(), Read)
			require.EqualError(t, err, "config "+file+": "+c.want)
		})
	}
}

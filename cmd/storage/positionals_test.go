package main_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestPositionalArgumentsAreCheckedForWhatTheyAre: each positional argument
// of an operator command is checked by its own rule, and a bad one is one
// line naming what the argument is (a pool id, an object id, a size, a node
// name), exit 2, with nothing written.
func TestPositionalArgumentsAreCheckedForWhatTheyAre(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	addNode(t, env, "n1", obj{"storage": "1T", "pools": []string{"ceph-a:/mnt/ceph-a"}})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a pool id with a slash to pools get", []string{"pools", "get", "BAD/ID"},
			`storage: pools get: invalid_argument: pool id "BAD/ID" is not valid (want [a-z0-9][a-z0-9._-]{0,62})`},
		{"an upper-case pool id to pools objects", []string{"pools", "objects", "Ceph"}, `invalid_argument: pool id "Ceph" is not valid`},
		{"a pool id with a space to pools declare-lost", []string{"pools", "declare-lost", "a b"}, `invalid_argument: pool id "a b" is not valid`},
		{"a pool id with a slash to pools cleanup", []string{"pools", "cleanup", "a/b", "--node", "n1"}, `invalid_argument: pool id "a/b" is not valid`},
		{"a pool id with a slash to pools repair", []string{"pools", "repair", "a/b"}, `invalid_argument: pool id "a/b" is not valid`},
		{"a bad pool id to pools set-capacity", []string{"pools", "set-capacity", "a/b", "1G", "--if-version", "0"}, `invalid_argument: pool id "a/b" is not valid`},
		{"a size with a slash to pools set-capacity", []string{"pools", "set-capacity", "ceph-a", "1/2", "--if-version", "0"},
			`storage: pools set-capacity: invalid_argument: capacity SIZE: size "1/2" is not a number of bytes or a human size like 10G`},
		{"an object id with a slash to pools object", []string{"pools", "object", "v-0123/456789abcd"},
			`storage: pools object: invalid_argument: object id "v-0123/456789abcd" is not valid (want v- and 16 hex digits)`},
		{"an object id with a slash to pools move", []string{"pools", "move", "x/y", "--to", "ceph-a", "--node", "n1"}, `invalid_argument: object id "x/y" is not valid`},
		{"a pool id with a slash to pools move's --to", []string{"pools", "move", "v-0123456789abcdef", "--to", "a/b", "--node", "n1"},
			`storage: pools move: invalid_argument: --to: pool id "a/b" is not valid`},
		{"a node name with a slash to pools move's --node", []string{"pools", "move", "v-0123456789abcdef", "--to", "ceph-a", "--node", "a/b"},
			`storage: pools move: invalid_argument: --node: node name "a/b" may not hold '/'`},
		{"a node name with a slash to nodes get", []string{"nodes", "get", "a/b"}, `storage: nodes get: invalid_argument: node name "a/b" may not hold '/'`},
		{"a node name with a space to nodes revoke", []string{"nodes", "revoke", "a b"}, `invalid_argument: node name "a b" may not hold ' '`},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused naming what the argument is", func(t *testing.T) {
			before := env.Dump(t)
			res := env.Op(t, "storage", c.args...)
			require.Equal(t, 2, res.Code, res.Stderr)
			require.Empty(t, res.Stdout)
			require.Contains(t, res.Stderr, c.want)
			require.Equal(t, 1, strings.Count(res.Stderr, "\n"), "one line")
			require.Equal(t, before, env.Dump(t), "nothing written")
		})
	}
	t.Run("a size with a space in it is a size, as the size parser reads it", func(t *testing.T) {
		var v poolView
		env.OpOK(t, "storage", &v, "pools", "set-capacity", "ceph-a", "300 G", "--if-version", "0")
		require.Equal(t, 300*gib, *v.Capacity)
	})
	t.Run("a compute node name is still checked as a node name", func(t *testing.T) {
		res := env.Op(t, "compute", "overcommit", "get-node", "a/b")
		require.Equal(t, 2, res.Code, res.Stderr)
		require.Contains(t, res.Stderr, `compute: overcommit get-node: invalid_argument: node name "a/b" may not hold '/'`)
	})
}

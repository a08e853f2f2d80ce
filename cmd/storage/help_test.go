package main_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestHelpOfACommandGroup: `help GROUP` and `--help GROUP` show the same
// help as `GROUP --help`: every subcommand and the group's options.
func TestHelpOfACommandGroup(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	cases := []struct {
		name string
		bin  string
		args []string
		want []string // lines the help holds, in order
	}{
		{"help nodes lists every nodes subcommand", "storage", []string{"help", "nodes"},
			[]string{"COMMANDS:", "list", "get", "drain", "cancel-drain", "isolate", "retire", "revoke", "admit", "end-session", "forget", "heartbeat", "OPTIONS:", "--help"}},
		{"--help nodes lists every nodes subcommand", "storage", []string{"--help", "nodes"},
			[]string{"COMMANDS:", "list", "heartbeat", "OPTIONS:"}},
		{"help pools lists move and cleanup too", "storage", []string{"help", "pools"},
			[]string{"COMMANDS:", "list", "get", "set-capacity", "objects", "object", "declare-lost", "move", "cleanup", "check", "repair", "OPTIONS:"}},
		{"help overcommit lists its four subcommands", "compute", []string{"help", "overcommit"},
			[]string{"COMMANDS:", "get-defaults", "set-defaults", "get-node", "set-node", "OPTIONS:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := env.Op(t, c.bin, c.args...)
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Empty(t, res.Stderr)
			group := c.args[len(c.args)-1]
			want := env.Op(t, c.bin, group, "--help")
			require.Equal(t, want.Stdout, res.Stdout, "the same help as `%s --help`", group)
			require.Regexp(t, regexpInOrder(c.want), res.Stdout)
		})
	}
}

// regexpInOrder matches each of words, in order, as the first word of a line.
func regexpInOrder(words []string) string {
	re := `(?ms)`
	for _, w := range words {
		re += `^\s*` + regexp.QuoteMeta(w) + `[\s,].*`
	}
	return re
}

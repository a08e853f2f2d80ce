package main_test

import (
	"regexp"
	"strings"
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

// TestHelpAfterArguments: a command's --help given with its arguments (the
// command line being written, then --help appended) shows the command's
// help and runs nothing.
func TestHelpAfterArguments(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	addNode(t, env, "n1", standardNode)
	cases := []struct {
		name    string
		bin     string
		command []string
		args    []string
	}{
		{"--help after the node shows the drain's help", "storage", []string{"nodes", "drain"}, []string{"n1", "--help"}},
		{"--help before the node shows the drain's help", "storage", []string{"nodes", "drain"}, []string{"--help", "n1"}},
		{"-h among flags and the node shows the drain's help", "storage", []string{"nodes", "drain"}, []string{"n1", "--wait", "-h"}},
		{"--help after a pool and a size shows set-capacity's help", "storage", []string{"pools", "set-capacity"}, []string{"ceph-a", "300G", "--help"}},
		{"--help after the node shows set-node's help", "compute", []string{"overcommit", "set-node"}, []string{"n1", "--cpu", "2000", "--help"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := env.Op(t, c.bin, append(c.command, "--help")...)
			require.Equal(t, 0, want.Code, want.Stderr)
			res := env.Op(t, c.bin, append(c.command, c.args...)...)
			require.Equal(t, 0, res.Code, res.Stderr)
			require.Empty(t, res.Stderr)
			require.Equal(t, want.Stdout, res.Stdout)
		})
	}
	require.False(t, nodeGet(t, env, "n1").Drain, "asking for help drained nothing")
}

// TestHelpGivenFalseRunsTheCommand: a help flag given false asks for no
// help, so the command runs on its arguments: none of them is dropped as
// if its help had been asked for.
func TestHelpGivenFalseRunsTheCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
	}{
		{"--help=false after the node drains the node", []string{"nodes", "drain", "n1", "--help=false"}},
		{"-h=false before the node drains the node", []string{"nodes", "drain", "-h=false", "n1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := testenv.NewEmbedded(t)
			addNode(t, env, "n1", standardNode)
			res := env.Op(t, "storage", c.args...)
			require.Equal(t, 0, res.Code, res.Stderr)
			require.NotContains(t, res.Stdout, "USAGE:", "no help was asked for")
			require.True(t, nodeGet(t, env, "n1").Drain, "the command ran on its node")
		})
	}
}

// TestHelpSaysEachDefaultOnce: a flag's help gives its default once, the
// real one.
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	t.Parallel()
	env := testenv.NewEmbedded(t)
	cases := []struct {
		name string
		args []string
		flag string
		want string
	}{
		{"pools move's --progress defaults to whether stderr is a terminal", []string{"pools", "move", "--help"}, "--progress",
			"(default: when stderr is a terminal)"},
		{"pools move's --command-id defaults to one named after the move", []string{"pools", "move", "--help"}, "--command-id",
			"(default: move-OBJECT-POOL)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := env.Op(t, "storage", c.args...)
			require.Equal(t, 0, res.Code, res.Stderr)
			line := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(c.flag) + `\b.*$`).FindString(res.Stdout)
			require.NotEmpty(t, line, res.Stdout)
			require.True(t, strings.HasSuffix(line, c.want), line)
			require.Equal(t, 1, strings.Count(line, "(default:"), line)
		})
	}
}

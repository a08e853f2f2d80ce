package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunVerbAnswersWhatMainAnswers runs the same calls, one after the
// other, on two stores alike: through the command tree (Main) in one, and
// through RunVerb in the other. Every answer, error line and exit status
// must be the same bytes; command lines that are not a plain verb call are
// left to Main.
func TestRunVerbAnswersWhatMainAnswers(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for _, dir := range dirs {
		for _, b := range []string{"storage", "compute"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, b+".yaml"), []byte("embedded:\n  path: store.db\n"), 0o644))
		}
	}
	type call struct {
		name  string
		bin   string
		args  []string
		stdin string
	}
	var calls []call
	for _, c := range daemonScript("n1") {
		calls = append(calls, call{name: c.bin + " " + c.args[0] + " succeeds", bin: c.bin, args: c.args, stdin: c.stdin})
	}
	calls = append(calls,
		call{"a request that is not JSON is refused alike", "storage", []string{"add-node"}, "{nope"},
		call{"an empty request is refused alike", "compute", []string{"get-node-resource-info"}, ""},
		call{"an unknown node is refused alike", "storage", []string{"get-node-resource-info"}, `{"nodename":"ghost"}`},
		call{"a node name that needs quoting is quoted alike", "storage", []string{"remove-node"}, `{"nodename":"a b"}`},
		call{"a config flag before the verb is read alike", "storage", []string{"--config", "storage.yaml", "get-most-idle-node"}, `{"nodenames":[]}`},
		call{"a config flag after the verb is read alike", "compute", []string{"calculate-deploy", "--config=compute.yaml"}, `{"nodename":"ghost"}`},
		call{"a config file that does not exist is refused alike", "storage", []string{"--config", "missing.yaml", "get-node-resource-info"}, `{"nodename":"n1"}`},
	)
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			var want, got [2]bytes.Buffer
			t.Chdir(dirs[0])
			wantCode := Main(c.bin, c.args, strings.NewReader(c.stdin), &want[0], &want[1])
			t.Chdir(dirs[1])
			gotCode, ok := RunVerb(Options{}, c.bin, c.args, strings.NewReader(c.stdin), &got[0], &got[1])
			require.True(t, ok, "a plain verb call is RunVerb's")
			require.Equal(t, want[0].String(), got[0].String(), "stdout")
			require.Equal(t, want[1].String(), got[1].String(), "stderr")
			require.Equal(t, wantCode, gotCode, "exit status")
		})
	}
	for _, args := range [][]string{
		{"nodes", "list"},
		{"get-node-resource-info", "extra"},
		{"name", "--help"},
		{"help"},
		{"--config"},
		{"explode"},
		{},
	} {
		t.Run("RunVerb leaves "+strings.Join(append([]string{"the command line"}, args...), " ")+" to the command tree", func(t *testing.T) {
			var out, errb bytes.Buffer
			_, ok := RunVerb(Options{}, "storage", args, strings.NewReader(""), &out, &errb)
			require.False(t, ok)
			require.Zero(t, out.Len()+errb.Len(), "it printed nothing")
		})
	}
}

// TestRunFixedAnswersWhatMainAnswers checks the verbs whose answer the
// binary alone fixes: RunFixed prints what Main prints for them, in a
// folder whose config could not even be read, and leaves every other
// command line to the rest of RunPlugin.
func TestRunFixedAnswersWhatMainAnswers(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []string{"storage", "compute"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, b+".yaml"), []byte("etcd: [not, a, map\n"), 0o644))
	}
	t.Chdir(dir)
	for _, bin := range []string{"storage", "compute"} {
		for _, verb := range []string{"name", "get-metrics-description"} {
			t.Run(bin+" "+verb+" answers as the command tree does", func(t *testing.T) {
				var want, got [2]bytes.Buffer
				wantCode := Main(bin, []string{verb}, strings.NewReader(""), &want[0], &want[1])
				gotCode, ok := RunFixed(bin, []string{verb}, &got[0], &got[1])
				require.True(t, ok)
				require.Equal(t, 0, wantCode, "the tree answers too: %s", want[1].String())
				require.Equal(t, want[0].String(), got[0].String(), "stdout")
				require.Equal(t, want[1].String(), got[1].String(), "stderr")
				require.Equal(t, wantCode, gotCode, "exit status")
			})
		}
	}
	t.Run("the name is a JSON string of the resource's name", func(t *testing.T) {
		var out, errb bytes.Buffer
		code, ok := RunFixed("compute", []string{"name"}, &out, &errb)
		require.True(t, ok)
		require.Zero(t, code)
		require.Equal(t, "\"compute\"\n", out.String())
		require.Zero(t, errb.Len())
	})
	for _, args := range [][]string{
		{"get-node-resource-info"},
		{"name", "--help"},
		{"--config", "storage.yaml", "name"},
		{"nodes"},
		{"serve"},
		{},
	} {
		t.Run("RunFixed leaves "+strings.Join(append([]string{"the command line"}, args...), " ")+" to the rest", func(t *testing.T) {
			var out, errb bytes.Buffer
			_, ok := RunFixed("storage", args, &out, &errb)
			require.False(t, ok)
			require.Zero(t, out.Len()+errb.Len(), "it printed nothing")
		})
	}
}

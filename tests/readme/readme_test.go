// Package readme_test runs the README's shell blocks marked
// `<!-- readme-test: NAME -->` against the built binaries, so that the
// commands it shows keep working as written.
package readme_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// block is the fenced block after the README's marker for name, without
// its indentation.
func block(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "README.md"))
	require.NoError(t, err)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	marker := "<!-- readme-test: " + name + " -->"
	var lines []string
	state, indent := 0, ""
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case state == 0 && trimmed == marker:
			state = 1
		case state == 1 && strings.HasPrefix(trimmed, "```"):
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			state = 2
		case state == 2 && trimmed == "```":
			require.NotEmpty(t, lines, "the block after %s is empty", marker)
			return strings.Join(lines, "\n") + "\n"
		case state == 2:
			lines = append(lines, strings.TrimPrefix(line, indent))
		}
	}
	require.Failf(t, "no block", "README.md has no fenced block after %s", marker)
	return ""
}

// bash runs script with bash -e -o pipefail in dir, the binaries first on
// PATH.
func bash(t *testing.T, dir, script string) (stdout, stderr string) {
	t.Helper()
	bin := filepath.Dir(testenv.Bin(t, "storage"))
	testenv.Bin(t, "compute")
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "ERU_RESOURCE_CONFIG_PATH=")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	require.NoError(t, err, "the README's commands failed:\n%s\nstdout:\n%s\nstderr:\n%s", script, out.String(), errb.String())
	return out.String(), errb.String()
}

// TestTheReadmeWalkthroughRunsAsWritten runs "Taking a node out of
// service" on the embedded store: every command succeeds, the node ends
// RETIRED, and stderr holds only what the commands say they print there.
func TestTheReadmeWalkthroughRunsAsWritten(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr := bash(t, dir, block(t, "walkthrough"))
	require.FileExists(t, filepath.Join(dir, "eru-demo", "eru.db"), "one embedded store, where the README says")
	require.Contains(t, stdout, "DRAINING")
	require.Regexp(t, `(?m)^STATUS +DRAINING`, stdout, "the drain's table")
	require.Regexp(t, `(?m)^CPU RATIO +4000 \(4x\), default$`, stdout)
	require.Contains(t, stdout, "status: RETIRED", "the dry run's YAML says what retiring would do")
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		ok := strings.HasPrefix(line, "storage: nodes drain n1: ") ||
			strings.HasPrefix(line, "storage: nodes retire: replay of command retire-n1: the answer given at ")
		require.True(t, ok, "unexpected stderr line %q", line)
	}
	require.Contains(t, stderr, "replay of command retire-n1")

	var last map[string]any
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, "RETIRED", last["status"])
}

// TestTheReadmeInstallRunsOnABareHost runs the README's install steps and
// its embedded-store step with /etc/eru/plugins moved to a temporary folder
// that does not exist yet, sudo left out and the binaries already built
// (make build is the build the tests run): both installed binaries then
// use the one bbolt file beside their configs, and no etcd, and `storage
// serve` finds the installed daemon.
func TestTheReadmeInstallRunsOnABareHost(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Dir(testenv.Bin(t, "storage")), filepath.Join(src, "bin")))
	testenv.Bin(t, "compute")
	for _, name := range []string{"storage", "compute"} {
		data, err := os.ReadFile(filepath.Join(testenv.Root(), name+".yaml.sample"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(src, name+".yaml.sample"), data, 0o644))
	}
	dir := filepath.Join(t.TempDir(), "etc", "eru", "plugins")
	var script []string
	for _, line := range strings.Split(block(t, "install")+block(t, "embedded-install"), "\n") {
		if strings.HasPrefix(line, "make build") {
			continue
		}
		line = strings.ReplaceAll(strings.ReplaceAll(line, "sudo ", ""), "/etc/eru/plugins", dir)
		script = append(script, line)
	}
	bash(t, src, strings.Join(script, "\n"))

	for _, name := range []string{"storage", "compute", "libexec/serve"} {
		require.FileExists(t, filepath.Join(dir, name))
	}
	run := func(bin string, stdin string, args ...string) string {
		cmd := exec.Command(filepath.Join(dir, bin), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v: %s", bin, args, out)
		return string(out)
	}
	run("storage", `{"nodename":"n1","resource":{"volumes":["/data0:1T"]}}`, "add-node")
	run("compute", `{"nodename":"n1","resource":{"cpu":4,"memory":"8G"}}`, "add-node")
	require.FileExists(t, filepath.Join(dir, "eru-resources.db"), "the embedded file is where the README says")
	var v struct {
		Resources map[string]any `json:"resources"`
	}
	require.NoError(t, json.Unmarshal([]byte(run("compute", "", "nodes", "get", "n1")), &v))
	require.Contains(t, v.Resources, "storage", "compute sees what storage wrote: one store")
	require.Contains(t, v.Resources, "compute")
	require.True(t, strings.HasPrefix(run("storage", "", "serve", "--help"), "usage: storage serve"), "the installed storage finds the installed daemon")
}

// TestTheReadmePoolSessionRunsAsWritten runs "Operating pools" on the
// embedded store: every command succeeds (the stale --if-version is
// refused where the README says), the object fails over to n2 under n2's
// path, moves to nfs1 with its data, and the counters never drift.
func TestTheReadmePoolSessionRunsAsWritten(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr := bash(t, dir, block(t, "pools"))
	root := filepath.Join(dir, "eru-pools")
	object := regexp.MustCompile(`(?m)^(v-[0-9a-f]{16}) +ceph-a +100 GiB +n1 +yes +AVAILABLE +-$`).FindStringSubmatch(stdout)
	require.NotNil(t, object, "the placed object on n1:\n%s", stdout)
	id := object[1]

	require.Regexp(t, `(?m)^ceph-a +- +0 B +0 +0 +2 +no capacity$`, stdout, "a new pool has no capacity")
	require.Regexp(t, `(?m)^CAPACITY +300 GiB$`, stdout)
	require.Contains(t, stdout, "exit 5: read the version again\n")
	require.Regexp(t, `(?m)^pool objects +1\npool +100 GiB$`, stdout, "the isolation released the object, still reserved")
	require.Contains(t, stdout, `"`+root+"/mnt/n2/ceph-a/"+id+`:/data:rw:107374182400"`, "n2's engine gets the object under n2's path")
	require.Regexp(t, `(?m)^`+id+` +ceph-a +100 GiB +n2 +yes +AVAILABLE +-$`, stdout)
	require.Regexp(t, `(?m)^LOST VOLUMES +0$`, stdout)
	require.Regexp(t, `(?m)^n1 +\S+/mnt/scratch +no +no \(lost\) +0$`, stdout)
	require.Regexp(t, `(?m)^`+id+` +nfs1 +100 GiB +n2 +yes +AVAILABLE +-$`, stdout, "the move settled in nfs1")
	require.Regexp(t, `(?m)^nfs1 +107374182400 +107374182400 +0 +1 +1$`, stdout, "check: no drift")
	require.Regexp(t, `(?m)^ceph-a +0 +0 +0 +0 +0$`, stdout)

	moved, err := os.Stat(filepath.Join(root, "mnt", "nfs1", id, "data"))
	require.NoError(t, err)
	require.Equal(t, int64(3<<20), moved.Size())
	require.NoDirExists(t, filepath.Join(root, "mnt", "ceph", id), "the source copy is removed once the move settled")

	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, line := range lines {
		ok := line == "storage: pools set-capacity: aborted: pool ceph-a is at version 1, not 0; read it again" ||
			strings.HasPrefix(line, "storage: pools move "+id+": ")
		require.True(t, ok, "unexpected stderr line %q", line)
	}
	require.Equal(t, "storage: pools move "+id+": 1/1 files, 3 MiB/3 MiB (100%)", lines[len(lines)-1])
}

// TestTheReadmeBackupCopiesTheStoreWhileWritersRun runs the README's
// backup of the embedded store in a plugin folder while two writers keep
// changing a node's usage: every write succeeds (they wait for the copy),
// the copy opens and reads, and the restore puts back exactly what the
// copy held, whatever was written after it.
func TestTheReadmeBackupCopiesTheStoreWhileWritersRun(t *testing.T) {
	_, err := exec.LookPath("flock")
	require.NoError(t, err, "the README's backup uses flock(1), from util-linux")
	dir := t.TempDir()
	storage := testenv.Bin(t, "storage")
	require.NoError(t, os.Symlink(storage, filepath.Join(dir, "storage")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "storage.yaml"), []byte("embedded:\n  path: eru-resources.db\n"), 0o644))
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(storage, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("storage %v: %w: %s", args, err, out)
		}
		return string(out), nil
	}
	usage := func(args ...string) string {
		out, err := run(`{"nodename":"n1"}`, append([]string{"get-node-resource-info"}, args...)...)
		require.NoError(t, err)
		var info struct {
			Usage struct {
				Volumes map[string]int64 `json:"volumes"`
			} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &info), out)
		require.Contains(t, info.Usage.Volumes, "/data0", out)
		return fmt.Sprint(info.Usage.Volumes["/data0"])
	}
	change := func(incr bool) error {
		_, err := run(fmt.Sprintf(`{"nodename":"n1","resource_request":{"volumes":["/data0:1G"]},"delta":true,"incr":%t}`, incr), "set-node-resource-usage")
		return err
	}
	_, err = run(`{"nodename":"n1","resource":{"volumes":["/data0:1T"]}}`, "add-node")
	require.NoError(t, err)

	script := block(t, "backup")
	cut := strings.Index(script, "# Restore")
	require.Positive(t, cut, "the backup block has a restore part")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 2 {
		wg.Go(func() {
			for incr := true; ; incr = !incr {
				select {
				case <-stop:
					if !incr { // leave the usage as it was
						if err := change(false); err != nil {
							failed.Store(err)
						}
					}
					return
				default:
				}
				if err := change(incr); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	stdout, _ := bash(t, dir, script[:cut])
	close(stop)
	wg.Wait()
	require.Nil(t, failed.Load(), "every write made during the copy succeeds")
	require.Regexp(t, `(?m)^n1 +READY`, stdout, "the copy opens and reads")
	copied := usage("--config", "backups/storage.yaml")
	require.Contains(t, []string{"0", fmt.Sprint(1 << 30), fmt.Sprint(2 << 30)}, copied, "the copy holds a state the writers made")

	require.NoError(t, change(true))
	require.NoError(t, change(true))
	require.NoError(t, change(true))
	require.NotEqual(t, copied, usage(), "the store moved on after the copy")
	bash(t, dir, script[cut:])
	require.Equal(t, copied, usage(), "the restore puts back what the copy held")
	require.NoFileExists(t, filepath.Join(dir, "eru-resources.db.restore"))
}

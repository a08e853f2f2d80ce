package main_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// movingProcess is `storage pools move OBJECT --to nfs1 --node n1
// --progress` started in env's folder, stopped (SIGSTOP) as soon as its
// first progress line shows the copy began.
type movingProcess struct {
	cmd    *exec.Cmd
	stderr chan string
}

func startStoppedMove(t *testing.T, env *testenv.Env, object string) *movingProcess {
	t.Helper()
	cmd := exec.Command(testenv.Bin(t, "storage"), "pools", "move", object, "--to", "nfs1", "--node", "n1", "--progress")
	cmd.Dir = env.Dir
	cmd.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewReader(pipe)
	first, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	require.Contains(t, first, "0 B/256 MiB", "stopped before the copy ended")
	p := &movingProcess{cmd: cmd, stderr: make(chan string, 1)}
	go func() {
		rest, _ := io.ReadAll(lines)
		p.stderr <- first + string(rest)
	}()
	return p
}

// finish continues the process and answers its exit code and stderr.
func (p *movingProcess) finish(t *testing.T) (int, string) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGCONT))
	stderr := <-p.stderr
	err := p.cmd.Wait()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), stderr
	}
	require.NoError(t, err)
	return 0, stderr
}

// TestPoolMoveOutlastsTheCallTimeout: etcd.call_timeout bounds each store
// call of `pools move`, not its copy: a copy that lasts longer than the
// budget runs to the end and the move settles; a copy stopped by SIGINT
// says so and the same command resumes it.
func TestPoolMoveOutlastsTheCallTimeout(t *testing.T) {
	t.Parallel()
	const budget = time.Second
	testenv.Backends(t, func(t *testing.T, env *testenv.Env) {
		if env.Etcd == nil {
			// The call timeout is etcd's key, and bounds the embedded
			// store's commands too.
			require.NoError(t, os.WriteFile(filepath.Join(env.Dir, "storage.yaml"), []byte(env.ConfigYAML()+"etcd:\n  call_timeout: 1s\n"), 0o644))
		}
		a, b, _, objects := movablePoolObjects(t, env, 2)
		for _, object := range objects {
			require.NoError(t, os.Mkdir(filepath.Join(a, object), 0o755))
			// Data, not a hole: the copy keeps holes, which take no time.
			f, err := os.Create(filepath.Join(a, object, "big"))
			require.NoError(t, err)
			chunk := bytes.Repeat([]byte{0xab}, 1<<20)
			for range 256 {
				_, err = f.Write(chunk)
				require.NoError(t, err)
			}
			require.NoError(t, f.Close())
		}

		t.Run("a copy that lasts longer than etcd.call_timeout runs to the end and the move settles", func(t *testing.T) {
			p := startStoppedMove(t, env, objects[0])
			time.Sleep(2 * budget)
			code, stderr := p.finish(t)
			require.Equal(t, 0, code, stderr)
			info, err := os.Stat(filepath.Join(b, objects[0], "big"))
			require.NoError(t, err)
			require.Equal(t, int64(256<<20), info.Size())
			require.NoDirExists(t, filepath.Join(a, objects[0]), "the source copy is removed after the settle")
			require.NoDirExists(t, filepath.Join(b, "."+objects[0]+".partial"))
			require.Equal(t, objectState{Pool: "nfs1", State: "AVAILABLE"}, poolObject(t, env, objects[0]))
			require.Equal(t, 10*gib, poolGet(t, env, "ceph-a").Reserved)
			require.Equal(t, 10*gib, poolGet(t, env, "nfs1").Reserved)
			noDrift(t, env)
		})
		t.Run("a copy stopped by SIGINT says so, and the same command resumes it", func(t *testing.T) {
			p := startStoppedMove(t, env, objects[1])
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
			code, stderr := p.finish(t)
			require.Equal(t, 7, code, stderr)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			require.Equal(t, "storage: pools move: unavailable: copying "+objects[1]+
				" stopped (run the same command again to resume, or --abort): interrupted by interrupt", lines[len(lines)-1])
			require.Equal(t, objectState{Pool: "ceph-a", State: "MOVING", MovingTo: "nfs1"}, poolObject(t, env, objects[1]))
			require.Equal(t, 20*gib, poolGet(t, env, "nfs1").Reserved)

			env.OpOK(t, "storage", nil, "pools", "move", objects[1], "--to", "nfs1", "--node", "n1")
			info, err := os.Stat(filepath.Join(b, objects[1], "big"))
			require.NoError(t, err)
			require.Equal(t, int64(256<<20), info.Size())
			require.NoDirExists(t, filepath.Join(a, objects[1]))
			require.Equal(t, objectState{Pool: "nfs1", State: "AVAILABLE"}, poolObject(t, env, objects[1]))
			require.Zero(t, poolGet(t, env, "ceph-a").Reserved)
			require.Equal(t, 20*gib, poolGet(t, env, "nfs1").Reserved)
			noDrift(t, env)
		})
	}, testenv.WithBudget(budget))
}

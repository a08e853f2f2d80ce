package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// buildFlags are the flags `make build` gives the plugin binaries; the
// hello-world floor is built with the same ones by the same toolchain.
var buildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

// helloSource is the Go hello-world whose exec is the floor of any exec'd Go
// plugin.
const helloSource = `package main

import "fmt"

func main() { fmt.Println("hello, world") }
`

// gatewaySource reads one key, in one process, over etcd's JSON gateway
// (POST /v3/kv/range) with nothing but the standard library, and prints it
// as etcdctl get does (key, then value). It is the floor of a plugin whose
// store client is net/http instead of clientv3, gRPC and protobuf: how much
// of an exec'd call is that client's (BENCHMARKS.md).
const gatewaySource = `package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	body, _ := json.Marshal(map[string][]byte{"key": []byte(os.Args[2])})
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post(os.Args[1]+"/v3/kv/range", "application/json", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	var out struct{ Kvs []struct{ Key, Value []byte } }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, resp.Status, err)
		os.Exit(1)
	}
	for _, kv := range out.Kvs {
		fmt.Printf("%s\n%s\n", kv.Key, kv.Value)
	}
}
`

// runnerSource is the small process every timed command runs under. It
// starts the command, waits for it with wait4 and writes to fd 3 the wall
// time it took and the command's own rusage: peak RSS, CPU time, page
// faults. The command is started from this process, not from the bench: a
// child exec'd from a process sharing its memory (vfork, which is how Go
// starts processes) inherits that process's RSS high-water mark, so a child
// of the bench, which holds etcd and the loaded records, would report the
// bench's peak instead of its own. This process's own peak, about 2 MiB, is
// the least RSS a measurement can read (printed with each run).
const runnerSource = `package main

import (
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	argv := os.Args[1:]
	if len(argv) == 0 {
		os.Stderr.WriteString("runner: no command\n")
		os.Exit(125)
	}
	start := time.Now()
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		os.Stderr.WriteString("runner: " + argv[0] + ": " + err.Error() + "\n")
		os.Exit(125)
	}
	var status syscall.WaitStatus
	var usage syscall.Rusage
	for {
		_, err = syscall.Wait4(pid, &status, 0, &usage)
		if err != syscall.EINTR {
			break
		}
	}
	wall := time.Since(start)
	if err != nil {
		os.Stderr.WriteString("runner: wait4: " + err.Error() + "\n")
		os.Exit(125)
	}
	code := status.ExitStatus()
	if status.Signaled() {
		code = 128 + int(status.Signal())
	}
	var b []byte
	for _, v := range []int64{wall.Nanoseconds(), int64(code), usage.Maxrss,
		usage.Utime.Nano() + usage.Stime.Nano(), usage.Minflt, usage.Majflt} {
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ' ')
	}
	b[len(b)-1] = '\n'
	os.NewFile(3, "report").Write(b)
}
`

// goBuild builds the main package held in source into out, as a module of
// its own in a temporary folder, with the toolchain goBin, buildFlags and
// env added to the go command's environment (the plugins' CGO_ENABLED).
func goBuild(goBin, source, out string, env ...string) error {
	dir, err := os.MkdirTemp("", "eru-bench-src-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module benchtool\n\ngo 1.22\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(source), 0o644); err != nil {
		return err
	}
	args := append([]string{"build"}, buildFlags...)
	return goCmdEnv(dir, goBin, env, append(args, "-o", out, ".")...)
}

// goCmd runs the go command in dir, outside any workspace.
func goCmd(dir, goBin string, args ...string) error { return goCmdEnv(dir, goBin, nil, args...) }

// goCmdEnv is goCmd with variables added to its environment.
func goCmdEnv(dir, goBin string, env []string, args ...string) error {
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", goBin, strings.Join(args, " "), err, out)
	}
	return nil
}

// goOutput runs the go command in dir and returns its trimmed output.
func goOutput(dir, goBin string, args ...string) (string, error) {
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("%s %s: %v: %s", goBin, strings.Join(args, " "), err, exit.Stderr)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// buildEtcdctl returns the path of etcdctl at version, built once from the
// module proxy into the user's cache folder and reused after, by goVersion
// with buildFlags and env (the plugins' CGO_ENABLED): a floor built as the
// plugins are, never a binary an older toolchain or other settings left in
// the cache.
func buildEtcdctl(goBin, version, goVersion string, env []string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	name := strings.Join(append([]string{"etcdctl", version, goVersion}, env...), "-")
	out := filepath.Join(cache, "eru-bench", name, "etcdctl")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	dir, err := os.MkdirTemp("", "eru-bench-etcdctl-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module benchetcdctl\n\ngo 1.22\n"), 0o644); err != nil {
		return "", err
	}
	const pkg = "go.etcd.io/etcd/etcdctl/v3"
	if err := goCmd(dir, goBin, "get", pkg+"@"+version); err != nil {
		return "", fmt.Errorf("fetching etcdctl: %w", err)
	}
	// Build beside the target and rename, so that an interrupted build
	// never leaves a broken binary in the cache and two builds at once
	// never write the same file.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	if err := goCmdEnv(dir, goBin, env, append(append([]string{"build"}, buildFlags...), "-o", tmp, pkg)...); err != nil {
		return "", fmt.Errorf("building etcdctl: %w", err)
	}
	return out, os.Rename(tmp, out)
}

// command is one process to time: its argv (argv[0] an absolute path), its
// working directory and what it reads on stdin.
type command struct {
	argv  []string
	dir   string
	stdin []byte
	env   []string // added to the runner's environment (KEY=VALUE), or removed from it (KEY)
}

func (c command) String() string { return strings.Join(c.argv, " ") }

// sample is one timed run: the wall time from start to exit seen by the
// runner, and the process's own rusage.
type sample struct {
	wall, cpu      time.Duration
	rssKiB         int64
	minflt, majflt int64
	code           int
	stdout, stderr []byte
}

// runner starts commands under the runner binary and reads its report.
type runner struct {
	path string   // the runner binary
	env  []string // the environment every command gets
}

// run runs c once to completion.
func (r *runner) run(c command) (sample, error) {
	rd, wr, err := os.Pipe()
	if err != nil {
		return sample{}, err
	}
	defer rd.Close()
	cmd := exec.Command(r.path, c.argv...)
	cmd.Dir = c.dir
	cmd.Env = commandEnv(r.env, c.env)
	cmd.Stdin = bytes.NewReader(c.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.ExtraFiles = []*os.File{wr}
	if err := cmd.Start(); err != nil {
		wr.Close()
		return sample{}, err
	}
	wr.Close()
	waitErr := cmd.Wait()
	report, err := readAll(rd)
	if waitErr != nil || err != nil {
		return sample{}, fmt.Errorf("%s: runner: %v %v: %s", c, waitErr, err, firstLine(stderr.String()))
	}
	var v [6]int64
	fields := strings.Fields(string(report))
	if len(fields) != len(v) {
		return sample{}, fmt.Errorf("%s: runner reported %q", c, report)
	}
	for i, f := range fields {
		if v[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			return sample{}, fmt.Errorf("%s: runner reported %q", c, report)
		}
	}
	return sample{wall: time.Duration(v[0]), code: int(v[1]), rssKiB: v[2], cpu: time.Duration(v[3]),
		minflt: v[4], majflt: v[5], stdout: stdout.Bytes(), stderr: stderr.Bytes()}, nil
}

// commandEnv is base with add applied in order: KEY=VALUE replaces KEY, a
// bare KEY removes it.
func commandEnv(base, add []string) []string {
	env := append([]string(nil), base...)
	for _, kv := range add {
		key, _, _ := strings.Cut(kv, "=")
		env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, key+"=") })
		if strings.Contains(kv, "=") {
			env = append(env, kv)
		}
	}
	return env
}

func readAll(f *os.File) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.Bytes(), err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

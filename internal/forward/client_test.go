package forward

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/eru-extend/resources/cmd/config"
)

func TestVerbOf(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		verb     string
		explicit string
		ok       bool
	}{
		{"a verb alone is forwarded", []string{"calculate-deploy"}, "calculate-deploy", "", true},
		{"a verb with --config is forwarded", []string{"--config", "/c.yaml", "get-metrics"}, "get-metrics", "/c.yaml", true},
		{"--config=FILE after the verb counts", []string{"add-node", "--config=c.yaml"}, "add-node", "c.yaml", true},
		{"an operator command is not forwarded", []string{"nodes", "list"}, "", "", false},
		{"an unknown word is not forwarded", []string{"explode"}, "", "", false},
		{"another flag is not forwarded", []string{"name", "--help"}, "", "", false},
		{"an extra argument is not forwarded", []string{"name", "extra"}, "", "", false},
		{"--config without its value is not forwarded", []string{"name", "--config"}, "", "", false},
		{"serve is not forwarded", []string{"serve"}, "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			verb, explicit, ok := VerbOf(c.args)
			require.Equal(t, c.ok, ok)
			if ok {
				require.Equal(t, c.verb, verb)
				require.Equal(t, c.explicit, explicit)
			}
		})
	}
}

func TestSocketPath(t *testing.T) {
	dir := t.TempDir()
	write := func(doc string) string {
		f := filepath.Join(dir, "storage.yaml")
		require.NoError(t, os.WriteFile(f, []byte(doc), 0o644))
		return f
	}
	for _, c := range []struct {
		name, doc, want string
	}{
		{"no serve section: beside the config", "etcd:\n  prefix: /x\n", filepath.Join(dir, DefaultSocket)},
		{"a relative socket", "serve:\n  http: 127.0.0.1:1\n  socket: run/s.sock # comment\n", filepath.Join(dir, "run/s.sock")},
		{"an absolute quoted socket", "etcd:\n  machines: [a]\nserve:\n  socket: \"/run/eru.sock\"\nlog:\n  file: x\n", "/run/eru.sock"},
		{"a single-quoted socket", "serve:\n    socket: '/run/q.sock'\n", "/run/q.sock"},
		{"socket under another section is not it", "etcd:\n  socket: /no\nserve:\n  http: x\n", filepath.Join(dir, DefaultSocket)},
		{"a nested socket key is not it", "serve:\n  tls:\n    socket: /no\n", filepath.Join(dir, DefaultSocket)},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, SocketPath(write(c.doc), dir))
		})
	}
	require.Equal(t, filepath.Join("/work", DefaultSocket), SocketPath("", "/work"), "no config: in the working directory")
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvPath, "")
	require.Equal(t, "", Resolve("", "storage", dir), "no file")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "storage.yaml"), nil, 0o644))
	require.Equal(t, filepath.Join(dir, "storage.yaml"), Resolve("", "storage", dir))
	require.Equal(t, filepath.Join(dir, "x.yaml"), Resolve("x.yaml", "storage", dir), "explicit, made absolute")
	t.Setenv(EnvPath, "/etc/e.yaml")
	require.Equal(t, "/etc/e.yaml", Resolve("", "storage", dir))
	require.Equal(t, "/a.yaml", Resolve("/a.yaml", "storage", dir), "explicit wins")
}

func TestResolveFollowsTheCommandTreesOrder(t *testing.T) {
	t.Setenv(EnvPath, "")
	for _, c := range []struct {
		name    string
		files   []string
		binary  string
		resolve string
	}{
		{"compute reads storage.yaml when it is the folder's only file", []string{"storage.yaml"}, "compute", "storage.yaml"},
		{"storage reads compute.yaml when it is the folder's only file", []string{"compute.yaml"}, "storage", "compute.yaml"},
		{"both read the shared file when it is the only one", []string{"eru-resources.yaml"}, "storage", "eru-resources.yaml"},
		{"the binary's own file comes before the sibling's", []string{"storage.yaml", "compute.yaml"}, "compute", "compute.yaml"},
		{"the sibling's file comes before the shared one", []string{"storage.yaml", "eru-resources.yaml"}, "compute", "storage.yaml"},
		{"no file is none", nil, "compute", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range c.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
			}
			want := ""
			if c.resolve != "" {
				want = filepath.Join(dir, c.resolve)
			}
			require.Equal(t, want, Resolve("", c.binary, dir))
			found, err := config.Resolve("", c.binary, dir)
			require.NoError(t, err)
			require.Equal(t, found, Resolve("", c.binary, dir), "the command tree reads the same file")
		})
	}
}

// TestACallForASocketPathTooLongRunsLocally: serve.socket longer than a
// unix socket address holds (the daemon refuses such a config) names no
// daemon the binary could reach, even when a socket file is there (bound
// by a relative name): the binary runs the call itself at once, without
// reading its stdin first or printing anything.
func TestACallForASocketPathTooLongRunsLocally(t *testing.T) {
	t.Setenv(EnvNoForward, "")
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60))
	require.NoError(t, os.Mkdir(dir, 0o755))
	name := strings.Repeat("s", 60) + ".sock"
	require.Greater(t, len(filepath.Join(dir, name)), MaxSocketPath)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "storage.yaml"), []byte("serve:\n  socket: "+name+"\n"), 0o644))
	t.Chdir(dir)
	ln, err := net.Listen("unix", name) // relative: fits the address
	require.NoError(t, err)
	defer ln.Close()

	stdin := &watchedReader{r: strings.NewReader(`{"nodename": "n1"}`)}
	var out, errb bytes.Buffer
	o := Forward(Call{Binary: "storage", Args: []string{"get-node-resource-info"}, Stdin: stdin, Stdout: &out, Stderr: &errb})
	require.False(t, o.Handled)
	require.False(t, o.ReadStdin)
	require.False(t, stdin.read, "stdin is left for the local call")
	require.Empty(t, out.String())
	require.Empty(t, errb.String())
}

type watchedReader struct {
	r    io.Reader
	read bool
}

func (w *watchedReader) Read(p []byte) (int, error) {
	w.read = true
	return w.r.Read(p)
}

// TestResolveFollowsAPathAsTheKernelOpensIt: a config path through a
// symbolic link and then ".." names the file the kernel opens (the link's
// target's parent's), not the one the text would name once cleaned; the
// daemon serving the latter must not take the call.
func TestResolveFollowsAPathAsTheKernelOpensIt(t *testing.T) {
	t.Setenv(EnvPath, "")
	base := t.TempDir()
	wd := filepath.Join(base, "wd")
	target := filepath.Join(base, "other", "sub")
	require.NoError(t, os.MkdirAll(wd, 0o755))
	require.NoError(t, os.MkdirAll(target, 0o755))
	require.NoError(t, os.Symlink(target, filepath.Join(wd, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(wd, "storage.yaml"), []byte("wd: 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(base, "other", "storage.yaml"), []byte("other: 2\n"), 0o644))
	t.Chdir(wd)
	for _, c := range []struct {
		name, explicit, want string
	}{
		{"a path through a link and .. names the file under the link's target's parent", "link/../storage.yaml", filepath.Join(base, "other", "storage.yaml")},
		{"the same path given absolute does too", wd + "/link/../storage.yaml", filepath.Join(base, "other", "storage.yaml")},
		{"a path without .. is only cleaned", "./storage.yaml", filepath.Join(wd, "storage.yaml")},
		{"a path with .. that does not resolve is left as given, so no daemon serves it", "missing/../storage.yaml", wd + "/missing/../storage.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Resolve(c.explicit, "storage", wd)
			require.Equal(t, c.want, got)
			if _, err := os.Stat(c.explicit); err == nil {
				opened, err := os.ReadFile(c.explicit) // what the command tree reads
				require.NoError(t, err)
				resolved, err := os.ReadFile(got)
				require.NoError(t, err)
				require.Equal(t, string(opened), string(resolved))
			}
		})
	}
}

// socketInFreshDir moves the test to a fresh working directory, with
// forwarding on and no config, and returns the socket path a call there
// looks for.
func socketInFreshDir(t *testing.T) string {
	t.Helper()
	t.Setenv(EnvNoForward, "")
	t.Setenv(EnvPath, "")
	dir := t.TempDir()
	t.Chdir(dir)
	return filepath.Join(dir, DefaultSocket)
}

// fakeDaemon listens on the default socket of a fresh working directory
// and hands its first connection, once its request is read whole, to
// answer; the test waits for it at its end.
func fakeDaemon(t *testing.T, answer func(conn net.Conn)) {
	t.Helper()
	ln, err := net.Listen("unix", socketInFreshDir(t))
	require.NoError(t, err)
	served := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-served })
	go func() {
		defer close(served)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		if _, _, err := ReadRequest(conn); err == nil {
			answer(conn)
		}
	}()
}

// TestAReadGivesUpOnASilentDaemonButAWriteWaits: a read whose daemon says
// nothing for the stall time runs locally, with the stdin it read; told
// the daemon still holds the call, it waits past that time for its
// answer. A write never gives up before the daemon's status byte: it may
// already run.
func TestAReadGivesUpOnASilentDaemonButAWriteWaits(t *testing.T) {
	const stall = 150 * time.Millisecond
	answer := func(conn net.Conn) error { return WriteAnswer(conn, []byte{Accepted}, 0, []byte("{}\n"), nil) }
	for _, c := range []struct {
		name    string
		verb    string
		answer  func(conn net.Conn) error // what the daemon does with the request
		handled bool
	}{
		{name: "a read answered at once is printed", verb: "get-node-resource-info", handled: true, answer: answer},
		{name: "a read the daemon is silent on runs locally", verb: "get-node-resource-info", handled: false,
			answer: func(net.Conn) error { time.Sleep(4 * stall); return nil }},
		{name: "a read the daemon keeps telling it holds waits past the stall time", verb: "get-node-resource-info", handled: true,
			answer: func(conn net.Conn) error {
				for range 6 {
					if _, err := conn.Write([]byte{Waiting}); err != nil {
						return err
					}
					time.Sleep(stall / 2)
				}
				return answer(conn)
			}},
		{name: "a read the daemon stops telling it holds runs locally", verb: "get-node-resource-info", handled: false,
			answer: func(conn net.Conn) error {
				_, err := conn.Write([]byte{Waiting})
				time.Sleep(4 * stall)
				return err
			}},
		{name: "a read whose answer stops half-way runs locally", verb: "get-node-resource-info", handled: false,
			answer: func(conn net.Conn) error {
				_, err := conn.Write([]byte{Accepted, 0})
				time.Sleep(4 * stall)
				return err
			}},
		{name: "a write waits past the stall time for its status", verb: "set-node-resource-usage", handled: true,
			answer: func(conn net.Conn) error { time.Sleep(3 * stall); return answer(conn) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			answered := make(chan error, 1)
			fakeDaemon(t, func(conn net.Conn) { answered <- c.answer(conn) })
			const stdin = `{"nodename": "n1"}`
			var out, errb bytes.Buffer
			start := time.Now()
			o := Forward(Call{Binary: "storage", Args: []string{c.verb}, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Stall: stall})
			took := time.Since(start)
			require.NoError(t, <-answered)
			require.Equal(t, c.handled, o.Handled)
			require.Empty(t, errb.String())
			if c.handled {
				require.Equal(t, "{}\n", out.String())
				return
			}
			require.Empty(t, out.String())
			require.Equal(t, stdin, string(o.Read), "the local call gets the stdin read")
			require.GreaterOrEqual(t, took, stall)
			require.Less(t, took, 4*stall, "it gave up before the daemon went away")
		})
	}
}

// TestACallToADaemonTakingNoneGivesUpAtTheStallTime: a stopped daemon
// takes no connection (a full listen queue blocks connect) and reads no
// request (a request larger than the socket's buffer blocks its send):
// either way the call gives up at the stall time and runs locally, write
// or read, for the daemon ran nothing of it.
func TestACallToADaemonTakingNoneGivesUpAtTheStallTime(t *testing.T) {
	const stall = 150 * time.Millisecond
	forward := func(t *testing.T, verb, stdin string) (Outcome, time.Duration) {
		t.Helper()
		var out, errb bytes.Buffer
		start := time.Now()
		o := Forward(Call{Binary: "storage", Args: []string{verb}, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Stall: stall})
		return o, time.Since(start)
	}
	for _, verb := range []string{"get-node-resource-info", "set-node-resource-usage"} {
		t.Run("a "+verb+" to a daemon whose listen queue is full", func(t *testing.T) {
			fullListenQueue(t)
			o, took := forward(t, verb, `{"nodename": "n1"}`)
			require.False(t, o.Handled)
			require.GreaterOrEqual(t, took, stall)
			require.Less(t, took, 10*stall)
		})
		t.Run("a "+verb+" whose request the daemon does not read", func(t *testing.T) {
			ln, err := net.Listen("unix", socketInFreshDir(t))
			require.NoError(t, err)
			accepted := make(chan net.Conn, 1)
			go func() {
				conn, err := ln.Accept()
				if err == nil {
					accepted <- conn // held, never read
				}
				close(accepted)
			}()
			defer func() {
				_ = ln.Close()
				if conn, ok := <-accepted; ok {
					_ = conn.Close()
				}
			}()
			o, took := forward(t, verb, `{"nodename": "n1", "workloads_resource": ["`+strings.Repeat("x", 4<<20)+`"]}`)
			require.False(t, o.Handled)
			require.GreaterOrEqual(t, took, stall)
			require.Less(t, took, 10*stall)
		})
	}
}

// TestSignalsDoNotExtendTheStallTime: a signal interrupting the blocked
// read (EINTR) resumes it with what is left of the stall time, not a whole
// new one, so signals arriving more often than the stall time cannot hold
// a read on a silent daemon.
func TestSignalsDoNotExtendTheStallTime(t *testing.T) {
	const stall = 200 * time.Millisecond
	silent := make(chan struct{})
	fakeDaemon(t, func(net.Conn) { <-silent })
	t.Cleanup(func() { close(silent) }) // before fakeDaemon's own
	forwardUnderSignals(t, "get-node-resource-info", stall, "a read on a silent daemon")
}

// TestAStdinThatFailsHalfWayIsHandedOnWhole: what was read of stdin before
// a read failed is handed to the local call ahead of the rest.
func TestAStdinThatFailsHalfWayIsHandedOnWhole(t *testing.T) {
	fakeDaemon(t, func(net.Conn) {})
	in := &failingOnce{parts: []string{`{"nodename":`, `"n1"}`}}
	var out, errb bytes.Buffer
	_, handled, stdin := Try(Call{Binary: "storage", Args: []string{"get-node-resource-info"}, Stdin: in, Stdout: &out, Stderr: &errb})
	require.False(t, handled)
	rest, err := io.ReadAll(stdin)
	require.NoError(t, err)
	require.Equal(t, `{"nodename":"n1"}`, string(rest))
}

// failingOnce yields its first part, then fails once (as a pipe another
// process set non-blocking would), then yields the rest.
type failingOnce struct {
	parts  []string
	failed bool
}

func (f *failingOnce) Read(p []byte) (int, error) {
	if len(f.parts) == 0 {
		return 0, io.EOF
	}
	if len(f.parts) == 1 && !f.failed {
		f.failed = true
		return 0, unix.EAGAIN
	}
	n := copy(p, f.parts[0])
	f.parts[0] = f.parts[0][n:]
	if f.parts[0] == "" {
		f.parts = f.parts[1:]
	}
	return n, nil
}

// TestTheConfigScanStopsWhereTheCommandTreeDoes: the client scans a config
// file for serve.socket only as far as the command tree reads one
// (config.MaxFileSize): a file one byte larger is not scanned, one at the
// limit is.
func TestTheConfigScanStopsWhereTheCommandTreeDoes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "storage.yaml")
	head := "serve:\n  socket: /run/big.sock\n"
	for _, c := range []struct {
		name string
		size int
		want string
	}{
		{"a file at the limit is scanned", config.MaxFileSize, "/run/big.sock"},
		{"a file one byte past the limit is not", config.MaxFileSize + 1, filepath.Join(dir, DefaultSocket)},
		{"nor one 64 KiB past it", config.MaxFileSize + 64<<10, filepath.Join(dir, DefaultSocket)},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(head + strings.Repeat("#", c.size-len(head)))
			require.NoError(t, os.WriteFile(file, data, 0o644))
			require.Equal(t, c.want, SocketPath(file, dir))
		})
	}
}

// TestSignalsDoNotExtendTheConnectStall: a connect blocked on a full listen
// queue (a stopped daemon) is bounded by the stall time as a blocked read
// is: a signal interrupting it (EINTR) resumes it with what is left of the
// stall time, not a whole new one.
func TestSignalsDoNotExtendTheConnectStall(t *testing.T) {
	const stall = 200 * time.Millisecond
	fullListenQueue(t)
	forwardUnderSignals(t, "set-node-resource-usage", stall, "a connect to a daemon taking no connection")
}

// forwardUnderSignals forwards verb on a thread sent a signal every
// stall/4, and requires the client to give up after stall, not later: a
// signal must not start its wait again.
func forwardUnderSignals(t *testing.T, verb string, stall time.Duration, what string) {
	t.Helper()
	var tid atomic.Int32
	done := make(chan time.Duration, 1)
	go func() {
		runtime.LockOSThread() // the thread the signals are sent to
		defer runtime.UnlockOSThread()
		tid.Store(int32(unix.Gettid()))
		var out, errb bytes.Buffer
		start := time.Now()
		Forward(Call{Binary: "storage", Args: []string{verb}, Stdin: strings.NewReader(`{"nodename":"n1"}`), Stdout: &out, Stderr: &errb, Stall: stall})
		done <- time.Since(start)
	}()
	tick := time.NewTicker(stall / 4)
	defer tick.Stop()
	deadline := time.After(10 * stall)
	for {
		select {
		case <-deadline:
			t.Fatalf("signals every %s held %s past %s", stall/4, what, 10*stall)
		case took := <-done:
			require.GreaterOrEqual(t, took, stall)
			require.Less(t, took, 5*stall, "signals every %s held %s", stall/4, what)
			return
		case <-tick.C:
			if id := tid.Load(); id != 0 {
				_ = unix.Tgkill(unix.Getpid(), int(id), unix.SIGURG) // the runtime's own preemption signal, ignored otherwise
			}
		}
	}
}

// TestNoForwardEnvWinsOverAnInheritedSetting: the front's fallback must
// run the call in the full binary even when its own environment said
// ERU_RESOURCE_NO_FORWARD=0 (or held it twice): a program reads the first
// entry of a name, so an appended =1 alone would be ignored and the full
// binary would forward the call again.
func TestNoForwardEnvWinsOverAnInheritedSetting(t *testing.T) {
	for _, c := range []struct {
		name    string
		environ []string
	}{
		{"an environment without the variable gets it", []string{"PATH=/bin"}},
		{"an inherited 0 is replaced", []string{"ERU_RESOURCE_NO_FORWARD=0", "PATH=/bin"}},
		{"an inherited empty value is replaced", []string{"PATH=/bin", "ERU_RESOURCE_NO_FORWARD="}},
		{"every inherited entry goes", []string{"ERU_RESOURCE_NO_FORWARD=0", "ERU_RESOURCE_NO_FORWARD=2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := NoForwardEnv(c.environ)
			var values []string
			for _, kv := range env {
				if name, value, _ := strings.Cut(kv, "="); name == EnvNoForward {
					values = append(values, value)
				}
			}
			require.Equal(t, []string{"1"}, values)
			var kept []string
			for _, kv := range c.environ {
				if !strings.HasPrefix(kv, EnvNoForward+"=") {
					kept = append(kept, kv)
				}
			}
			require.Equal(t, append(kept, EnvNoForward+"=1"), env, "everything else kept, in order")
		})
	}
}

// fullListenQueue makes the socket the calls of this test find (see
// socketInFreshDir) one that a daemon listens on and takes no connection
// from, its queue already full (a stopped daemon), until the test ends.
func fullListenQueue(t *testing.T) {
	t.Helper()
	path := socketInFreshDir(t)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	require.NoError(t, unix.Bind(fd, &unix.SockaddrUnix{Name: path}))
	require.NoError(t, unix.Listen(fd, 0)) // a queue of one: a full one after a single caller
	earlier, err := dial(path, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = earlier.Close() })
}

func TestNameAnswerIsThePluginsNameVerbOnly(t *testing.T) {
	for _, c := range []struct {
		name   string
		binary string
		args   []string
		want   string
	}{
		{"the storage plugin's name verb", "storage", []string{"name"}, "\"storage\"\n"},
		{"the compute plugin's, with a config it does not read", "compute", []string{"--config", "/x.yaml", "name"}, "\"compute\"\n"},
		{"with the config written as one argument", "storage", []string{"--config=/x.yaml", "name"}, "\"storage\"\n"},
		{"a binary under another name", "storage-next", []string{"name"}, ""},
		{"another verb", "storage", []string{"get-metrics-description"}, ""},
		{"an argument after the verb", "storage", []string{"name", "x"}, ""},
		{"a flag it does not know", "storage", []string{"--debug", "name"}, ""},
		{"no verb", "storage", nil, ""},
		{"an empty config, which the command tree refuses", "storage", []string{"--config=", "name"}, ""},
		{"a config given twice, which the command tree refuses", "compute", []string{"--config", "/a.yaml", "-config=/b.yaml", "name"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := NameAnswer(c.binary, c.args)
			require.Equal(t, c.want != "", ok)
			require.Equal(t, c.want, got)
		})
	}
}

// Package testenv runs the plugin binaries the way eru core does, for
// behaviour tests: each binary built once per test run, a real etcd
// server started in-process on loopback, an embedded store in a temporary
// folder, and a call that writes the request on stdin, sets the working
// directory to the plugin folder and checks the exit status and the output.
package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	// The binaries under test (the plugins, and libexec/serve) are built
	// from these packages' trees at run time; importing them makes go
	// test's cache see changes to their code.
	_ "github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/internal/forward"
	_ "github.com/eru-extend/resources/serve"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/store/storetest"
	"github.com/eru-extend/resources/types"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Root is the module's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// DaemonBin is the serve daemon's binary (cmd/serve) under the folder of
// the plugin binaries, as `make build` lays them out: Bin(t, DaemonBin).
const DaemonBin = "libexec/serve"

// Bin returns the path of a plugin binary (storage or compute, or the
// daemon's, DaemonBin) built from the sources as they are. The test
// processes of one `go test ./...` share one build (storetest.RunTempDir,
// keyed by a hash of the sources): each would otherwise link the same
// binaries again. $ERU_TEST_BIN names a folder of prebuilt binaries
// instead, laid out as `make build` leaves bin/.
func Bin(t testing.TB, name string) string {
	t.Helper()
	if dir := os.Getenv("ERU_TEST_BIN"); dir != "" {
		return filepath.Join(dir, name)
	}
	buildOnce.Do(func() { binDir, buildErr = buildShared() })
	require.NoError(t, buildErr)
	return filepath.Join(binDir, name)
}

// buildShared builds the binaries into the run's folder for the sources'
// hash, unless a sibling process did; the folder's lock file makes the
// others wait for the one that builds.
func buildShared() (string, error) {
	key, err := sourcesHash(Root())
	if err != nil {
		return "", err
	}
	dir, err := storetest.RunTempDir("eru-plugin-bin-", key)
	if err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	built := filepath.Join(dir, ".built")
	if _, err := os.Stat(built); err == nil {
		return dir, nil
	}
	// The daemon's binary where `make build` puts it: `storage serve`
	// execs libexec/serve beside the binary.
	for _, build := range [][]string{
		{"-o", dir + "/", "./cmd/storage", "./cmd/compute"},
		{"-o", filepath.Join(dir, DaemonBin), "./cmd/serve"},
	} {
		cmd := exec.Command("go", append([]string{"build"}, build...)...)
		cmd.Dir = Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", strings.Join(build[2:], " "), err, out)
		}
	}
	return dir, os.WriteFile(built, nil, 0o644)
}

// sourcesHash is a hash of what the binaries are built from: go.mod,
// go.sum and every Go file of the module outside tests, testdata and the
// separate conformance module.
func sourcesHash(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "conformance") {
				return filepath.SkipDir
			}
			return nil
		}
		if name != "go.mod" && name != "go.sum" && (!strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(data))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

// Etcd is an etcd server for tests (see storetest).
type Etcd = storetest.Etcd

// SharedEtcd is one etcd server per test process.
func SharedEtcd(t testing.TB) *Etcd { return storetest.SharedEtcd(t) }

// Env is one plugin folder, configured for one store, as core would run the
// plugins in it.
type Env struct {
	Kind   string // "etcd" or "embedded"
	Dir    string // the plugin folder: the working directory of every call
	Prefix string
	Etcd   *Etcd  // nil for the embedded store
	DB     string // the embedded store's file
	extra  string
	budget time.Duration // etcd.call_timeout and embedded.lock_timeout; 0: the defaults

	daemonMu sync.Mutex // the daemon is restarted by another goroutine under ERU_TEST_SERVE=kill
	daemon   *Daemon

	// forwardable counts the calls Exec made that the Env's daemon
	// answers: a plugin verb reading a request, on the Env's own config.
	forwardable atomic.Int64
}

var prefixes atomic.Int64

// Option adjusts an Env's config file.
type Option func(*Env)

// WithConfig adds YAML lines to the config (e.g. "nodes:\n  require_session: true").
func WithConfig(yaml string) Option { return func(e *Env) { e.extra += yaml + "\n" } }

// WithBudget sets the store budget of every call (etcd.call_timeout, and
// embedded.lock_timeout on the embedded store): a suite that measures
// correctness under heavy contention on a loaded machine gives its calls
// more time than the production default, which it does not measure.
func WithBudget(d time.Duration) Option { return func(e *Env) { e.budget = d } }

// WithEtcd puts an etcd Env on server e instead of the shared one: a
// server of the test's own, or the shared one reached through a proxy
// that measures what the plugins send.
func WithEtcd(server *Etcd) Option { return func(e *Env) { e.Etcd = server } }

// NewEtcd returns an Env on the shared etcd server (unless WithEtcd names
// another), with a prefix of its own.
func NewEtcd(t testing.TB, opts ...Option) *Env {
	t.Helper()
	e := &Env{Kind: "etcd", Dir: t.TempDir(), Prefix: fmt.Sprintf("/test-%d-%d", os.Getpid(), prefixes.Add(1))}
	for _, o := range opts {
		o(e)
	}
	if e.Etcd == nil {
		e.Etcd = SharedEtcd(t)
	}
	e.writeConfig(t)
	e.serveIfAsked(t)
	return e
}

// NewEmbedded returns an Env on an embedded store in a fresh folder.
func NewEmbedded(t testing.TB, opts ...Option) *Env {
	t.Helper()
	dir := t.TempDir()
	e := &Env{Kind: "embedded", Dir: dir, Prefix: "/eru-resources", DB: filepath.Join(dir, "eru-resources.db")}
	for _, o := range opts {
		o(e)
	}
	e.writeConfig(t)
	e.serveIfAsked(t)
	return e
}

// Backends runs f once on etcd and once on the embedded store, both at
// once: each has a store of its own, and much of a behaviour test is
// waiting (a session to expire, a process to start), which the two then
// share. Under -short it runs f on one of them (ShortStore).
func Backends(t *testing.T, f func(t *testing.T, env *Env), opts ...Option) {
	pick := ShortStore(t)
	t.Run("etcd", func(t *testing.T) {
		SkipUnlessShortStore(t, pick, "etcd")
		t.Parallel()
		f(t, NewEtcd(t, opts...))
	})
	t.Run("embedded", func(t *testing.T) {
		SkipUnlessShortStore(t, pick, "embedded")
		t.Parallel()
		f(t, NewEmbedded(t, opts...))
	})
}

// BackendsInTurn is Backends one store after the other, for a suite that
// measures behaviour under contention it makes itself (many writer
// processes), which the other store's run would add to.
func BackendsInTurn(t *testing.T, f func(t *testing.T, env *Env), opts ...Option) {
	pick := ShortStore(t)
	t.Run("etcd", func(t *testing.T) {
		SkipUnlessShortStore(t, pick, "etcd")
		f(t, NewEtcd(t, opts...))
	})
	t.Run("embedded", func(t *testing.T) {
		SkipUnlessShortStore(t, pick, "embedded")
		f(t, NewEmbedded(t, opts...))
	})
}

// ShortStore is the store, "etcd" or "embedded", on which a test that runs
// on both in full runs under -short, the quick loop: the code above the
// store interface is the same on both, and the full run (make test, no
// -short) still runs every such test on each. It is picked by the test's
// name, so that a test keeps its store from run to run and the quick loop
// runs about half of these tests on each store.
func ShortStore(t testing.TB) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(t.Name()))
	if h.Sum32()%2 == 0 {
		return "etcd"
	}
	return "embedded"
}

// SkipUnlessShortStore skips t, the run of a test on store kind, under
// -short when pick (the test's ShortStore) is the other store.
func SkipUnlessShortStore(t testing.TB, pick, kind string) {
	t.Helper()
	if testing.Short() && kind != pick {
		t.Skipf("-short runs this test on the %s store only (testenv.ShortStore); the full run covers %s too", pick, kind)
	}
}

// ConfigYAML is the config file the Env's plugins read.
func (e *Env) ConfigYAML() string {
	var b strings.Builder
	if e.Etcd != nil {
		fmt.Fprintf(&b, "etcd:\n  machines: [%q]\n  prefix: %q\n", e.Etcd.Endpoint, e.Prefix)
		if e.budget > 0 {
			fmt.Fprintf(&b, "  call_timeout: %q\n", e.budget.String())
		}
	} else {
		fmt.Fprintf(&b, "embedded:\n  path: %q\n", e.DB)
		if e.budget > 0 {
			fmt.Fprintf(&b, "  lock_timeout: %q\n", e.budget.String())
		}
	}
	b.WriteString(e.extra)
	return b.String()
}

func (e *Env) writeConfig(t testing.TB) {
	t.Helper()
	for _, name := range []string{"storage.yaml", "compute.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(e.Dir, name), []byte(e.ConfigYAML()), 0o644))
	}
}

// Result is one finished call.
type Result struct {
	Stdout, Stderr string
	Code           int
	Took           time.Duration
}

// Exec runs the binary with args in the plugin folder, stdin given.
func (e *Env) Exec(t testing.TB, bin string, stdin []byte, args ...string) Result {
	t.Helper()
	if verb, explicit, ok := forward.VerbOf(args); ok && explicit == "" && !forward.NoInput(verb) {
		e.forwardable.Add(1)
	}
	res, err := Run(Bin(t, bin), e.Dir, stdin, args...)
	require.NoError(t, err, "running %s %v", bin, args)
	return res
}

// Run runs the binary at path with args in dir, stdin given, as core does
// (no config path from the environment). Only a failure to run it at all is
// an error; a non-zero exit is the Result's Code. It does not touch a
// testing.T, so it may run on any goroutine.
func Run(path, dir string, stdin []byte, args ...string) (Result, error) {
	return runWith(path, dir, stdin, nil, args...)
}

// ExecLocal is Exec with the call run by the process itself even when a
// serve daemon runs in the folder (ERU_RESOURCE_NO_FORWARD=1): for a test
// that measures what the plugin process itself sends.
func (e *Env) ExecLocal(t testing.TB, bin string, stdin []byte, args ...string) Result {
	t.Helper()
	res, err := runWith(Bin(t, bin), e.Dir, stdin, []string{"ERU_RESOURCE_NO_FORWARD=1"}, args...)
	require.NoError(t, err, "running %s %v", bin, args)
	return res
}

func runWith(path, dir string, stdin []byte, env []string, args ...string) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH="), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	res := Result{Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		if !ok {
			return res, err
		}
		res.Code = exit.ExitCode()
	}
	return res, nil
}

// Verb runs `bin verb` with req (any JSON-encodable value, or []byte taken
// as is) on stdin.
func (e *Env) Verb(t testing.TB, bin, verb string, req any) Result {
	t.Helper()
	var in []byte
	switch r := req.(type) {
	case []byte:
		in = r
	case string:
		in = []byte(r)
	default:
		var err error
		in, err = json.Marshal(req)
		require.NoError(t, err)
	}
	return e.Exec(t, bin, in, verb)
}

// Call runs a verb that must succeed the way core needs it to: exit 0,
// nothing on stderr, one JSON value on stdout, which it decodes into out
// (when out is not nil) and returns raw.
func (e *Env) Call(t testing.TB, bin, verb string, req any, out any) json.RawMessage {
	t.Helper()
	res := e.Verb(t, bin, verb, req)
	require.Equal(t, 0, res.Code, "%s %s failed: %s", bin, verb, res.Stderr)
	require.Empty(t, res.Stderr, "%s %s wrote to stderr", bin, verb)
	raw := json.RawMessage(strings.TrimSpace(res.Stdout))
	require.True(t, json.Valid(raw), "%s %s printed no JSON: %q", bin, verb, res.Stdout)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out))
	}
	return raw
}

// Fail runs a verb that must fail as a plugin verb does: exit 128, nothing
// on stdout, one line on stderr naming the binary and verb; it returns that
// line.
func (e *Env) Fail(t testing.TB, bin, verb string, req any) string {
	t.Helper()
	res := e.Verb(t, bin, verb, req)
	require.Equal(t, 128, res.Code, "%s %s should fail, printed %s %s", bin, verb, res.Stdout, res.Stderr)
	require.Empty(t, res.Stdout)
	line := strings.TrimSuffix(res.Stderr, "\n")
	require.NotContains(t, line, "\n", "the error must be one line")
	require.True(t, strings.HasPrefix(line, bin+": "+verb+": "), "error line %q", line)
	return line
}

// Op runs an operator command; it returns the result for the caller to
// check.
func (e *Env) Op(t testing.TB, bin string, args ...string) Result {
	t.Helper()
	return e.Exec(t, bin, nil, args...)
}

// OpOK runs an operator command that must succeed and decodes its JSON.
func (e *Env) OpOK(t testing.TB, bin string, out any, args ...string) json.RawMessage {
	t.Helper()
	res := e.Op(t, bin, args...)
	require.Equal(t, 0, res.Code, "%s %v failed: %s", bin, args, res.Stderr)
	require.Empty(t, res.Stderr)
	raw := json.RawMessage(strings.TrimSpace(res.Stdout))
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s", res.Stdout)
	}
	return raw
}

// Dump reads every key of the Env's store, for asserting that a refused
// call wrote nothing. Keys that expire on their own are left out: sessions,
// and the guards etcd writes bind to a short lease.
func (e *Env) Dump(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	defer func() {
		for k := range out {
			if strings.HasPrefix(k, "/sessions/") || strings.HasPrefix(k, "/guards/") {
				delete(out, k)
			}
		}
	}()
	if e.Etcd != nil {
		resp, err := e.Etcd.Client(t).Get(context.Background(), e.Prefix+"/", clientv3.WithPrefix())
		require.NoError(t, err)
		for _, kv := range resp.Kvs {
			out[strings.TrimPrefix(string(kv.Key), e.Prefix)] = string(kv.Value)
		}
		return out
	}
	s, err := boltstore.Open(e.DB, boltstore.Options{Prefix: e.Prefix, ReadOnly: true, LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	snap, err := s.Read(context.Background(), nil, []string{"/"})
	require.NoError(t, err)
	for k, it := range snap.Items {
		out[k] = string(it.Value)
	}
	return out
}

// Keys lists a dump's keys in order.
func Keys(dump map[string]string) []string { return types.SortedKeys(dump) }

// Record decodes the stored value of key into out and reports whether it
// exists.
func (e *Env) Record(t testing.TB, key string, out any) bool {
	t.Helper()
	v, ok := e.Dump(t)[key]
	if ok && out != nil {
		require.NoError(t, json.Unmarshal([]byte(v), out))
	}
	return ok
}

// Put writes a raw value under key, as a broken or foreign writer would.
func (e *Env) Put(t testing.TB, key, value string) {
	t.Helper()
	if e.Etcd != nil {
		_, err := e.Etcd.Client(t).Put(context.Background(), e.Prefix+key, value)
		require.NoError(t, err)
		return
	}
	s, err := boltstore.Open(e.DB, boltstore.Options{Prefix: e.Prefix, Create: true, LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Txn(context.Background(), nil, []store.Op{{Key: key, Value: []byte(value)}}))
}

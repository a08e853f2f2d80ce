package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eru-extend/resources/conformance/internal/etcdtest"
	"github.com/eru-extend/resources/conformance/internal/gobuild"
	"github.com/projecteru2/core/resource/cobalt"
	"github.com/projecteru2/core/resource/plugins"
	"github.com/projecteru2/core/resource/plugins/binary"
	coretypes "github.com/projecteru2/core/types"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// What an operator would configure, and what the plugins default to.
const (
	// callTimeout is core's resource_plugin.call_timeout: what an operator
	// would set, with room for a busy CI machine.
	callTimeout = 10 * time.Second
	// failFast bounds a call the plugin must give up by itself: its etcd
	// dial timeout (2 s by default) and a margin.
	failFast = 4 * time.Second
	// maxDeploy is scheduler.max_deploy_count, left at its default in
	// the plugins' config and set to the same value in core's.
	maxDeploy = 10000

	GiB = int64(1) << 30
	TiB = int64(1) << 40
)

// resourceNames are the plugin binaries, installed under the names core
// will know them by.
var resourceNames = gobuild.Resources

// suite is what every test shares: the freshly built binaries and one etcd
// server. Tests keep apart by their own plugin folder and etcd prefix.
type suite struct {
	binDir   string
	endpoint string
	client   *clientv3.Client
}

var (
	setupOnce sync.Once
	shared    *suite
	setupErr  error
	tmpRoot   string
	server    *etcdtest.Server
	envCount  atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	teardown()
	os.Exit(code)
}

// theSuite builds the binaries and starts etcd once per test process. A
// failed build or an etcd that does not start fails every test that needs
// them, with the reason; nothing is skipped.
func theSuite(t *testing.T) *suite {
	t.Helper()
	setupOnce.Do(func() { shared, setupErr = setup() })
	require.NoError(t, setupErr, "conformance suite setup")
	return shared
}

func setup() (*suite, error) {
	var err error
	if tmpRoot, err = os.MkdirTemp("", "eru-conformance-"); err != nil {
		return nil, err
	}
	binDir := filepath.Join(tmpRoot, "bin")
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := gobuild.RepoRoot(wd)
	if err != nil {
		return nil, err
	}
	if err := gobuild.Plugins(root, binDir); err != nil {
		return nil, err
	}
	if serving() {
		if err := gobuild.Front(root, filepath.Join(binDir, frontName)); err != nil {
			return nil, err
		}
	}
	if server, err = etcdtest.Start(filepath.Join(tmpRoot, "etcd")); err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", server.Endpoint, err)
	}
	return &suite{binDir: binDir, endpoint: server.Endpoint, client: client}, nil
}

func teardown() {
	if shared != nil && shared.client != nil {
		_ = shared.client.Close()
	}
	if server != nil {
		server.Stop()
	}
	if tmpRoot != "" {
		_ = os.RemoveAll(tmpRoot)
	}
}

// freePort is a loopback port nothing listens on (at the moment).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// env is one test's plugin folder and etcd prefix, seen the way core sees
// them.
type env struct {
	suite  *suite
	dir    string
	prefix string
	config coretypes.Config
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

// newEnv installs the binaries into a fresh plugin folder under their
// resource names, writes their config files naming the suite's etcd and a
// prefix of this test's own, and builds the core config an operator would
// write for that folder.
func newEnv(t *testing.T) *env {
	t.Helper()
	s := theSuite(t)
	n := envCount.Add(1)
	prefix := fmt.Sprintf("/conformance-%d-%s", n, strings.Trim(nonWord.ReplaceAllString(t.Name(), "-"), "-"))
	e := &env{suite: s, dir: t.TempDir(), prefix: prefix}
	for _, name := range resourceNames {
		e.installBinary(t, name)
		e.writeConfig(t, name, s.endpoint)
	}
	if serving() {
		e.serve(t)
	}
	e.config = coretypes.Config{
		GlobalTimeout: time.Minute,
		Etcd: coretypes.EtcdConfig{
			Machines:   []string{s.endpoint},
			Prefix:     prefix + "/core",
			LockPrefix: "__lock__" + prefix,
		},
		Scheduler: coretypes.SchedulerConfig{MaxShare: -1, ShareBase: 100, MaxDeployCount: maxDeploy},
		ResourcePlugin: coretypes.ResourcePluginConfig{
			Dir:         e.dir,
			CallTimeout: callTimeout,
		},
	}
	return e
}

// writeConfig writes <name>.yaml into the plugin folder, the file the
// plugin finds in its working directory.
func (e *env) writeConfig(t *testing.T, name string, endpoints ...string) {
	t.Helper()
	quoted := make([]string, len(endpoints))
	for i, ep := range endpoints {
		quoted[i] = fmt.Sprintf("%q", ep)
	}
	yaml := fmt.Sprintf("etcd:\n  machines: [%s]\n  prefix: %q\n", strings.Join(quoted, ", "), e.prefix)
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, name+".yaml"), []byte(yaml), 0o644))
}

// install puts an executable copy of src at dst: a hard link when the
// file system allows, else a copy.
func install(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Link(src, dst); err == nil {
		return
	}
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, data, 0o755))
}

// plugin is core's binary plugin client for one of our binaries, exactly
// as core's resource manager would create it.
func (e *env) plugin(t *testing.T, name string) plugins.Plugin {
	t.Helper()
	p, err := binary.NewPlugin(t.Context(), filepath.Join(e.dir, name), e.config)
	require.NoError(t, err)
	require.Equal(t, name, p.Name(), "core names a binary plugin after its file")
	return p
}

// manager is core's resource manager loading its built-in cpumem plugin
// and every executable in the plugin folder.
func (e *env) manager(t *testing.T) *cobalt.Manager {
	t.Helper()
	m, err := cobalt.New(e.config)
	require.NoError(t, err)
	require.NoError(t, m.LoadPlugins(t.Context(), nil))
	return m
}

// record reads the plugin's stored record of a node straight from etcd:
// its JSON value, its key's version (0 when absent).
func (e *env) record(t *testing.T, resource, node string) (map[string]any, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := e.suite.client.Get(ctx, e.prefix+"/resource/"+resource+"/"+node)
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return nil, 0
	}
	var v map[string]any
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &v), "stored record of %s/%s", resource, node)
	return v, resp.Kvs[0].Version
}

// run execs a binary the way core does (working directory the plugin
// folder, request on stdin) but keeps stdout, stderr and the exit status
// apart, so tests can check the output discipline core relies on.
func (e *env) run(t *testing.T, name, verb string, stdin []byte) (stdout, stderr string, code int) {
	t.Helper()
	return e.command(t, name, []string{verb}, stdin)
}

// command runs a binary with any arguments (an operator command, say) in
// the plugin folder.
func (e *env) command(t *testing.T, name string, args []string, stdin []byte) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code, err := e.exec(t.Context(), e.config.ResourcePlugin.CallTimeout, name, args, stdin)
	require.NoError(t, err)
	return stdout, stderr, code
}

// exec runs a binary in the plugin folder, bounded by timeout; it may be
// called from any goroutine. A non-zero exit is a code, not an error.
func (e *env) exec(ctx context.Context, timeout time.Duration, name string, args []string, stdin []byte) (stdout, stderr string, code int, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.dir, name), args...)
	cmd.Dir = e.dir
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return "", "", 0, fmt.Errorf("%s %v did not finish within %s", name, args, timeout)
	}
	var exitErr *exec.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exitErr):
		code = exitErr.ExitCode()
	default:
		return "", "", 0, fmt.Errorf("running %s %v: %w", name, args, runErr)
	}
	return out.String(), errOut.String(), code, nil
}

// exitCode is the plugin's exit status carried by an error core returns.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exitErr *exec.ExitError
	require.True(t, errors.As(err, &exitErr), "core's error should be the plugin's failed exit, got %T: %v", err, err)
	return exitErr.ExitCode()
}

// mustJSON is v as JSON, for comparing answers with require.JSONEq.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// number reads a JSON number core decoded into an interface value.
func number(t *testing.T, v any) float64 {
	t.Helper()
	f, ok := v.(float64)
	require.True(t, ok, "want a JSON number, got %T %v", v, v)
	return f
}

// object reads a JSON object core decoded into an interface value.
func object(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "want a JSON object, got %T %v", v, v)
	return m
}

// list reads a JSON array core decoded into an interface value.
func list(t *testing.T, v any) []any {
	t.Helper()
	l, ok := v.([]any)
	require.True(t, ok, "want a JSON array, got %T %v", v, v)
	return l
}

// strs reads a JSON array of strings.
func strs(t *testing.T, v any) []string {
	t.Helper()
	out := []string{}
	for _, item := range list(t, v) {
		s, ok := item.(string)
		require.True(t, ok, "want a string, got %T %v", item, item)
		out = append(out, s)
	}
	return out
}

// keys are a map's keys.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

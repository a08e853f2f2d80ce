package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "github.com/projecteru2/core/rpc/gen"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/eru-extend/resources/conformance/internal/etcdtest"
	"github.com/eru-extend/resources/conformance/internal/gobuild"
)

const (
	// pluginPrefix is where both plugins keep their records in etcd.
	pluginPrefix = "/e2e/resources"
	// corePrefix is where core keeps pods, nodes and workloads.
	corePrefix = "/e2e/core"
	// callTimeout is core's resource_plugin.call_timeout: room for a
	// loaded CI machine.
	callTimeout = 30 * time.Second
	// rpcTimeout bounds one gRPC call of the suite.
	rpcTimeout = 2 * time.Minute

	GiB = int64(1) << 30
)

// cluster is etcd, the plugins and one eru core server, shared by the
// tests of this package (they keep apart by pod and node names, and run one
// at a time).
type cluster struct {
	dir        string
	pluginDir  string
	configPath string
	corePath   string
	grpcAddr   string
	metricsURL string
	etcd       *etcdtest.Server
	kv         *clientv3.Client

	core   *exec.Cmd
	exited chan struct{}
	conn   *grpc.ClientConn
	rpc    pb.CoreRPCClient
}

var (
	setupOnce sync.Once
	shared    *cluster
	setupErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.close()
	}
	os.Exit(code)
}

// theCluster sets everything up once per test process; a failed setup
// fails every test with the reason. Nothing is skipped.
func theCluster(t *testing.T) *cluster {
	t.Helper()
	setupOnce.Do(func() {
		shared, setupErr = setup()
		if setupErr != nil && shared != nil {
			shared.close()
			shared = nil
		}
	})
	require.NoError(t, setupErr, "e2e setup")
	return shared
}

func setup() (*cluster, error) {
	dir, err := os.MkdirTemp("", "eru-e2e-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, pluginDir: filepath.Join(dir, "plugins"), configPath: filepath.Join(dir, "core.yaml")}

	wd, err := os.Getwd()
	if err != nil {
		return c, err
	}
	version, err := gobuild.CoreVersion(wd)
	if err != nil {
		return c, err
	}
	cache, err := coreCacheDir()
	if err != nil {
		return c, err
	}
	start := time.Now()
	var built bool
	if c.corePath, built, err = gobuild.Core(cache, version); err != nil {
		return c, err
	}
	if built {
		fmt.Fprintf(os.Stderr, "e2e: built eru core %s in %s, cached at %s\n", version, time.Since(start).Round(time.Second), c.corePath)
	}

	root, err := gobuild.RepoRoot(wd)
	if err != nil {
		return c, err
	}
	if err := gobuild.Plugins(root, c.pluginDir); err != nil {
		return c, err
	}

	if c.etcd, err = etcdtest.Start(filepath.Join(dir, "etcd")); err != nil {
		return c, err
	}
	if c.kv, err = clientv3.New(clientv3.Config{Endpoints: []string{c.etcd.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
		return c, fmt.Errorf("etcd client: %w", err)
	}

	for _, name := range gobuild.Resources {
		// not executable: core loads every executable file of the folder
		// as a plugin
		if err := os.WriteFile(filepath.Join(c.pluginDir, name+".yaml"), []byte(pluginConfig(c.etcd.Endpoint)), 0o644); err != nil {
			return c, err
		}
	}
	grpcPort, err := freePort()
	if err != nil {
		return c, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return c, err
	}
	c.grpcAddr = fmt.Sprintf("127.0.0.1:%d", grpcPort)
	c.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	config := coreConfig(c.grpcAddr, fmt.Sprintf("127.0.0.1:%d", metricsPort), c.etcd.Endpoint, c.pluginDir, filepath.Join(dir, "core.wal"))
	if err := os.WriteFile(c.configPath, []byte(config), 0o644); err != nil {
		return c, err
	}

	if c.conn, err = grpc.Dial(c.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return c, fmt.Errorf("gRPC client for %s: %w", c.grpcAddr, err)
	}
	c.rpc = pb.NewCoreRPCClient(c.conn)
	return c, c.startCore()
}

// coreCacheDir is where core's build is kept between runs: the user's
// cache folder, or the temporary folder when there is none (no $HOME).
func coreCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "eru-resources-e2e")
	return dir, os.MkdirAll(dir, 0o755)
}

// pluginConfig is storage.yaml and compute.yaml: both plugins on the
// suite's etcd, under one prefix.
func pluginConfig(endpoint string) string {
	return fmt.Sprintf("etcd:\n  machines: [%q]\n  prefix: %q\n", endpoint, pluginPrefix)
}

// coreConfig is core.yaml: store and locks in etcd, no redis, the plugins'
// folder, gRPC and Prometheus on loopback.
func coreConfig(bind, profile, etcdEndpoint, pluginDir, wal string) string {
	return fmt.Sprintf(`log_level: INFO
bind: %q
profile: %q
lock_timeout: 30s
global_timeout: 120s
connection_timeout: 5s
ha_keepalive_interval: 16s
probe_target: "127.0.0.1:53"
store: etcd
wal_file: %q
etcd:
  machines: [%q]
  prefix: %q
  lock_prefix: "__lock__%s"
scheduler:
  maxshare: -1
  sharebase: 100
  max_deploy_count: 10000
resource_plugin:
  dir: %q
  call_timeout: %s
`, bind, profile, wal, etcdEndpoint, corePrefix, corePrefix, pluginDir, callTimeout)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startCore starts core's server and waits until it answers Info.
func (c *cluster) startCore() error {
	logFile, err := os.OpenFile(filepath.Join(c.dir, "core.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(c.corePath, "--config", c.configPath)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// should the test process die first, the kernel ends core with it
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting eru core: %w", err)
	}
	c.core, c.exited = cmd, make(chan struct{})
	exited := c.exited
	go func() { _ = cmd.Wait(); close(exited) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("eru core exited before serving: %s", c.coreLogTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.rpc.Info(ctx, &pb.Empty{})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("eru core did not serve on %s within 60s: %v: %s", c.grpcAddr, err, c.coreLogTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopCore stops core as an operator does (SIGTERM: it finishes what it is
// doing), for sure after 30 seconds.
func (c *cluster) stopCore() {
	if c.core == nil {
		return
	}
	_ = c.core.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.core.Process.Kill()
		<-c.exited
	}
	c.core = nil
}

func (c *cluster) close() {
	c.stopCore()
	if c.conn != nil {
		_ = c.conn.Close()
	}
	if c.kv != nil {
		_ = c.kv.Close()
	}
	if c.etcd != nil {
		c.etcd.Stop()
	}
	if os.Getenv("ERU_E2E_KEEP") == "" {
		_ = os.RemoveAll(c.dir)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: kept %s\n", c.dir)
	}
}

func (c *cluster) coreLogTail() string {
	data, _ := os.ReadFile(filepath.Join(c.dir, "core.log"))
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}

// ctx is a context for one gRPC call of a test.
func ctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), rpcTimeout)
	t.Cleanup(cancel)
	return ctx
}

// step runs one step of a story; a failed step ends the story, since the
// next ones build on it.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// res is the resources map of a gRPC request: each plugin's request as
// JSON under its name.
type res map[string]any

func (r res) pb(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, v := range r {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out[name] = b
	}
	return out
}

func (c *cluster) addPod(t *testing.T, pod string) {
	t.Helper()
	_, err := c.rpc.AddPod(ctx(t), &pb.AddPodOptions{Name: pod, Desc: "e2e"})
	require.NoError(t, err, "add pod %s", pod)
}

// addNode adds a node with a mock:// endpoint. Test nodes count as alive
// without an agent's heartbeat.
func (c *cluster) addNode(t *testing.T, pod, node string, r res) (*pb.Node, error) {
	t.Helper()
	return c.rpc.AddNode(ctx(t), &pb.AddNodeOptions{
		Nodename: node, Endpoint: "mock://" + node, Podname: pod, Test: true, Resources: r.pb(t),
	})
}

// deploy creates count workloads through core and returns what core
// streamed back, one message per workload.
func (c *cluster) deploy(t *testing.T, app, pod string, nodes []string, count int, r res) []*pb.CreateWorkloadMessage {
	t.Helper()
	return c.deployWith(t, pb.DeployOptions_AUTO, app, pod, nodes, count, r)
}

// deployWith deploys with one of core's strategies (EACH: count on every
// node).
func (c *cluster) deployWith(t *testing.T, strategy pb.DeployOptions_Strategy, app, pod string, nodes []string, count int, r res) []*pb.CreateWorkloadMessage {
	t.Helper()
	stream, err := c.rpc.CreateWorkload(ctx(t), &pb.DeployOptions{
		DeployStrategy: strategy,
		Name:           app,
		Entrypoint:     &pb.EntrypointOptions{Name: "web", Commands: []string{"sleep", "infinity"}},
		Podname:        pod,
		Nodenames:      nodes,
		Image:          "mock-image",
		Count:          int32(count),
		Resources:      r.pb(t),
	})
	require.NoError(t, err)
	var msgs []*pb.CreateWorkloadMessage
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return msgs
		}
		require.NoError(t, err, "deploy %s", app)
		msgs = append(msgs, m)
	}
}

// spread deploys perNode workloads on every node, with core's EACH
// strategy and a count of 1 per call: each call creates one workload per
// node, in parallel across nodes. Two creates on one node at once are
// avoided on purpose: core's fake engine (mock://) hands out a workload ID
// from a variable its concurrent creates share, so two of them can get the
// same ID, and core's store then keeps one workload where the plugins
// (rightly) charged two.
func (c *cluster) spread(t *testing.T, app, pod string, nodes []string, perNode int, r res) []*pb.CreateWorkloadMessage {
	t.Helper()
	var all []*pb.CreateWorkloadMessage
	for range perNode {
		msgs := c.deployWith(t, pb.DeployOptions_EACH, app, pod, nodes, 1, r)
		require.Len(t, msgs, len(nodes), "one workload per node")
		for _, m := range msgs {
			require.True(t, m.Success, "workload on %s: %s", m.Nodename, m.Error)
		}
		all = append(all, msgs...)
	}
	seen := map[string]bool{}
	for _, m := range all {
		require.False(t, seen[m.Id], "core handed out workload ID %s twice", m.Id)
		seen[m.Id] = true
	}
	return all
}

// deployOK deploys and requires every workload to be created; it returns
// their ids.
func (c *cluster) deployOK(t *testing.T, app, pod string, nodes []string, count int, r res) []*pb.CreateWorkloadMessage {
	t.Helper()
	msgs := c.deploy(t, app, pod, nodes, count, r)
	require.Len(t, msgs, count, "one message per workload")
	for _, m := range msgs {
		require.True(t, m.Success, "workload on %s: %s", m.Nodename, m.Error)
		require.NotEmpty(t, m.Id)
	}
	return msgs
}

func (c *cluster) realloc(t *testing.T, id string, r res) error {
	t.Helper()
	_, err := c.rpc.ReallocResource(ctx(t), &pb.ReallocOptions{Id: id, Resources: r.pb(t)})
	return err
}

// remove removes workloads and requires core to report each removed.
func (c *cluster) remove(t *testing.T, ids ...string) {
	t.Helper()
	stream, err := c.rpc.RemoveWorkload(ctx(t), &pb.RemoveWorkloadOptions{IDs: ids})
	require.NoError(t, err)
	removed := map[string]bool{}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.True(t, m.Success, "remove %s: %s", m.Id, m.Hook)
		removed[m.Id] = true
	}
	for _, id := range ids {
		require.True(t, removed[id], "core reported no removal of %s", id)
	}
}

// nodeResource is core's GetNodeResource: each plugin's capacity and usage
// of the node, and every disagreement between usage and the workloads.
type nodeResource struct {
	Capacity map[string]json.RawMessage
	Usage    map[string]json.RawMessage
	Diffs    []string
}

func (c *cluster) nodeResource(t *testing.T, node string, fix bool) nodeResource {
	t.Helper()
	r, err := c.rpc.GetNodeResource(ctx(t), &pb.GetNodeResourceOptions{Opts: &pb.GetNodeOptions{Nodename: node}, Fix: fix})
	require.NoError(t, err, "get node resource %s", node)
	out := nodeResource{Diffs: r.Diffs}
	require.NoError(t, json.Unmarshal([]byte(r.ResourceCapacity), &out.Capacity), r.ResourceCapacity)
	require.NoError(t, json.Unmarshal([]byte(r.ResourceUsage), &out.Usage), r.ResourceUsage)
	return out
}

// capacity is core's CalculateCapacity of a deploy request over nodes:
// how many workloads each node takes (the DUMMY strategy, as eru-cli's
// capacity command asks; any other strategy answers one deploy's plan).
func (c *cluster) capacity(t *testing.T, pod string, nodes []string, r res) (*pb.CapacityMessage, error) {
	t.Helper()
	return c.rpc.CalculateCapacity(ctx(t), &pb.DeployOptions{
		Name: "capacity", Entrypoint: &pb.EntrypointOptions{Name: "web", Commands: []string{"true"}},
		Podname: pod, Nodenames: nodes, Image: "mock-image", Count: 1, Resources: r.pb(t),
		DeployStrategy: pb.DeployOptions_DUMMY,
	})
}

// capacities is the capacity of each node, which must be some.
func (c *cluster) capacities(t *testing.T, pod string, nodes []string, r res) map[string]int64 {
	t.Helper()
	msg, err := c.capacity(t, pod, nodes, r)
	require.NoError(t, err)
	var total int64
	for _, n := range msg.NodeCapacities {
		total += n
	}
	require.Equal(t, total, msg.Total)
	return msg.NodeCapacities
}

// workloads lists a node's workloads with each one's stored resources.
func (c *cluster) workloads(t *testing.T, node string) []*pb.Workload {
	t.Helper()
	ws, err := c.rpc.ListNodeWorkloads(ctx(t), &pb.GetNodeOptions{Nodename: node})
	require.NoError(t, err)
	return ws.Workloads
}

// keys lists every key under prefix in etcd.
func (c *cluster) keys(t *testing.T, prefix string) []string {
	t.Helper()
	resp, err := c.kv.Get(ctx(t), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	out := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// operatorResult runs one of the plugins' operator commands in the plugin
// folder, as an operator on the core host would; a failed command's error
// carries its stderr.
func (c *cluster) operatorResult(t *testing.T, binary string, args ...string) (string, error) {
	t.Helper()
	cctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(c.pluginDir, binary), args...)
	cmd.Dir = c.pluginDir
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return string(out), fmt.Errorf("%s %s: %w: %s", binary, strings.Join(args, " "), err, exitErr.Stderr)
	}
	return string(out), err
}

// operator runs an operator command that must succeed; it returns stdout.
func (c *cluster) operator(t *testing.T, binary string, args ...string) string {
	t.Helper()
	out, err := c.operatorResult(t, binary, args...)
	require.NoError(t, err)
	return out
}

// metrics scrapes core's Prometheus endpoint.
func (c *cluster) metrics(t *testing.T) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, c.metricsURL, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return string(body)
}

package chaos_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/eru-extend/resources/tests/chaos/etcdmember"
)

// memberEnv, set to 1 in a process of this test binary, makes it an etcd
// member (TestMain) instead of running the tests.
const memberEnv = "ERU_CHAOS_ETCD_MEMBER"

// TestMain lets the test binary double as the etcd member launcher: each
// member is this same executable started with memberEnv, which saves
// linking a second binary that carries all of etcd on every run.
func TestMain(m *testing.M) {
	if os.Getenv(memberEnv) == "1" {
		if err := etcdmember.Run(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "etcdmember:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// memberBin is the etcd member launcher: this test binary.
func memberBin(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	return bin
}

// member is one etcd process of the cluster.
type member struct {
	name, dir, client, peer string
	cluster                 string // the -cluster flag

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// cluster is three etcd members, each a process of its own, on loopback.
type cluster struct {
	bin     string
	members []*member
	admin   *clientv3.Client // straight to the members, for the test's own reads
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCluster starts three members and waits until they have a leader.
func startCluster(t *testing.T, bin, dir string) *cluster {
	t.Helper()
	c := &cluster{bin: bin}
	var initial []string
	for i := range 3 {
		m := &member{
			name:   fmt.Sprintf("m%d", i+1),
			dir:    filepath.Join(dir, fmt.Sprintf("m%d", i+1)),
			client: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			peer:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		}
		require.NoError(t, os.MkdirAll(m.dir, 0o755))
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer)
	}
	for _, m := range c.members {
		m.cluster = strings.Join(initial, ",")
		require.NoError(t, c.start(m))
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.kill(m)
		}
	})
	var endpoints []string
	for _, m := range c.members {
		endpoints = append(endpoints, m.client)
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	c.admin = admin
	require.Eventually(t, func() bool { return c.leader() != nil }, 60*time.Second, 200*time.Millisecond, "the cluster elects a leader")
	return c
}

// start starts m's process (again, after a kill: its data folder makes it
// rejoin the cluster).
func (c *cluster) start(m *member) error {
	cmd := exec.Command(c.bin, "-name", m.name, "-dir", m.dir, "-client", m.client, "-peer", m.peer, "-cluster", m.cluster)
	cmd.Env = append(os.Environ(), memberEnv+"=1")
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	m.mu.Lock()
	m.cmd, m.exited, m.paused = cmd, exited, false
	m.mu.Unlock()
	return nil
}

// kill SIGKILLs the member (waking it first if stopped) and waits for it to
// be gone.
func (c *cluster) kill(m *member) {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	<-exited
}

// pause SIGSTOPs the member; resume SIGCONTs it.
func (c *cluster) pause(m *member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.cmd.Process.Signal(syscall.SIGSTOP)
	m.paused = true
}

func (c *cluster) resume(m *member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.cmd.Process.Signal(syscall.SIGCONT)
	m.paused = false
}

// leader is the member the others follow, nil when none answers as leader.
func (c *cluster) leader() *member {
	for _, m := range c.members {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		st, err := c.admin.Status(ctx, m.client)
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return m
		}
	}
	return nil
}

// get reads key from the cluster, retrying through elections and stopped
// members, for up to a minute.
func (c *cluster) get(key string) ([]byte, error) {
	var last error
	for start := time.Now(); time.Since(start) < time.Minute; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := c.admin.Get(ctx, key)
		cancel()
		if err == nil {
			if len(resp.Kvs) == 0 {
				return nil, nil
			}
			return resp.Kvs[0].Value, nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("reading %s: %w", key, last)
}

package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// served is a plugin folder installed as docs/serve.md describes — the
// small front (cmd/forwarder) as storage, the full binary in libexec/ —
// beside a cluster's folder, on the same etcd prefix, with `storage serve`
// running in it: every call made there is forwarded.
type served struct {
	dir    string
	front  string // <dir>/storage
	daemon *exec.Cmd
	log    *os.File
	done   chan struct{}
	once   sync.Once
}

// frontName is where `make front` leaves the front beside the binaries.
const frontName = "front/storage"

// serve installs the front and the full binary for cluster c in a folder
// of their own and starts the daemon there. It returns nil, nil when there
// is no front beside the binaries (make front builds it).
func (b *bench) serve(c *cluster) (*served, error) {
	front := filepath.Join(filepath.Dir(b.storage), frontName)
	if _, err := os.Stat(front); err != nil {
		return nil, nil
	}
	s := &served{dir: c.dir + "-served", done: make(chan struct{})}
	s.front = filepath.Join(s.dir, "storage")
	if err := os.MkdirAll(filepath.Join(s.dir, "libexec"), 0o755); err != nil {
		return nil, err
	}
	for _, link := range [][2]string{{front, s.front}, {b.storage, filepath.Join(s.dir, "libexec", "storage")}} {
		if err := os.Symlink(link[0], link[1]); err != nil {
			return nil, err
		}
	}
	config, err := os.ReadFile(filepath.Join(c.dir, "storage.yaml"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "storage.yaml"), config, 0o644); err != nil {
		return nil, err
	}
	if s.log, err = os.Create(filepath.Join(b.tmp, "serve.log")); err != nil {
		return nil, err
	}
	s.daemon = exec.Command(b.storage, "serve")
	s.daemon.Dir = s.dir
	s.daemon.Env = pluginEnv()
	s.daemon.Stderr = s.log
	if err := s.daemon.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.daemon.Wait(); close(s.done) }()
	sock := filepath.Join(s.dir, "eru-resources.sock")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if conn, err := net.Dial("unix", sock); err == nil {
			_ = conn.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("storage serve exited at start; see %s", s.log.Name())
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("storage serve did not listen in 30s; see %s", s.log.Name())
		}
	}
}

var answeredRe = regexp.MustCompile(`"answered":(\d+)`)

// stop ends the daemon (SIGTERM) and returns how many calls it answered;
// it may be called again (the deferred call after a run's own).
func (s *served) stop() (int, error) {
	s.once.Do(func() {
		_ = s.daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			_ = s.daemon.Process.Kill()
			<-s.done
		}
		_ = s.log.Close()
	})
	data, err := os.ReadFile(s.log.Name())
	if err != nil {
		return 0, err
	}
	m := answeredRe.FindSubmatch(data)
	if m == nil {
		return 0, fmt.Errorf("storage serve did not say how many calls it answered; see %s", s.log.Name())
	}
	return strconv.Atoi(string(m[1]))
}

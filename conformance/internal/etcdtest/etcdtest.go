// Package etcdtest runs a real etcd server inside the test process, on
// loopback ports the kernel picks, so the suites of this module need no etcd
// installed. It is the etcd release core's pinned client is built against.
package etcdtest

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Server is one running etcd.
type Server struct {
	// Endpoint is the client URL, e.g. http://127.0.0.1:40123.
	Endpoint string
	dir      string
	etcd     *embed.Etcd
}

// Start starts an etcd server keeping its data and log under dir and waits
// until it serves, at most 30 seconds.
func Start(dir string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd folder %s: %w", dir, err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = filepath.Join(dir, "data")
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	client, _ := url.Parse("http://127.0.0.1:0")
	peer, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd in %s failed before serving: %w", dir, err)
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd in %s did not serve within 30s (log: %s)", dir, cfg.LogOutputs[0])
	}
	return &Server{Endpoint: "http://" + e.Clients[0].Addr().String(), dir: dir, etcd: e}, nil
}

// Stop stops the server and waits for it to finish.
func (s *Server) Stop() { s.etcd.Close() }

// LogTail is the end of the server's log, for failure messages.
func (s *Server) LogTail() string {
	data, _ := os.ReadFile(filepath.Join(s.dir, "etcd.log"))
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}

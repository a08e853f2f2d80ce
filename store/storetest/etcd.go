// Package storetest holds what tests of stores need: a real etcd server
// started in-process on loopback, and the contract every store.Store
// implementation must meet, as a suite each implementation runs.
package storetest

import (
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/store/etcdwatch"
)

// The limits of one transaction on a default etcd server (--max-txn-ops,
// --max-request-bytes), which every test server enforces.
const (
	MaxTxnOps       = etcdstore.MaxTxnOps
	MaxRequestBytes = 1536 * 1024
)

// Etcd is an etcd server for tests.
type Etcd struct {
	Endpoint string
	Dir      string
	server   *embed.Etcd
}

var (
	etcdOnce   sync.Once
	sharedEtcd *Etcd
	etcdErr    error
)

// SharedEtcd is one etcd server per test process; tests keep apart by
// using their own key prefix.
func SharedEtcd(t testing.TB) *Etcd {
	t.Helper()
	etcdOnce.Do(func() {
		dir, err := ProcessTempDir("eru-test-etcd-")
		if err != nil {
			etcdErr = err
			return
		}
		sharedEtcd, etcdErr = StartEtcd(dir, nil)
	})
	require.NoError(t, etcdErr)
	return sharedEtcd
}

// StartEtcd starts an etcd server with its data in dir on free loopback
// ports; tune may adjust the configuration (TLS, auth, ...) before it
// starts.
func StartEtcd(dir string, tune func(*embed.Config)) (*Etcd, error) {
	etcdwatch.QuietGRPC()
	cfg := embed.NewConfig()
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
	// etcd's own limits per transaction, pinned so that a write above them
	// fails here as it would on a default server.
	cfg.MaxTxnOps = MaxTxnOps
	cfg.MaxRequestBytes = MaxRequestBytes
	if tune != nil {
		tune(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd did not start in 20s")
	}
	scheme := "http"
	if !cfg.ClientTLSInfo.Empty() {
		scheme = "https"
	}
	return &Etcd{Endpoint: scheme + "://" + e.Clients[0].Addr().String(), Dir: dir, server: e}, nil
}

// Stop stops the server.
func (e *Etcd) Stop() { e.server.Close() }

// Client returns a plain client of the server, closed with the test.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

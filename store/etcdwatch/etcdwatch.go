// Package etcdwatch makes a clientv3 client of the store's etcd
// configuration, for what the store's own client does not do: the serve
// daemon's watch (a stream), its progress requests and the revision check
// of its linearizable reads. It is the daemon's alone: a plugin process
// links no grpc (see store/etcdstore).
package etcdwatch

import (
	"os"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/grpclog"

	"github.com/eru-extend/resources/store/etcdstore"
)

// Dial makes a client of cfg; it connects lazily (with a user name, it
// authenticates within the dial timeout first).
func Dial(cfg etcdstore.Config) (*clientv3.Client, error) {
	ccfg := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
	}
	if cfg.CA != "" || cfg.Cert != "" || cfg.Key != "" {
		info := transport.TLSInfo{CertFile: cfg.Cert, KeyFile: cfg.Key, TrustedCAFile: cfg.CA}
		tlsCfg, err := info.ClientConfig()
		if err != nil {
			return nil, err
		}
		ccfg.TLS = tlsCfg
	}
	return clientv3.New(ccfg)
}

// QuietGRPC silences grpc's process-wide logger: grpc would otherwise print
// connection warnings on stderr. It is a process option: the daemon's main
// calls it first thing, and a test process that runs grpc servers too (an
// in-process etcd) calls it before starting them, for grpc's logger may
// only be set while no grpc code runs.
func QuietGRPC() { grpclog.SetLoggerV2(silentLogger{}) }

// silentLogger drops every line, and answers false to V, which grpc asks
// before it builds what it would log at that verbosity. Fatal ends the
// process as grpc expects of it, without a word.
type silentLogger struct{}

func (silentLogger) Info(...any)             {}
func (silentLogger) Infoln(...any)           {}
func (silentLogger) Infof(string, ...any)    {}
func (silentLogger) Warning(...any)          {}
func (silentLogger) Warningln(...any)        {}
func (silentLogger) Warningf(string, ...any) {}
func (silentLogger) Error(...any)            {}
func (silentLogger) Errorln(...any)          {}
func (silentLogger) Errorf(string, ...any)   {}
func (silentLogger) Fatal(...any)            { os.Exit(1) }
func (silentLogger) Fatalln(...any)          { os.Exit(1) }
func (silentLogger) Fatalf(string, ...any)   { os.Exit(1) }
func (silentLogger) V(int) bool              { return false }

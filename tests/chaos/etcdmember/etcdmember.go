// Package etcdmember runs one member of an etcd cluster from
// go.etcd.io/etcd/server/v3/embed, so that the chaos test can run each
// member as a process of its own and kill, stop and restart it. The chaos
// test's own binary is the launcher (its TestMain calls Run when started
// as a member), so no second etcd binary is linked; nothing is installed.
// The arguments:
//
//	-name m1 -dir DIR -client http://127.0.0.1:P1 -peer http://127.0.0.1:P2 \
//	    -cluster m1=http://127.0.0.1:P2,m2=...,m3=...
//
// Run returns when the member stops, or on SIGTERM/SIGINT after closing it.
package etcdmember

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Run runs the member the arguments describe until it stops or the
// process is told to stop.
func Run(args []string) error {
	flags := flag.NewFlagSet("etcdmember", flag.ContinueOnError)
	name := flags.String("name", "", "member name")
	dir := flags.String("dir", "", "data folder (the log goes beside it)")
	client := flags.String("client", "", "client URL to listen on and advertise")
	peer := flags.String("peer", "", "peer URL to listen on and advertise")
	cluster := flags.String("cluster", "", "initial cluster: name=peerURL,...")
	tick := flags.Duration("tick", 100*time.Millisecond, "heartbeat interval")
	election := flags.Duration("election", time.Second, "election timeout")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *name == "" || *dir == "" || *client == "" || *peer == "" || *cluster == "" {
		return fmt.Errorf("-name, -dir, -client, -peer and -cluster are required")
	}
	cu, err := url.Parse(*client)
	if err != nil {
		return fmt.Errorf("-client: %w", err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		return fmt.Errorf("-peer: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = filepath.Join(*dir, "data")
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(*dir, "etcd.log")}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = *cluster
	cfg.InitialClusterToken = "chaos"
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.TickMs = uint(tick.Milliseconds())
	cfg.ElectionMs = uint(election.Milliseconds())
	// The test kills processes, not machines: what a killed process wrote
	// is in the page cache and survives it, so fsync buys nothing here
	// but time on a busy machine.
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
		return nil
	case err := <-e.Err():
		return err
	case <-e.Server.StopNotify():
		return fmt.Errorf("the member stopped")
	}
}

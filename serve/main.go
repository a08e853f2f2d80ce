package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/types"
)

// Main runs `<name> serve [--config FILE]` until SIGTERM or SIGINT and
// returns the exit status.
func Main(name string, args []string, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: serve: %s: %s\n", name, types.ClassOf(err), strings.Join(strings.Fields(err.Error()), " "))
		return types.ClassOf(err).ExitCode()
	}
	// --config is read as the command tree reads it: an empty value or a
	// second one is refused, never taken for "look in the folder" or
	// silently replaced by the last one.
	explicit, args, err := config.FlagFromArgs(args)
	if err != nil {
		return fail(err)
	}
	fs := flag.NewFlagSet(name+" serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "usage: %s serve [--config FILE]\n\nRuns the daemon that answers the plugin verbs the binaries forward over a unix socket,\nand /metrics, /healthz, /readyz and the operator API over HTTP (see docs/serve.md).\n", name)
		return 0
	} else if err != nil {
		return fail(types.Invalid("%s", err.Error()))
	}
	if fs.NArg() > 0 {
		return fail(types.Invalid("unexpected argument %q", fs.Arg(0)))
	}
	wd, err := os.Getwd()
	if err != nil {
		return fail(err)
	}
	cfg, err := config.Load(explicit, name)
	if err != nil {
		return fail(err)
	}
	sc, err := SectionConfig(cfg, wd)
	if err != nil {
		return fail(err)
	}
	// The files the HTTP listener needs are read before anything is
	// created (the store opened, the socket bound): a config naming one
	// that is not there is refused as it stands.
	var files HTTPFiles
	if sc.HTTP != "" {
		if files, err = sc.ReadHTTPFiles(cfg.File); err != nil {
			return fail(err)
		}
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("daemon", name+" serve", "pid", os.Getpid())
	var logs *logFile
	if cfg.Log.File != "" {
		if logs, err = openLogFile(cfg); err != nil {
			return fail(err)
		}
		defer logs.Close()
		log = slog.New(slog.NewJSONHandler(logs, nil)).With("daemon", name+" serve", "pid", os.Getpid())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// SIGHUP reopens log.file and reloads the flowcontrol section; caught
	// from here on, so an early one does not end the daemon (it is applied
	// once serving).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// A long-running process that may hold little: no collection before
	// a floor, then Go's default (an operator's GOGC or GOMEMLIMIT wins).
	cmd.DaemonGC()
	d, err := New(ctx, name, wd, cfg, sc, log, nil)
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	if err := d.Listen(); err != nil {
		if types.ClassOf(err) == types.Internal {
			err = types.Wrap(types.Unavailable, err, "listen")
		}
		return fail(err)
	}
	go d.ServeSocket()
	listening := []any{"socket", sc.Socket}
	var srv *http.Server
	if sc.HTTP != "" {
		var ln net.Listener
		srv, ln, err = d.ListenHTTP(sc.HTTP, files)
		if err != nil {
			_ = d.Shutdown(0)
			return fail(types.Wrap(types.Unavailable, err, "listen"))
		}
		listening = append(listening, "http", ln.Addr().String(), "tls", sc.TLS.Cert != "", "mtls", sc.TLS.ClientCA != "")
	}
	if sc.Statsd.Address != "" {
		sctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go d.pushStatsd(sctx)
	}
	log.Info("serving", append(listening, "config", cfg.File, "etcd", cfg.UsesEtcd())...)
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			waiting = false
		case <-hup:
			if logs != nil {
				if err := logs.Reopen(); err != nil {
					log.Warn("log.file could not be reopened: the daemon goes on logging to the file it had open", "file", cfg.Log.File, "error", oneLine(err))
				} else {
					log.Info("reopened log.file", "file", cfg.Log.File)
				}
			}
			if err := d.Reload(); err != nil {
				log.Warn("reload refused: the flow control keeps its configuration", "error", oneLine(err))
			} else {
				log.Info("reloaded the flowcontrol section", "config", cfg.File)
			}
		}
	}
	log.Info("shutting down", "grace", sc.ShutdownGrace.String(), "answered", d.Answered())
	// Both listeners stop taking calls now, and the calls in flight on
	// either finish within the one grace.
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		if srv != nil {
			shutdownHTTP(srv, sc.ShutdownGrace)
		}
	}()
	if err := d.Shutdown(sc.ShutdownGrace); err != nil {
		log.Warn("shutdown", "error", err.Error())
	}
	<-httpDone
	return 0
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(fmt.Sprint(err)), " ")
}

// Package serve is the optional long-running daemon of both plugins: it
// answers the plugin verbs that the exec'd binaries forward over a unix
// socket, from a linearizable watch cache of etcd (serve/cache), serves
// Prometheus /metrics, health probes and the operator API over HTTP, and
// pushes gauges to statsd. Every call runs through the same command tree as
// an exec'd binary (cmd.MainWith), so its answer is the same bytes, its
// reads of many nodes taking the records the cache decoded; /metrics samples
// the nodes through the plugins' engines directly. The daemon is never
// needed for correctness.
package serve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/flowcontrol"
	"github.com/eru-extend/resources/flowcontrol/clock"
	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/serve/cache"
	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/store/etcdstore"
	"github.com/eru-extend/resources/types"
)

// Binaries are the plugin binaries one daemon serves.
var Binaries = []string{"storage", "compute"}

// served is one config file the daemon answers for, as it was at start.
type served struct {
	cfg   *config.Config
	stamp config.Stamp // what the file held when the daemon read it
	// as is cfg under each way a binary may have found the file
	// (forward.Found*): a call's records name how its binary found it,
	// as the binary run locally names it, not how the daemon did (its own
	// file is the sibling's file of the other binary, and the other
	// plugin's file it loads by name).
	as map[string]*config.Config
	// settled: the file was seen holding stamp's contents long enough
	// after its last write that a later write must change its
	// modification time; until then each call compares the contents.
	settled atomic.Bool
}

func newServed(cfg *config.Config, stamp config.Stamp) *served {
	s := &served{cfg: cfg, stamp: stamp, as: map[string]*config.Config{}}
	for _, found := range []string{forward.FoundFlag, forward.FoundEnv, forward.FoundOwn, forward.FoundSibling, forward.FoundShared, forward.FoundNone} {
		c := *cfg
		c.Source = sourceOf(found)
		s.as[found] = &c
	}
	s.settled.Store(!stamp.Racy())
	return s
}

// sourceOf is the config.Source a binary logs for a file it found so.
func sourceOf(found string) config.Source {
	switch found {
	case forward.FoundFlag:
		return config.FromFlag
	case forward.FoundEnv:
		return config.FromEnv
	case forward.FoundOwn:
		return config.FromWorkdir
	case forward.FoundSibling:
		return config.FromSibling
	case forward.FoundShared:
		return config.FromShared
	}
	return config.FromDefaults
}

// forCall is the file's configuration for a call whose binary found the
// file so (forward.Found*).
func (s *served) forCall(found string) *config.Config {
	if c, ok := s.as[found]; ok {
		return c
	}
	return s.cfg
}

// unchanged reports whether the file still holds what the daemon serves.
func (s *served) unchanged() bool {
	same, settled := s.stamp.Unchanged(s.cfg.File, !s.settled.Load())
	if settled {
		s.settled.Store(true)
	}
	return same
}

// Daemon is a running serve daemon.
type Daemon struct {
	name  string
	wd    string
	cfg   *config.Config // the daemon's own configuration
	serve Config
	files map[string]*served // config file (absolute; "" for none) -> config
	log   *slog.Logger
	admit Admission
	flow  *flowcontrol.Controller // nil when New was given its own admission

	reloadMu sync.Mutex // one SIGHUP reload at a time
	filesMu  sync.RWMutex

	etcd     *etcdstore.Store // nil on the embedded store
	cache    *cache.Cache
	decoders engine.Decoders

	metrics *metrics

	// nodeLocks serialise the daemon's own writes to one node: they would
	// only conflict in etcd and retry (every write of a node compares its
	// registration). Correctness does not rest on them; the
	// compare-and-swap still guards against every other writer.
	nodeLocks [256]sync.Mutex

	samplesMu  sync.Mutex // one rendering of the nodes' samples at a time
	samples    *nodeSnapshot
	samplesRev int64

	// keepaliveEvery is how often a read's client is told the daemon
	// still holds its call (forward.ReadStall / 2).
	keepaliveEvery time.Duration
	// hangupEvery is how often a waiting call's connection is checked for
	// a client that went away.
	hangupEvery time.Duration
	// lockWaits bounds the embedded store's lock waits that calls which
	// timed out leave behind (nil on etcd).
	lockWaits *boltstore.Waits

	ln       *net.UnixListener
	answered atomic.Int64 // calls run for a client
	closing  atomic.Bool
	inflight sync.WaitGroup
}

// New loads what the daemon serves and connects to the store; it does not
// listen yet (see Listen). With a nil admit, every call is admitted by flow
// control built from cfg's `flowcontrol:` section (its defaults when
// absent), its metrics on the daemon's /metrics.
func New(ctx context.Context, name, wd string, cfg *config.Config, sc Config, log *slog.Logger, admit Admission) (*Daemon, error) {
	var fc flowcontrol.Config
	if admit == nil {
		var err error
		if fc, err = FlowConfig(cfg); err != nil {
			return nil, err
		}
	}
	d := &Daemon{name: name, wd: wd, cfg: cfg, serve: sc, log: log, admit: admit, files: map[string]*served{}, decoders: cmd.Decoders(), keepaliveEvery: forward.ReadStall / 2, hangupEvery: 250 * time.Millisecond}
	if !cfg.UsesEtcd() {
		d.lockWaits = boltstore.NewWaits(2)
	}
	d.files[cfg.File] = newServed(cfg, cfg.Stamp)
	// The other plugin's file is looked for beside the daemon's own (the
	// folder core execs the plugins from), wherever the daemon was started.
	folder := wd
	if cfg.File != "" {
		folder = filepath.Dir(cfg.File)
	}
	for _, b := range Binaries {
		file, err := config.Resolve("", b, folder)
		if err != nil || file == "" || file == cfg.File {
			continue
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			continue
		}
		other, err := config.Load(abs, b)
		if err != nil {
			log.Warn("config not served", "file", abs, "error", err.Error())
			continue
		}
		if !sameStore(cfg, other) {
			log.Warn("config not served: it names another store", "file", abs)
			continue
		}
		d.files[abs] = newServed(other, other.Stamp)
	}
	if cfg.UsesEtcd() {
		s, err := cfg.Open(ctx, config.Read)
		if err != nil {
			return nil, err
		}
		es, ok := s.(*etcdstore.Store)
		if !ok {
			_ = s.Close()
			return nil, fmt.Errorf("etcd store of unexpected type %T", s)
		}
		d.etcd = es
		if d.cache, err = cache.New(es, cfg.Etcd.Prefix, sc.CacheWait, d.decoders.Decode); err != nil {
			_ = es.Close()
			return nil, types.Wrap(types.Unavailable, err, "etcd "+strings.Join(cfg.Etcd.Machines, ","))
		}
	}
	d.metrics = newMetrics(d)
	if admit == nil {
		ctl, err := flowcontrol.New(fc, clock.Real{}, d.metrics.reg)
		if err != nil {
			d.Close()
			return nil, types.Invalid("config %s: %s", cfg.File, err.Error())
		}
		d.flow, admit = ctl, FlowControl(ctl)
	}
	d.admit = admit
	return d, nil
}

// FlowConfig decodes cfg's `flowcontrol:` section, defaults filled in, and
// checks it: an error names the file and the key.
func FlowConfig(cfg *config.Config) (flowcontrol.Config, error) {
	var fc flowcontrol.Config
	if err := cfg.DecodeSection("flowcontrol", &fc); err != nil {
		return fc, err
	}
	fc = fc.WithDefaults()
	if err := fc.Validate(); err != nil {
		msg := err.Error()
		var ce *flowcontrol.ConfigError
		if errors.As(err, &ce) {
			if line := cfg.Line(ce.Key); line > 0 {
				msg += fmt.Sprintf(" (line %d)", line)
			}
		}
		return fc, types.Invalid("config %s: %s", cfg.File, msg)
	}
	return fc, nil
}

// FlowControl is the daemon's flow control, nil when it was built with its
// own admission.
func (d *Daemon) FlowControl() *flowcontrol.Controller { return d.flow }

// Reload re-reads the configuration file (on SIGHUP) and applies its
// `flowcontrol:` section: calls admitted keep their seats, queued calls stay
// queued. A file that cannot be read changes nothing, and a refused section
// leaves the flow control as it was (the error says why). Other sections are
// not applied: when only the flowcontrol section changed (applied or
// refused), forwarded calls go on being served; when another changed, they
// are declined (and run by the binaries) until the daemon restarts, as for
// any file changed under a running daemon.
func (d *Daemon) Reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	file := d.cfg.File
	if file == "" {
		return errors.New("no config file to reload: the daemon runs on built-in defaults")
	}
	stamp, err := config.ReadFile(file)
	if err != nil {
		return types.Wrap(types.InvalidArgument, err, "config")
	}
	next, err := config.Parse(stamp.Data, file)
	if err != nil {
		return err
	}
	// A serve section the daemon could not start with is refused as a
	// whole, as a mistake in any other section is: applying the file's
	// flowcontrol section and calling it reloaded would hide the mistake
	// until the next restart, which it stops.
	sc, err := SectionConfig(next, d.wd)
	if err != nil {
		return err
	}
	// A start also reads the files the HTTP listener needs (Main) and
	// refuses a section naming one that is not there or not usable.
	if sc.HTTP != "" {
		if _, err := sc.ReadHTTPFiles(next.File); err != nil {
			return err
		}
	}
	var flowErr error
	if d.flow != nil {
		fc, err := FlowConfig(next)
		if err == nil {
			err = d.flow.Reload(fc)
			if err != nil {
				err = types.Invalid("config %s: %s", file, err.Error())
			}
		}
		flowErr = err
	}
	d.restampOthers(file)
	if !sameSettings(d.cfg, next) || !reflect.DeepEqual(sc, d.serve) {
		if flowErr != nil {
			return flowErr
		}
		d.log.Warn("config reloaded: only its flowcontrol section applies; other sections changed, so forwarded calls are declined until the daemon restarts", "file", file)
		return nil
	}
	// Every section the binaries read is the one the daemon serves with,
	// so the file's calls are served again, even when its flowcontrol
	// section was refused (the daemon keeps the one it runs).
	d.filesMu.Lock()
	d.files[file] = newServed(d.files[file].cfg, stamp)
	d.filesMu.Unlock()
	return flowErr
}

// restampOthers reads again, on SIGHUP, the files the daemon serves besides
// its own (file): the other plugin's, found beside it. One that still holds
// the settings the daemon serves it with (its times alone changed: a chmod,
// a copy over it of the same text) is served again, as the daemon's own
// file is; one that changed, or cannot be read, stays declined.
func (d *Daemon) restampOthers(file string) {
	d.filesMu.RLock()
	others := make(map[string]*served, len(d.files))
	for f, s := range d.files {
		if f != file {
			others[f] = s
		}
	}
	d.filesMu.RUnlock()
	for f, s := range others {
		stamp, err := config.ReadFile(f)
		if err != nil {
			continue
		}
		next, err := config.Parse(stamp.Data, f)
		if err != nil || !sameSettings(s.cfg, next) {
			continue
		}
		d.filesMu.Lock()
		d.files[f] = newServed(s.cfg, stamp)
		d.filesMu.Unlock()
	}
}

// sameSettings reports whether two configurations of one file differ only
// in their flowcontrol section (and where things sit in the file).
func sameSettings(a, b *config.Config) bool {
	x, y := *a, *b
	for _, c := range []*config.Config{&x, &y} {
		var source config.Source
		c.Warnings, c.Serve, c.FlowControl, c.Doc, c.Source, c.Searched, c.Stamp = nil, yaml.Node{}, yaml.Node{}, yaml.Node{}, source, nil, config.Stamp{}
	}
	return reflect.DeepEqual(x, y)
}

func sameStore(a, b *config.Config) bool {
	return slices.Equal(a.Etcd.Machines, b.Etcd.Machines) && a.Etcd.Prefix == b.Etcd.Prefix &&
		a.Etcd.CA == b.Etcd.CA && a.Etcd.Cert == b.Etcd.Cert && a.Etcd.Key == b.Etcd.Key &&
		a.Etcd.Username == b.Etcd.Username && a.Etcd.Password == b.Etcd.Password &&
		(a.UsesEtcd() || a.Embedded.Path == b.Embedded.Path)
}

// Answered is how many forwarded calls the daemon has run.
func (d *Daemon) Answered() int64 { return d.answered.Load() }

// Cache is the daemon's watch cache, nil on the embedded store.
func (d *Daemon) Cache() *cache.Cache { return d.cache }

// options are how the command tree runs in the daemon for cfg: reads on
// st (the cache, shared, so Close is a no-op), the reads of many nodes from
// the cache's decoded records, writes on the etcd store itself — a write's
// compare-and-swap is checked by etcd, so it gains nothing from waiting for
// the watch — and, with no st, the embedded store opened per call with its
// file lock, as an exec'd binary does.
func (d *Daemon) options(cfg *config.Config, st store.Store) cmd.Options {
	opts := cmd.Options{Config: cfg}
	sr, cached := st.(snapshotReader)
	if cached {
		opts.Snapshots = snapshots{sr}
	}
	if st != nil {
		opts.OpenStore = func(_ context.Context, _ *config.Config, mode config.Mode) (store.Store, error) {
			if (mode == config.Write || mode == config.WriteExisting) && d.etcd != nil && cached {
				return noClose{d.etcd}, nil
			}
			return noClose{st}, nil
		}
	} else {
		opts.OpenStore = func(ctx context.Context, cfg *config.Config, mode config.Mode) (store.Store, error) {
			return cfg.OpenWaiting(ctx, mode, d.lockWaits)
		}
	}
	return opts
}

// run runs one command of binary: a plugin verb directly (cmd.RunVerb,
// the same answer without building the command tree for each call),
// anything else through the command tree.
func (d *Daemon) run(opts cmd.Options, binary string, args []string, stdin []byte) (int, []byte, []byte) {
	var out, errb bytes.Buffer
	code, ok := cmd.RunVerb(opts, binary, args, bytes.NewReader(stdin), &out, &errb)
	if !ok {
		code = cmd.MainWith(opts, binary, args, bytes.NewReader(stdin), &out, &errb)
	}
	return code, out.Bytes(), errb.Bytes()
}

// linearizable is the store forwarded calls and operator commands use.
func (d *Daemon) linearizable() store.Store {
	if d.cache == nil {
		return nil
	}
	return d.cache
}

// snapshotReader is the cache (cache.Cache, or cache.Ahead for one call).
type snapshotReader interface {
	store.Store
	ReadSnapshot(ctx context.Context, keys, prefixes []string) (*cache.View, error)
}

// snapshots are the cache's linearizable reads, records decoded, for the
// engine.
type snapshots struct{ c snapshotReader }

func (s snapshots) ReadSnapshot(ctx context.Context, keys, prefixes []string) (engine.Snapshot, error) {
	v, err := s.c.ReadSnapshot(ctx, keys, prefixes)
	if errors.Is(err, cache.ErrNotCurrent) {
		return nil, engine.ErrNotCached
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

type noClose struct{ store.Store }

func (noClose) Close() error { return nil }

// TxnOrRead keeps the underlying store's single-round-trip retry.
func (n noClose) TxnOrRead(ctx context.Context, conds []store.Cond, ops []store.Op, keys []string) (*store.Snapshot, error) {
	if rr, ok := n.Store.(store.Rereader); ok {
		return rr.TxnOrRead(ctx, conds, ops, keys)
	}
	return nil, n.Txn(ctx, conds, ops)
}

// ReadNames keeps the underlying store's reads in pages (the cache's go
// straight to etcd: the engine reads names this way only once the cache
// could not answer).
func (n noClose) ReadNames(ctx context.Context, r store.NameRead, head func(*store.Snapshot) error, page func(*store.Snapshot, []int) error) error {
	return store.ReadNames(ctx, n.Store, r, head, page)
}

// Listen opens the unix socket: a socket file nobody answers on is stale
// and removed; one a live daemon answers on is an error, and a file that
// is not a socket is failed_precondition (left for the operator).
func (d *Daemon) Listen() error {
	path := d.serve.Socket
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return types.Errorf(types.FailedPrecondition, "socket %s: a file that is not a socket is in the way; move it or set serve.socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return fmt.Errorf("socket %s: another daemon is answering on it", path)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("removing stale socket %s: %w", path, err)
		}
		d.log.Info("removed a stale socket", "socket", path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, d.serve.Mode()); err != nil {
		_ = ln.Close()
		return fmt.Errorf("socket %s: %w", path, err)
	}
	d.ln = ln
	return nil
}

// ServeSocket accepts forwarded calls until the listener closes. A failed
// accept (out of descriptors or memory: the connection stays in the listen
// queue) is tried again after a pause, as net/http does: returning would
// leave the socket listening with nobody taking its connections.
func (d *Daemon) ServeSocket() {
	var pause time.Duration
	for {
		conn, err := d.ln.AcceptUnix()
		if err != nil {
			if d.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			d.log.Warn("accept failed: trying again", "error", err.Error(), "in", pause.String())
			time.Sleep(pause)
			continue
		}
		pause = 0
		d.inflight.Add(1)
		go func() {
			defer d.inflight.Done()
			d.handle(conn)
		}()
	}
}

// peerAllowed checks the peer's uid: root, the daemon's own, or listed.
func (d *Daemon) peerAllowed(conn *net.UnixConn) (uid, pid int, ok bool) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return -1, -1, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return -1, -1, false
	}
	uid, pid = int(cred.Uid), int(cred.Pid)
	return uid, pid, uid == 0 || uid == os.Getuid() || slices.Contains(d.serve.AllowedUIDs, uid)
}

func (d *Daemon) handle(conn *net.UnixConn) {
	defer conn.Close()
	uid, pid, ok := d.peerAllowed(conn)
	if !ok {
		d.log.Warn("peer refused on the socket", "peer_uid", uid, "peer_pid", pid)
		d.metrics.requests.WithLabelValues("", "refused").Inc()
		_, _ = conn.Write([]byte{forward.Refused})
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	req, stdin, err := forward.ReadRequest(bufio.NewReaderSize(conn, 16<<10))
	if err != nil {
		return // never run a call that did not arrive whole
	}
	_ = conn.SetReadDeadline(time.Time{})
	// A read asks for etcd's current revision now, while the call is
	// checked, admitted and prepared, instead of when the verb reads: the
	// call has begun, so the revision is still that of every write
	// acknowledged before it began (cache.Ahead). A write or a verb without
	// input reads nothing through the cache and asks nothing.
	write, _ := forward.Write(req.Verb)
	var ahead *cache.Ahead
	if d.cache != nil && !d.closing.Load() && !write && !forward.NoInput(req.Verb) {
		ahead = d.cache.Ahead()
		defer ahead.Done()
	}
	opts, why := d.accept(req, ahead)
	if why != "" {
		d.log.Info("call declined", "verb", req.Verb, "why", why)
		d.metrics.requests.WithLabelValues(verbLabel(req.Verb), "declined").Inc()
		_, _ = conn.Write([]byte{forward.Declined})
		return
	}
	start := time.Now()
	// A read's client takes a silent daemon for a stalled one
	// (forward.ReadStall): while the call waits for a seat or runs, tell
	// it the daemon is alive. (A write's client waits for its Accepted
	// however long.)
	var alive *keepalive
	if !write {
		alive = startKeepalive(conn, d.keepaliveEvery)
		defer alive.stop()
	}
	named := peek(stdin)
	// A queued call waits at most a minute for its turn (flow control may
	// bound it tighter); core's own call timeout is usually shorter. A
	// client that closes its connection meanwhile withdraws it.
	actx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waiting := watchHangup(conn, d.hangupEvery, cancel)
	// A write takes its node's lock before admission: writes to one node
	// run one at a time anyway, and waiting for the lock in a seat would
	// let a burst of writes to one node fill a level.
	unlock := d.lockNode(write, named.Nodename)
	defer func() { unlock() }()
	adm, rej := d.admit(actx, Request{Kind: "verb", Verb: req.Verb, Pod: named.pod(), Caller: socketCaller(uid, pid), Stdin: stdin})
	if waiting.stop() {
		// Nothing ran, and nobody waits for an answer: a write's client
		// had no Accepted, so the call is one that did not land.
		if adm != nil {
			adm.Release()
		}
		d.log.Info("call withdrawn: its client went away while it waited", "verb", req.Verb)
		d.metrics.requests.WithLabelValues(req.Verb, "withdrawn").Inc()
		return
	}
	if rej != nil && rej.Reason == flowcontrol.ReasonShutdown {
		// The daemon stopped while the call waited for a seat: nothing
		// ran and no limit refused it, so it is not "too many requests"
		// (which the binary never runs itself). Declined, the binary runs
		// it as it would with no daemon.
		if alive != nil {
			alive.stop()
		}
		d.log.Info("call declined", "verb", req.Verb, "why", "the daemon is stopping: it never started")
		d.metrics.requests.WithLabelValues(req.Verb, "declined").Inc()
		_, _ = conn.Write([]byte{forward.Declined})
		return
	}
	var (
		code    int
		out, eb []byte
		result  = "ok"
		// status is the Accepted byte when it goes out with the answer.
		status []byte
	)
	if rej != nil {
		unlock()
		unlock = func() {}
		code, eb, result = forward.PluginExitCode, []byte(rej.Line(req.Binary, req.Verb)+"\n"), "rejected"
		status = []byte{forward.Accepted} // nothing ran: one write
	} else {
		// A write's Accepted goes out before it runs: a client that loses
		// the connection after it knows the call may have run and must not
		// run it again. A read would be run again by the client either
		// way, so its Accepted travels with its answer, in one write (one
		// wake-up of the client fewer).
		if write {
			if _, err := conn.Write([]byte{forward.Accepted}); err != nil {
				adm.Release()
				return
			}
		} else {
			status = []byte{forward.Accepted}
		}
		code, out, eb = d.run(opts, req.Binary, req.Args, stdin)
		unlock()
		unlock = func() {}
		d.answered.Add(1)
		adm.Release()
		if code != 0 {
			result = "failed"
		}
	}
	d.metrics.requests.WithLabelValues(req.Verb, result).Inc()
	d.metrics.latency.WithLabelValues(req.Verb).Observe(time.Since(start).Seconds())
	if alive != nil {
		alive.stop()
	}
	_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if forward.WriteAnswer(conn, status, code, out, eb) != nil {
		d.log.Warn("answer lost: the client went away", "verb", req.Verb)
	}
}

// verbLabel is the verb label of a socket request's series: the plugin
// verbs by name, anything else a peer sends as one "unknown" (each string
// its own series would stay in the registry for the daemon's life).
func verbLabel(verb string) string {
	if _, ok := forward.Write(verb); ok {
		return verb
	}
	return "unknown"
}

// named is what the daemon reads of a verb's request: the fields that
// name its pod and node, read once for flow control's distinguisher and
// the per-node write lock.
type named forward.Named

// peek reads the naming fields of a verb's request (forward.Names: without
// decoding the rest).
func peek(stdin []byte) named { return named(forward.Names(stdin)) }

// pod is the request's pod, or its node for verbs that name only a node.
func (n named) pod() string {
	if n.Podname != "" {
		return "pod:" + n.Podname
	}
	if n.Nodename != "" {
		return "node:" + n.Nodename
	}
	return ""
}

// socketCaller names a socket peer for flow control: its uid and the
// parent of its process (core, for a binary core exec'd), so that each
// caller process tree is its own flow.
func socketCaller(uid, pid int) string {
	c := "uid:" + strconv.Itoa(uid)
	if ppid := parentPID(pid); ppid > 0 {
		c += " ppid:" + strconv.Itoa(ppid)
	}
	return c
}

// parentPID reads a process's parent from /proc (0 when it cannot).
func parentPID(pid int) int {
	if pid <= 0 {
		return 0
	}
	// Plain system calls into a buffer on the stack: os.ReadFile would
	// stat the file, allocate and try the runtime poller, once per call.
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	var buf [512]byte
	n, err := unix.Read(fd, buf[:])
	_ = unix.Close(fd)
	if err != nil || n <= 0 {
		return 0
	}
	data := buf[:n]
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// lockNode takes the lock of the node a write names, and returns its
// release.
func (d *Daemon) lockNode(write bool, nodename string) func() {
	if !write || nodename == "" {
		return func() {}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(nodename))
	mu := &d.nodeLocks[h.Sum32()%uint32(len(d.nodeLocks))]
	mu.Lock()
	return mu.Unlock
}

// accept decides whether the daemon runs req, and how: its reads through
// ahead when not nil, else the daemon's store.
func (d *Daemon) accept(req forward.Request, ahead *cache.Ahead) (cmd.Options, string) {
	if d.closing.Load() {
		return cmd.Options{}, "shutting down"
	}
	if !slices.Contains(Binaries, req.Binary) {
		return cmd.Options{}, "unknown binary " + req.Binary
	}
	if _, ok := forward.Write(req.Verb); !ok {
		return cmd.Options{}, "not a plugin verb"
	}
	// The call is classified (write or read, its flow, its node's lock)
	// by req.Verb but runs req.Args: they must name that verb and nothing
	// else, as a client's always do. Other arguments (an operator command
	// under a read's name) are not run here.
	if verb, _, ok := forward.VerbOf(req.Args); !ok || verb != req.Verb {
		return cmd.Options{}, "the arguments do not name verb " + req.Verb + " alone"
	}
	d.filesMu.RLock()
	s, ok := d.files[req.Config]
	d.filesMu.RUnlock()
	if !ok || (req.Config == "" && req.Dir != d.wd) {
		return cmd.Options{}, "another config: " + req.Config
	}
	if req.Config != "" && !s.unchanged() {
		return cmd.Options{}, "config changed since the daemon started: " + req.Config
	}
	cfg := s.forCall(req.Found)
	if ahead != nil {
		return d.options(cfg, ahead), ""
	}
	return d.options(cfg, d.linearizable()), ""
}

// Shutdown stops taking calls and waits for those in flight, at most grace.
func (d *Daemon) Shutdown(grace time.Duration) error {
	d.closing.Store(true)
	if d.ln != nil {
		_ = d.ln.Close()
	}
	if !d.waitInflight(grace) {
		return errors.New("calls still running after the shutdown grace")
	}
	return nil
}

// waitInflight waits at most d for the calls in flight to end; false when
// some still run.
func (d *Daemon) waitInflight(wait time.Duration) bool {
	done := make(chan struct{})
	go func() { d.inflight.Wait(); close(done) }()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// answerQueuedFor is how long Close waits for the calls flow control
// turned away to answer their clients.
const answerQueuedFor = time.Second

// Close releases flow control, the cache and the store connection.
func (d *Daemon) Close() {
	if d.flow != nil {
		d.flow.Close()
		// The calls that waited for a seat are declined now: let them tell
		// their clients (who then run them themselves) before the process
		// ends, rather than leave them an EOF. A call still running past
		// the shutdown grace is not waited for beyond that.
		d.waitInflight(answerQueuedFor)
	}
	if d.cache != nil {
		_ = d.cache.Close()
	}
	if d.etcd != nil {
		_ = d.etcd.Close()
	}
}

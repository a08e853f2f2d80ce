package serve

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/types"
)

// Config is the `serve:` section of the plugins' config file.
type Config struct {
	Socket        string        `yaml:"socket"`
	SocketMode    string        `yaml:"socket_mode"`
	AllowedUIDs   []int         `yaml:"allowed_uids"`
	HTTP          string        `yaml:"http"`
	TLS           TLS           `yaml:"tls"`
	TokenFile     string        `yaml:"token_file"`
	Statsd        Statsd        `yaml:"statsd"`
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	CacheWait     time.Duration `yaml:"cache_wait"`

	mode os.FileMode
}

// TLS makes the HTTP listener HTTPS; with ClientCA, clients must present a
// certificate signed by it.
type TLS struct {
	Cert     string `yaml:"cert"`
	Key      string `yaml:"key"`
	ClientCA string `yaml:"client_ca"`
}

// Statsd is where gauges are pushed.
type Statsd struct {
	Address  string        `yaml:"address"`
	Interval time.Duration `yaml:"interval"`
	Prefix   string        `yaml:"prefix"`
}

// Mode is the socket's permission bits.
func (c *Config) Mode() os.FileMode { return c.mode }

// DefaultConfig is the serve section's defaults, paths relative to dir.
func DefaultConfig(dir string) Config {
	return Config{
		Socket:        filepath.Join(dir, forward.DefaultSocket),
		SocketMode:    "0660",
		ShutdownGrace: 5 * time.Second,
		CacheWait:     time.Second,
		Statsd:        Statsd{Interval: 15 * time.Second},
		mode:          0o660,
	}
}

// LoadConfig reads the serve section of file ("" for none: defaults beside
// wd). Unknown keys in it are refused, naming the file.
func LoadConfig(file, wd string) (Config, error) {
	if file == "" {
		return defaultsIn(wd)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, types.Wrap(types.InvalidArgument, err, "config")
	}
	return ParseConfig(data, file)
}

// ParseConfig decodes the serve section of a config document that came
// from file.
func ParseConfig(data []byte, file string) (Config, error) {
	doc, err := config.Parse(data, file)
	if err != nil {
		return Config{}, err
	}
	return SectionConfig(doc, filepath.Dir(file))
}

// SectionConfig decodes the serve section of doc (read by package config;
// without a file, the defaults beside wd). The section is decoded from the
// file's own tree by config.DecodeSection, so that an unknown key or a value
// of the wrong kind is refused naming the file, the key as written and its
// line there, and saying what is wanted.
func SectionConfig(doc *config.Config, wd string) (Config, error) {
	if doc.File == "" {
		return defaultsIn(wd)
	}
	file := doc.File
	dir := filepath.Dir(file)
	cfg := DefaultConfig(dir)
	if err := doc.DecodeSection("serve", &cfg); err != nil {
		return Config{}, err
	}
	// invalid names the file, the key and the line it is written on (none
	// for a default), as the section's decoding errors do.
	invalid := func(key, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if line := doc.Line(key); line > 0 {
			msg += fmt.Sprintf(" (line %d)", line)
		}
		return types.Invalid("config %s: %s: %s", file, key, msg)
	}
	mode, err := strconv.ParseUint(strings.TrimPrefix(cfg.SocketMode, "0o"), 8, 32)
	if err != nil || mode > 0o777 {
		return Config{}, invalid("serve.socket_mode", "%q is not octal permission bits like 0660", cfg.SocketMode)
	}
	cfg.mode = os.FileMode(mode)
	if cfg.Socket == "" {
		return Config{}, invalid("serve.socket", "want a path (leave the key out for %s beside the config file)", forward.DefaultSocket)
	}
	for i, uid := range cfg.AllowedUIDs {
		if uid < 0 || uid >= math.MaxUint32 {
			return Config{}, invalid(fmt.Sprintf("serve.allowed_uids[%d]", i), "%d is not a user id (0 to %d)", uid, uint32(math.MaxUint32-1))
		}
	}
	if err := checkListenAddress(cfg.HTTP); err != nil {
		return Config{}, invalid("serve.http", "%s", err)
	}
	if err := checkStatsdAddress(cfg.Statsd.Address); err != nil {
		return Config{}, invalid("serve.statsd.address", "%s", err)
	}
	socketIs := ""
	switch {
	case cfg.Socket == DefaultConfig(dir).Socket:
		socketIs = "the default, " + forward.DefaultSocket + " beside the config file"
	case !filepath.IsAbs(cfg.Socket):
		socketIs = "relative to the config's folder"
	}
	for _, p := range []*string{&cfg.Socket, &cfg.TokenFile, &cfg.TLS.Cert, &cfg.TLS.Key, &cfg.TLS.ClientCA} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	if err := checkSocket(cfg.Socket, socketIs); err != nil {
		return Config{}, invalid("serve.socket", "%s", err)
	}
	switch {
	case cfg.ShutdownGrace <= 0:
		return Config{}, invalid("serve.shutdown_grace", "want a positive duration")
	case cfg.CacheWait <= 0:
		return Config{}, invalid("serve.cache_wait", "want a positive duration")
	case cfg.Statsd.Interval <= 0:
		return Config{}, invalid("serve.statsd.interval", "want a positive duration")
	case cfg.TLS.Cert == "" && cfg.TLS.Key != "":
		return Config{}, invalid("serve.tls.key", "needs serve.tls.cert: cert and key go together")
	case cfg.TLS.Cert != "" && cfg.TLS.Key == "":
		return Config{}, invalid("serve.tls.cert", "needs serve.tls.key: cert and key go together")
	case cfg.TLS.ClientCA != "" && cfg.TLS.Cert == "":
		return Config{}, invalid("serve.tls.client_ca", "needs tls.cert and tls.key")
	}
	return cfg, nil
}

// defaultsIn is the configuration without a file: the defaults, with the
// socket in the working directory wd.
func defaultsIn(wd string) (Config, error) {
	cfg := DefaultConfig(wd)
	if err := checkSocket(cfg.Socket, "the default, "+forward.DefaultSocket+" in the working directory"); err != nil {
		return Config{}, types.Invalid("serve.socket: %s", err)
	}
	return cfg, nil
}

// checkListenAddress checks a TCP listen address written as host:port
// (host may be empty for every interface; port 0 picks a free one), so a
// mistake is refused as configuration rather than failing the listen.
func checkListenAddress(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not a listen address like 127.0.0.1:9464", addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535 or a service name", addr, port)
	}
	return nil
}

// checkStatsdAddress checks statsd's address, host:port (host may be empty
// for this host): without a port, or with one no datagram can be sent to,
// the push would fail on every interval for the daemon's life, logged
// once as a statsd that is down.
func checkStatsdAddress(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not a statsd address like 127.0.0.1:8125", addr)
	}
	if n, err := net.LookupPort("udp", port); err != nil || n == 0 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535 or a service name", addr, port)
	}
	return nil
}

// checkSocket refuses a socket path longer than a unix socket address
// holds: binding it fails with a bare "invalid argument", after the daemon
// has already started, so the config is refused when it is read instead.
// is says where the path came from, when not straight from the key.
func checkSocket(path, is string) error {
	if len(path) <= forward.MaxSocketPath {
		return nil
	}
	if is != "" {
		is = " (" + is + ")"
	}
	return fmt.Errorf("path is %d bytes%s, a unix socket path allows at most %d", len(path), is, forward.MaxSocketPath)
}

package flowcontrol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/flowcontrol/shufflesharding"
)

// Level types and limit responses, as in Kubernetes' PriorityLevelConfiguration.
const (
	TypeExempt  = "Exempt"
	TypeLimited = "Limited"

	ResponseQueue  = "Queue"
	ResponseReject = "Reject"
)

// Distinguishers: how requests of one schema are split into flows.
const (
	DistinguishByPod    = "pod"
	DistinguishByCaller = "caller"
	DistinguishNone     = "none"
)

// Defaults of the fields a level may leave out (docs/flowcontrol.md).
const (
	DefaultServerConcurrency = 64
	DefaultShares            = 30
	DefaultQueues            = 64
	DefaultHandSize          = 8
	DefaultQueueLengthLimit  = 50
)

// Config is the `flowcontrol:` section of the configuration.
type Config struct {
	// ServerConcurrency is ServerCL, the seats the Limited levels share;
	// absent means 64. A pointer, as the level's numbers are, so that an
	// explicit 0 is refused rather than taken for the default.
	ServerConcurrency *int     `yaml:"server_concurrency,omitempty"`
	Levels            []Level  `yaml:"levels"`
	Schemas           []Schema `yaml:"schemas"`
}

// Level is a priority level.
type Level struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"` // Exempt or Limited
	// NominalConcurrencyShares (NCS) weighs the level's part of ServerCL;
	// absent means 30 for a Limited level and 0 for an Exempt one.
	NominalConcurrencyShares *int `yaml:"nominal_concurrency_shares,omitempty"`
	// LendablePercent of NominalCL other levels may borrow; absent means 0.
	LendablePercent *int `yaml:"lendable_percent,omitempty"`
	// BorrowingLimitPercent of NominalCL this level may borrow; absent
	// means unlimited.
	BorrowingLimitPercent *int `yaml:"borrowing_limit_percent,omitempty"`
	// LimitResponse says what happens to a request that cannot run at once
	// (Limited levels only).
	LimitResponse *LimitResponse `yaml:"limit_response,omitempty"`
}

// LimitResponse is Queue (with its queuing parameters) or Reject.
type LimitResponse struct {
	Type             string `yaml:"type"`
	Queues           *int   `yaml:"queues,omitempty"`
	HandSize         *int   `yaml:"hand_size,omitempty"`
	QueueLengthLimit *int   `yaml:"queue_length_limit,omitempty"`
}

// Schema is a flow schema: which requests go to which level, and how they
// split into flows.
type Schema struct {
	Name          string `yaml:"name"`
	Precedence    int    `yaml:"precedence"`
	Level         string `yaml:"level"`
	Distinguisher string `yaml:"distinguisher,omitempty"` // pod, caller, or none (absent)
	Match         Match  `yaml:"match"`
}

// Match selects requests: any of the listed verbs, paths or commands (or
// every request with Any).
type Match struct {
	Verbs    []string `yaml:"verbs,omitempty"`
	Paths    []string `yaml:"paths,omitempty"`    // exact, "*", or a "/prefix/*" glob
	Commands []string `yaml:"commands,omitempty"` // exact, or "*" for any command
	Any      bool     `yaml:"any,omitempty"`
}

func ptr(v int) *int { return &v }

// DefaultConfig is the configuration used when the section is absent.
func DefaultConfig() Config {
	queue := func(queues, hand, qll int) *LimitResponse {
		return &LimitResponse{Type: ResponseQueue, Queues: ptr(queues), HandSize: ptr(hand), QueueLengthLimit: ptr(qll)}
	}
	reject := &LimitResponse{Type: ResponseReject}
	return Config{
		ServerConcurrency: ptr(DefaultServerConcurrency),
		Levels: []Level{
			{Name: "exempt", Type: TypeExempt, NominalConcurrencyShares: ptr(0), LendablePercent: ptr(0)},
			{Name: "placement", Type: TypeLimited, NominalConcurrencyShares: ptr(40), LendablePercent: ptr(25),
				LimitResponse: queue(64, 6, 50)},
			{Name: "operator", Type: TypeLimited, NominalConcurrencyShares: ptr(10), LendablePercent: ptr(50),
				LimitResponse: queue(16, 4, 50)},
			{Name: "metrics", Type: TypeLimited, NominalConcurrencyShares: ptr(10), LendablePercent: ptr(90),
				BorrowingLimitPercent: ptr(0), LimitResponse: reject},
			{Name: "catch-all", Type: TypeLimited, NominalConcurrencyShares: ptr(5), LendablePercent: ptr(0),
				LimitResponse: reject},
		},
		Schemas: []Schema{
			{Name: "health", Precedence: 1, Level: "exempt", Match: Match{Paths: []string{"/healthz", "/readyz"}}},
			{Name: "placement", Precedence: 100, Level: "placement", Distinguisher: DistinguishByPod,
				Match: Match{Verbs: []string{"get-nodes-deploy-capacity", "calculate-deploy", "calculate-realloc",
					"calculate-remap", "set-node-resource-usage", "get-most-idle-node"}}},
			{Name: "metrics", Precedence: 200, Level: "metrics", Distinguisher: DistinguishByCaller,
				Match: Match{Verbs: []string{"get-metrics"}, Paths: []string{"/metrics"}}},
			{Name: "operator", Precedence: 300, Level: "operator", Distinguisher: DistinguishByCaller,
				Match: Match{Paths: []string{"/v1/*"}, Commands: []string{"*"}}},
			{Name: "catch-all", Precedence: 10000, Level: "catch-all", Distinguisher: DistinguishByCaller,
				Match: Match{Any: true}},
		},
	}
}

// Decode reads the `flowcontrol:` section's YAML (the mapping under the key),
// refusing unknown keys, fills in what is absent and validates the result.
// An empty document gives DefaultConfig.
func Decode(r io.Reader) (Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, fmt.Errorf("flowcontrol: reading the configuration: %w", err)
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("flowcontrol: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// WithDefaults returns the configuration with absent parts filled in: the
// default server concurrency, levels and schemas when those keys are absent,
// and each level's absent fields.
func (c Config) WithDefaults() Config {
	def := DefaultConfig()
	out := c
	if out.ServerConcurrency == nil {
		out.ServerConcurrency = def.ServerConcurrency
	}
	if out.Levels == nil {
		out.Levels = def.Levels
	}
	if out.Schemas == nil {
		out.Schemas = def.Schemas
	}
	levels := make([]Level, len(out.Levels))
	for i, l := range out.Levels {
		if l.NominalConcurrencyShares == nil {
			if l.Type == TypeExempt {
				l.NominalConcurrencyShares = ptr(0)
			} else {
				l.NominalConcurrencyShares = ptr(DefaultShares)
			}
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr(0)
		}
		if lr := l.LimitResponse; lr != nil && lr.Type == ResponseQueue {
			q := *lr
			if q.Queues == nil {
				q.Queues = ptr(DefaultQueues)
			}
			if q.HandSize == nil {
				q.HandSize = ptr(min(DefaultHandSize, *q.Queues))
			}
			if q.QueueLengthLimit == nil {
				q.QueueLengthLimit = ptr(DefaultQueueLengthLimit)
			}
			l.LimitResponse = &q
		}
		levels[i] = l
	}
	out.Levels = levels
	return out
}

// ConfigError names the configuration key that is wrong and why.
type ConfigError struct {
	Key    string // e.g. flowcontrol.levels[1].limit_response.hand_size
	Reason string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Reason }

// Validate refuses a malformed or inconsistent configuration (after
// WithDefaults), naming the first offending key.
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return &ConfigError{Key: "flowcontrol." + key, Reason: fmt.Sprintf(format, args...)}
	}
	if n := *c.ServerConcurrency; n < 1 {
		return bad("server_concurrency", "%d: must be at least 1", n)
	}
	if len(c.Levels) == 0 {
		return bad("levels", "no level defined")
	}
	levels := map[string]bool{}
	shares := 0
	for i, l := range c.Levels {
		key := fmt.Sprintf("levels[%d]", i)
		if l.Name == "" {
			return bad(key+".name", "missing")
		}
		if levels[l.Name] {
			return bad(key+".name", "%q is defined twice", l.Name)
		}
		levels[l.Name] = true
		if err := l.validate(key, bad); err != nil {
			return err
		}
		shares += *l.NominalConcurrencyShares
	}
	if shares == 0 {
		return bad("levels", "the nominal_concurrency_shares sum to 0; at least one level needs shares")
	}
	if len(c.Schemas) == 0 {
		return bad("schemas", "no schema defined")
	}
	schemas := map[string]bool{}
	catchAll := false
	for i, s := range c.Schemas {
		key := fmt.Sprintf("schemas[%d]", i)
		if s.Name == "" {
			return bad(key+".name", "missing")
		}
		if schemas[s.Name] {
			return bad(key+".name", "%q is defined twice", s.Name)
		}
		schemas[s.Name] = true
		if s.Precedence < 1 || s.Precedence > 10000 {
			return bad(key+".precedence", "%d: must be within [1, 10000]", s.Precedence)
		}
		if !levels[s.Level] {
			return bad(key+".level", "unknown level %q", s.Level)
		}
		switch s.Distinguisher {
		case "", DistinguishNone, DistinguishByPod, DistinguishByCaller:
		default:
			return bad(key+".distinguisher", "%q: must be pod, caller or none", s.Distinguisher)
		}
		m := s.Match
		if !m.Any && len(m.Verbs)+len(m.Paths)+len(m.Commands) == 0 {
			return bad(key+".match", "matches nothing: list verbs, paths or commands, or set any: true")
		}
		for j, v := range m.Verbs {
			if v == "" {
				return bad(fmt.Sprintf("%s.match.verbs[%d]", key, j), "empty verb")
			}
		}
		for j, cmd := range m.Commands {
			if cmd == "" {
				return bad(fmt.Sprintf("%s.match.commands[%d]", key, j), "empty command")
			}
		}
		for j, p := range m.Paths {
			if err := checkPathPattern(p); err != nil {
				return bad(fmt.Sprintf("%s.match.paths[%d]", key, j), "%q: %v", p, err)
			}
		}
		catchAll = catchAll || m.Any
	}
	if !catchAll {
		return bad("schemas", "no schema matches every request: add one with match: {any: true}")
	}
	return nil
}

func (l Level) validate(key string, bad func(key, format string, args ...any) error) error {
	if n := *l.NominalConcurrencyShares; n < 0 {
		return bad(key+".nominal_concurrency_shares", "%d: must not be negative", n)
	}
	if p := *l.LendablePercent; p < 0 || p > 100 {
		return bad(key+".lendable_percent", "%d: must be within [0, 100]", p)
	}
	if p := l.BorrowingLimitPercent; p != nil && *p < 0 {
		return bad(key+".borrowing_limit_percent", "%d: must not be negative", *p)
	}
	switch l.Type {
	case TypeExempt:
		if l.LimitResponse != nil {
			return bad(key+".limit_response", "an Exempt level never queues or rejects; remove it")
		}
		return nil
	case TypeLimited:
	default:
		return bad(key+".type", "%q: must be Exempt or Limited", l.Type)
	}
	lr := l.LimitResponse
	if lr == nil {
		return bad(key+".limit_response", "missing: a Limited level needs {type: Queue, …} or {type: Reject}")
	}
	switch lr.Type {
	case ResponseReject:
		if lr.Queues != nil || lr.HandSize != nil || lr.QueueLengthLimit != nil {
			return bad(key+".limit_response", "type Reject takes no queues, hand_size or queue_length_limit")
		}
		return nil
	case ResponseQueue:
	default:
		return bad(key+".limit_response.type", "%q: must be Queue or Reject", lr.Type)
	}
	queues, hand, qll := *lr.Queues, *lr.HandSize, *lr.QueueLengthLimit
	switch {
	case queues < 1:
		return bad(key+".limit_response.queues", "%d: must be at least 1", queues)
	case qll < 1:
		return bad(key+".limit_response.queue_length_limit", "%d: must be at least 1", qll)
	case hand < 1:
		return bad(key+".limit_response.hand_size", "%d: must be at least 1", hand)
	case hand > queues:
		return bad(key+".limit_response.hand_size", "%d exceeds queues %d", hand, queues)
	}
	if _, err := shufflesharding.NewDealer(queues, hand); err != nil {
		return bad(key+".limit_response.hand_size", "%v", err)
	}
	return nil
}

// checkPathPattern accepts "*", an exact path, or a path ending in "/*".
func checkPathPattern(p string) error {
	if p == "*" {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return errors.New(`must start with "/" (or be "*")`)
	}
	if i := strings.IndexByte(p, '*'); i >= 0 && (i != len(p)-1 || !strings.HasSuffix(p, "/*")) {
		return errors.New(`"*" is allowed only as a final "/*"`)
	}
	return nil
}

// Package nodes is the node registry every placement of every plugin obeys:
// a node's admission, drain, isolation and retirement, its live session and
// the observations its heartbeat reports, and the ledger of usage released
// when it was isolated (docs/nodes.md).
//
// The registration record, its derived status and the rules of each
// transition are pure values and functions in this file and ledger.go;
// registry.go runs them against a store in compare-and-swap transactions.
package nodes

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/eru-extend/resources/types"
)

// Admission is whether a node may be part of the cluster at all.
type Admission string

// Admissions. RETIRED is final.
const (
	Admitted Admission = "ADMITTED"
	Revoked  Admission = "REVOKED"
	Retired  Admission = "RETIRED"
)

// Status is a node's state as derived on read (first match wins).
type Status string

// Statuses, in the order they are decided.
const (
	StatusRetired     Status = "RETIRED"
	StatusRevoked     Status = "REVOKED"
	StatusUnavailable Status = "UNAVAILABLE"
	StatusDrained     Status = "DRAINED"
	StatusDraining    Status = "DRAINING"
	StatusSyncing     Status = "SYNCING"
	StatusReady       Status = "READY"
)

// Statuses lists every status, for validating a --status filter.
func Statuses() []Status {
	return []Status{StatusSyncing, StatusReady, StatusDraining, StatusDrained, StatusUnavailable, StatusRevoked, StatusRetired}
}

// Keys of the registry, relative to the store prefix.
const (
	RegistrationPrefix = "/nodes/"
	SessionPrefix      = "/sessions/"
	CommandPrefix      = "/commands/"
)

// RecordPrefix is where a resource plugin keeps its node records: the record
// of node n is at RecordPrefix(resource)+n.
func RecordPrefix(resource string) string { return "/resource/" + resource + "/" }

// RegistrationKey is where a node's registration lives.
func RegistrationKey(node string) string { return RegistrationPrefix + node }

// SessionKey is where a node's live session lives.
func SessionKey(node string) string { return SessionPrefix + node }

// Registration is the stored record of one node.
type Registration struct {
	NodeID              string    `json:"node_id"`
	Admission           Admission `json:"admission"`
	Drain               bool      `json:"drain"`
	Isolated            bool      `json:"isolated"`
	IsolatedIncarnation int64     `json:"isolated_incarnation"`
	Incarnation         int64     `json:"incarnation"`
	BootID              string    `json:"boot_id"`
	Version             int64     `json:"registration_version"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
	// SessionEver is set by the first heartbeat; LastSeen by every one.
	SessionEver bool         `json:"session_ever"`
	LastSeen    *time.Time   `json:"last_seen,omitempty"`
	Observation *Observation `json:"observation,omitempty"`
	// Released is the isolation ledger: per plugin, the usage isolation
	// released that later decreases are taken from first.
	Released map[string]types.Amounts `json:"released,omitempty"`
}

// Session is the value of a node's session key; the key expires with its
// lease, so a session that can be read is live.
type Session struct {
	Since     time.Time `json:"since"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Observation is what the node's last heartbeat measured on its host. A
// measurement it could not read is nil, never zero.
type Observation struct {
	Version     int64        `json:"observation_version"`
	ObservedAt  time.Time    `json:"observed_at"`
	Clock       Clock        `json:"clock"`
	HostUsage   HostUsage    `json:"host_usage"`
	MemoryTight *MemoryTight `json:"memory_tight,omitempty"`
	// Pools are the storage pool paths the last heartbeat checked.
	Pools map[string]PoolCheck `json:"pools,omitempty"`
}

// Clock is the kernel's view of the node's clock and, for a heartbeat sent
// through the daemon, the daemon's measurement of its offset.
type Clock struct {
	Synchronization string `json:"synchronization"` // SYNCHRONIZED, UNSYNCHRONIZED, UNSPECIFIED
	MaxErrorMs      *int64 `json:"max_error_ms,omitempty"`
	// OffsetMs is the node clock minus the daemon's (positive: the node
	// runs ahead), true within ±UncertaintyMs, half the measuring round
	// trip; both absent for a heartbeat written to the store directly.
	OffsetMs         *int64 `json:"offset_ms,omitempty"`
	UncertaintyMs    *int64 `json:"uncertainty_ms,omitempty"`
	ExceedsTolerance bool   `json:"exceeds_tolerance"`
}

// offsetBeyond reports whether the measured offset, less its uncertainty,
// is beyond the tolerance.
func (c Clock) offsetBeyond(tolerance time.Duration) bool {
	if c.OffsetMs == nil || c.UncertaintyMs == nil {
		return false
	}
	off := time.Duration(*c.OffsetMs) * time.Millisecond
	if off < 0 {
		off = -off
	}
	return off-time.Duration(*c.UncertaintyMs)*time.Millisecond > tolerance
}

// Clock synchronisation states.
const (
	ClockSynchronized   = "SYNCHRONIZED"
	ClockUnsynchronized = "UNSYNCHRONIZED"
	ClockUnspecified    = "UNSPECIFIED"
)

// HostUsage is the host's usage sample; pressures are 60-second averages in
// basis points.
type HostUsage struct {
	MemoryAvailableBytes *int64 `json:"memory_available_bytes,omitempty"`
	CPUPressureBP        *int64 `json:"cpu_pressure_bp,omitempty"`
	MemoryPressureBP     *int64 `json:"memory_pressure_bp,omitempty"`
}

// MemoryTight is present while the host's available memory is below the
// configured floor.
type MemoryTight struct {
	Since time.Time `json:"since"`
}

// Policy is the registry configuration the rules read.
type Policy struct {
	RequireSession     bool
	ClockSkewTolerance time.Duration
}

// NewRegistration is the record a node gets on its first write.
func NewRegistration(node string, now time.Time) *Registration {
	return &Registration{
		NodeID:    node,
		Admission: Admitted,
		Version:   1,
		CreatedAt: now.UTC(),
		UpdatedAt: now.UTC(),
	}
}

// Status derives the node's status. live says whether its session key is
// present; holdsUsage whether any plugin records usage on it.
func (r *Registration) Status(live, holdsUsage bool, p Policy) Status {
	switch {
	case r.Admission == Retired:
		return StatusRetired
	case r.Admission == Revoked:
		return StatusRevoked
	case r.Isolated || (r.SessionEver && !live):
		return StatusUnavailable
	case r.Drain && !holdsUsage:
		return StatusDrained
	case r.Drain:
		return StatusDraining
	case p.RequireSession && !r.SessionEver:
		return StatusSyncing
	default:
		return StatusReady
	}
}

// ClockExceeds reports whether the observed clock is unsynchronised, its
// maximum error is beyond the tolerance, or its measured offset less its
// uncertainty is.
func (o *Observation) ClockExceeds(tolerance time.Duration) bool {
	if o == nil {
		return false
	}
	if o.Clock.Synchronization == ClockUnsynchronized || o.Clock.offsetBeyond(tolerance) {
		return true
	}
	return o.Clock.MaxErrorMs != nil && time.Duration(*o.Clock.MaxErrorMs)*time.Millisecond > tolerance
}

// Refusal says why the node may not take new work, or "" when it may: every
// reason that holds, joined. A nil registration is a node the registry has
// never seen: it may.
func (r *Registration) Refusal(live bool, p Policy) string {
	return strings.Join(r.Reasons(live, p), "; ")
}

// Reasons lists every reason the node may not take new work, in the order
// of the status table (admission, isolation, session, drain), then the
// host's own (memory, clock); none when it may.
func (r *Registration) Reasons(live bool, p Policy) []string {
	if r == nil {
		return nil
	}
	var out []string
	switch r.Admission {
	case Retired:
		out = append(out, "node is retired")
	case Revoked:
		out = append(out, "node is revoked")
	}
	if r.Isolated {
		out = append(out, "node is isolated")
	}
	if r.SessionEver && !live {
		out = append(out, "node is unavailable: its session expired")
	}
	if r.Drain {
		out = append(out, "node is draining")
	}
	if p.RequireSession && !r.SessionEver {
		out = append(out, "node is syncing: no session has reported yet")
	}
	if live && r.Observation != nil {
		if mt := r.Observation.MemoryTight; mt != nil {
			out = append(out, "node memory is tight since "+mt.Since.UTC().Format(time.RFC3339))
		}
		if r.Observation.ClockExceeds(p.ClockSkewTolerance) {
			out = append(out, "node clock exceeds tolerance: "+r.Observation.clockReason(p.ClockSkewTolerance))
		}
	}
	return out
}

// clockReason says how the clock exceeds the tolerance:
// "UNSYNCHRONIZED, max error 16s > 500ms".
func (o *Observation) clockReason(tolerance time.Duration) string {
	out := o.Clock.Synchronization
	if out == "" {
		out = ClockUnspecified
	}
	if o.Clock.MaxErrorMs != nil {
		maxErr := time.Duration(*o.Clock.MaxErrorMs) * time.Millisecond
		out += ", max error " + maxErr.String()
		if maxErr > tolerance {
			out += " > " + tolerance.String()
		}
	}
	if c := o.Clock; c.offsetBeyond(tolerance) {
		out += fmt.Sprintf(", offset %+dms ± %dms beyond %s", *c.OffsetMs, *c.UncertaintyMs, tolerance)
	}
	return out
}

// touch advances the version and the update time.
func (r *Registration) touch(now time.Time) {
	r.Version++
	r.UpdatedAt = now.UTC()
}

// ValidName checks a node name before it becomes part of a key: it must be
// non-empty, at most 253 bytes of UTF-8, and hold no '/', white space or
// control characters.
func ValidName(name string) error {
	if name == "" {
		return types.Invalid("node name is empty")
	}
	if len(name) > 253 {
		return types.Invalid("node name %q is longer than 253 bytes", types.Clip([]byte(name)))
	}
	if !utf8.ValidString(name) {
		return types.Invalid("node name %q is not valid UTF-8", types.Clip([]byte(name)))
	}
	for _, r := range name {
		if r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return types.Invalid("node name %q may not hold %q", name, r)
		}
	}
	return nil
}

// Pristine reports whether the registration holds nothing an operator or
// the isolation ledger put there: admitted, not drained, not isolated, no
// released usage. Only a pristine registration goes with the node's last
// plugin record.
func (r *Registration) Pristine() bool {
	return r.Admission == Admitted && !r.Drain && !r.Isolated && len(r.Released) == 0
}

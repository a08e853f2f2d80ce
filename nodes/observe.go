package nodes

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eru-extend/resources/types"
)

// Measurement is what a heartbeat read on its host. A reading it could not
// take is nil (or "" for the boot id), never zero.
// Its JSON is what `nodes heartbeat --via` sends the daemon.
type Measurement struct {
	BootID           string         `json:"boot_id,omitempty"`
	ClockSync        string         `json:"clock_sync,omitempty"` // SYNCHRONIZED, UNSYNCHRONIZED or UNSPECIFIED
	ClockMaxError    *time.Duration `json:"clock_max_error_ns,omitempty"`
	MemoryAvailable  *int64         `json:"memory_available_bytes,omitempty"`
	CPUPressureBP    *int64         `json:"cpu_pressure_bp,omitempty"`
	MemoryPressureBP *int64         `json:"memory_pressure_bp,omitempty"`
	// Pools is what the heartbeat found at each storage pool path the node
	// declares (nil: not checked).
	Pools map[string]PoolCheck `json:"pools,omitempty"`
	// Offset is the node's clock offset as the daemon measured it around
	// the heartbeat (never sent by the node: the daemon sets it); nil when
	// the heartbeat was written to the store directly.
	Offset *ClockOffset `json:"-"`
}

// Check refuses a measurement no host could have taken: one a node sent
// through the daemon (nodes heartbeat --via), which Measure did not read.
func (m Measurement) Check() error {
	switch m.ClockSync {
	case "", ClockSynchronized, ClockUnsynchronized, ClockUnspecified:
	default:
		return types.Invalid("measurement: clock_sync %q: want %s, %s or %s", types.Clip([]byte(m.ClockSync)), ClockSynchronized, ClockUnsynchronized, ClockUnspecified)
	}
	if m.ClockMaxError != nil && *m.ClockMaxError < 0 {
		return types.Invalid("measurement: clock_max_error_ns %d: want 0 or more", int64(*m.ClockMaxError))
	}
	if m.MemoryAvailable != nil && *m.MemoryAvailable < 0 {
		return types.Invalid("measurement: memory_available_bytes %d: want 0 or more", *m.MemoryAvailable)
	}
	for _, p := range []struct {
		name string
		bp   *int64
	}{{"cpu_pressure_bp", m.CPUPressureBP}, {"memory_pressure_bp", m.MemoryPressureBP}} {
		if p.bp != nil && (*p.bp < 0 || *p.bp > 10000) {
			return types.Invalid("measurement: %s %d: want 0 to 10000 (basis points of a share)", p.name, *p.bp)
		}
	}
	return nil
}

// ClockOffset is a node's clock measured against the daemon's: Offset is
// the node clock minus the daemon clock (positive: the node runs ahead),
// true within ±Uncertainty.
type ClockOffset struct {
	Offset      time.Duration
	Uncertainty time.Duration
}

// OffsetBetween measures a node's clock from one reading of it, nodeTime,
// that the node took after the daemon answered at sent and before the
// daemon received the next request at received (both on the daemon's
// clock): the reading belongs to some daemon instant within the round
// trip, so the offset is the reading minus the round trip's midpoint and
// the uncertainty half the round trip.
func OffsetBetween(nodeTime, sent, received time.Time) ClockOffset {
	half := received.Sub(sent) / 2
	return ClockOffset{Offset: nodeTime.Sub(sent.Add(half)), Uncertainty: half}
}

// PoolCheck is what a heartbeat found at one declared storage pool path:
// a failing path makes the node's attachment to the pool unavailable.
type PoolCheck struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}

// ClockReading replaces the kernel's clock reading (--clock-sync,
// --clock-max-error); nil fields are read from the kernel.
type ClockReading struct {
	Sync     string
	MaxError *time.Duration
}

// Measure reads the host: the boot id, available memory and pressure under
// procRoot (normally /proc), and the clock from adjtimex unless clock
// overrides it (a state given without an error reports no error).
func Measure(procRoot string, clock ClockReading) Measurement {
	var m Measurement
	if data, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/random/boot_id")); err == nil {
		m.BootID = strings.TrimSpace(string(data))
	}
	m.MemoryAvailable = memAvailable(filepath.Join(procRoot, "meminfo"))
	m.CPUPressureBP = pressure(filepath.Join(procRoot, "pressure/cpu"))
	m.MemoryPressureBP = pressure(filepath.Join(procRoot, "pressure/memory"))
	if clock.Sync != "" {
		// A clock state given by hand comes with its error or none: the
		// kernel's error belongs to the kernel's state.
		m.ClockSync, m.ClockMaxError = clock.Sync, clock.MaxError
		return m
	}
	m.ClockSync, m.ClockMaxError = kernelClock()
	if clock.MaxError != nil {
		m.ClockMaxError = clock.MaxError
	}
	return m
}

// kernelClock asks adjtimex (read-only) whether the clock is synchronised
// and how large its maximum error is.
func kernelClock() (string, *time.Duration) {
	var tx unix.Timex
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return ClockUnspecified, nil
	}
	maxErr := time.Duration(tx.Maxerror) * time.Microsecond
	if state == unix.TIME_ERROR || tx.Status&unix.STA_UNSYNC != 0 {
		return ClockUnsynchronized, &maxErr
	}
	return ClockSynchronized, &maxErr
}

// memAvailable reads MemAvailable from a meminfo file, in bytes.
func memAvailable(path string) *int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
				return nil
			}
			bytes := kb * 1024
			return &bytes
		}
	}
	return nil
}

// pressure reads the "some avg60" share of a PSI file, in basis points.
func pressure(path string) *int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "some" {
			continue
		}
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, "avg60="); ok {
				pct, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(pct) || pct < 0 || pct > 100 {
					return nil
				}
				bp := int64(math.Round(pct * 100))
				return &bp
			}
		}
	}
	return nil
}

// observe turns a measurement into the node's next observation.
func (m Measurement) observe(prev *Observation, now time.Time, memoryTight int64) *Observation {
	o := &Observation{
		Version:    1,
		ObservedAt: now.UTC(),
		Clock:      Clock{Synchronization: m.ClockSync},
		HostUsage: HostUsage{
			MemoryAvailableBytes: m.MemoryAvailable,
			CPUPressureBP:        m.CPUPressureBP,
			MemoryPressureBP:     m.MemoryPressureBP,
		},
	}
	if o.Clock.Synchronization == "" {
		o.Clock.Synchronization = ClockUnspecified
	}
	if len(m.Pools) > 0 {
		o.Pools = m.Pools
	}
	if m.ClockMaxError != nil {
		// A bound, so rounded up: 500.9ms is beyond a 500ms tolerance
		// (short of overflowing: the largest error reads back as one).
		ms := m.ClockMaxError.Milliseconds()
		if *m.ClockMaxError%time.Millisecond != 0 && ms < math.MaxInt64/int64(time.Millisecond) {
			ms++
		}
		o.Clock.MaxErrorMs = &ms
	}
	if m.Offset != nil {
		// The offset to the nearest millisecond; the uncertainty is a
		// bound, so rounded up (a loopback round trip is 1ms, not 0).
		off := m.Offset.Offset.Round(time.Millisecond).Milliseconds()
		unc := (m.Offset.Uncertainty + time.Millisecond - 1).Milliseconds()
		o.Clock.OffsetMs, o.Clock.UncertaintyMs = &off, &unc
	}
	if prev != nil {
		o.Version = prev.Version + 1
	}
	if m.MemoryAvailable != nil && *m.MemoryAvailable < memoryTight {
		since := now.UTC()
		if prev != nil && prev.MemoryTight != nil {
			since = prev.MemoryTight.Since
		}
		o.MemoryTight = &MemoryTight{Since: since}
	}
	return o
}

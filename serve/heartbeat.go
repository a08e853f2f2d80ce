package serve

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/eru-extend/resources/cmd"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/types"
)

// MaxStampAge bounds the round trip of a clock measurement: a heartbeat
// whose stamp is older measures nothing useful (its uncertainty would
// hide any skew) and is refused as aborted, so an agent retries it.
const MaxStampAge = 10 * time.Second

// stamper seals the daemon's clock stamps (GET /v1/clock) with a key only
// this process knows, so that the time a heartbeat brings back is one the
// daemon itself answered.
type stamper struct {
	key []byte
	now func() time.Time
}

func newStamper(now func() time.Time) *stamper {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails since Go 1.24
	return &stamper{key: key, now: now}
}

func (s *stamper) mac(t int64) []byte {
	h := hmac.New(sha256.New, s.key)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t))
	h.Write(b[:])
	return h.Sum(nil)
}

// stamp seals t.
func (s *stamper) stamp(t time.Time) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	return base64.RawURLEncoding.EncodeToString(append(b[:], s.mac(t.UnixNano())...))
}

// open checks a stamp and answers the time it seals: invalid_argument for
// what is no stamp at all, aborted for a stamp this daemon did not seal.
// The latter is what a heartbeat agent meets when the daemon restarted
// between its two steps, or when the two went to different daemons behind
// one address: taking a fresh stamp, on its next tick, is the remedy.
func (s *stamper) open(stamp string) (time.Time, error) {
	raw, err := base64.RawURLEncoding.DecodeString(stamp)
	if err != nil || len(raw) != 8+sha256.Size {
		return time.Time{}, types.Invalid("stamp %q is not a stamp of GET /v1/clock", types.Clip([]byte(stamp)))
	}
	t := int64(binary.BigEndian.Uint64(raw[:8]))
	if !hmac.Equal(raw[8:], s.mac(t)) {
		return time.Time{}, types.Errorf(types.Aborted, "stamp %q is not one this daemon made (another daemon's, or made before a restart): take a fresh one from GET /v1/clock", types.Clip([]byte(stamp)))
	}
	return time.Unix(0, t), nil
}

// clock is GET /v1/clock, step 1 of a heartbeat through the daemon: the
// daemon's time as it answers, sealed.
func (s *stamper) clock(w http.ResponseWriter, _ *http.Request) {
	now := s.now()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(cmd.ClockStamp{DaemonTime: now.UTC(), Stamp: s.stamp(now)})
}

// measure is the node's clock offset from a heartbeat received at
// received: the node read nodeTime after the daemon answered the stamp and
// before this request arrived.
func (s *stamper) measure(stamp string, nodeTime, received time.Time) (nodes.ClockOffset, error) {
	sent, err := s.open(stamp)
	if err != nil {
		return nodes.ClockOffset{}, err
	}
	if nodeTime.IsZero() {
		return nodes.ClockOffset{}, types.Invalid("node_time is missing: the node's clock read after the stamp arrived")
	}
	if age := received.Sub(sent); age < 0 || age > MaxStampAge {
		return nodes.ClockOffset{}, types.Errorf(types.Aborted, "stamp is %s old: want at most %s; take a fresh one from GET /v1/clock", age.Round(time.Millisecond), MaxStampAge)
	}
	return nodes.OffsetBetween(nodeTime, sent, received), nil
}

// heartbeat is POST /v1/nodes/{id}:heartbeat, step 2: it records the
// node's measurement with the clock offset the daemon measured, through
// the same registry operation as `nodes heartbeat`, and answers the record
// after.
func (d *Daemon) heartbeat(s *stamper, token string) http.HandlerFunc {
	const route = routeHeartbeat
	return func(w http.ResponseWriter, r *http.Request) {
		received := s.now()
		result := "ok"
		defer func() { d.metrics.requests.WithLabelValues(route, result).Inc() }()
		fail := func(err error) {
			result = "failed"
			class := types.ClassOf(err)
			writeError(w, httpStatus(class), string(class), err.Error())
		}
		if !authorized(w, r, token) {
			result = "refused"
			return
		}
		node, err := pathID(strings.TrimSuffix(r.PathValue("action"), ":heartbeat"))
		if err == nil {
			err = checkQuery(r, route)
		}
		if err != nil {
			fail(err)
			return
		}
		var req cmd.HeartbeatRequest
		data, err := readBody(r.Body)
		if err != nil {
			fail(err)
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			fail(types.Invalid("body: %s", err.Error()))
			return
		}
		if err := onlyOneValue(data, dec); err != nil {
			fail(err)
			return
		}
		offset, err := s.measure(req.Stamp, req.NodeTime, received)
		if err != nil {
			fail(err)
			return
		}
		var ttl time.Duration
		if req.TTL != "" {
			if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 {
				fail(types.Invalid("ttl %q: want a duration more than 0 and at most %s", req.TTL, nodes.MaxSessionTTL))
				return
			}
		}
		m := req.Measurement
		m.Offset = &offset
		raw, err := cmd.RecordHeartbeat(d.options(d.cfg, d.linearizable()), d.name, node, m, ttl, req.Register)
		d.log.Info("operator call", "route", route, "peer", caller(r), "node", node, "offset", offset.Offset, "uncertainty", offset.Uncertainty, "error", errString(err))
		if err != nil {
			fail(err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(raw, '\n'))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

package flowcontrol

import "time"

// maxRetryAfter caps the Retry-After advice, in seconds.
const maxRetryAfter = 32

// dropTracker advises each level's rejected clients when to retry, as
// Kubernetes' dropped-requests tracker does: the advice starts at 1 s,
// doubles (at most every advice-period, up to 32 s) while the level rejected
// at least three times the advice in requests over the last advice-period
// seconds, and shrinks by 1 s at each new second of rejections in which
// fewer than the advice were rejected over that window. Its owner serializes
// calls.
type dropTracker struct {
	levels map[string]*dropStats
}

type dropSecond struct {
	unix  int64
	count int64
}

type dropStats struct {
	history    []dropSecond // finished seconds, oldest first
	current    dropSecond   // the second being counted
	retryAfter int64
	bumpedAt   int64 // unix second of the last doubling
}

func newDropTracker() *dropTracker { return &dropTracker{levels: map[string]*dropStats{}} }

// record notes one rejected request of level at now.
func (t *dropTracker) record(level string, now time.Time) {
	s := t.levels[level]
	if s == nil {
		s = &dropStats{retryAfter: 1}
		t.levels[level] = s
	}
	unix := now.Unix()
	if s.current.unix == unix {
		s.current.count++
		return
	}
	// A new second: file the previous one and revise the advice.
	s.history = append(s.history, s.current)
	keep := min(2*s.retryAfter, maxRetryAfter)
	first := 0
	for first < len(s.history) && s.current.unix-s.history[first].unix > keep {
		first++
	}
	s.history = s.history[first:]
	s.current = dropSecond{unix: unix, count: 1}
	s.revise(unix)
}

func (s *dropStats) revise(unix int64) {
	var dropped int64
	for i := len(s.history) - 1; i >= 0 && unix-s.history[i].unix <= s.retryAfter; i-- {
		dropped += s.history[i].count
	}
	switch {
	case unix-s.bumpedAt >= s.retryAfter && dropped >= 3*s.retryAfter:
		s.retryAfter = min(2*s.retryAfter, maxRetryAfter)
		s.bumpedAt = unix
	case dropped < s.retryAfter && s.retryAfter > 1:
		s.retryAfter--
	}
}

// retryAfter is the level's current advice.
func (t *dropTracker) retryAfter(level string) time.Duration {
	if s := t.levels[level]; s != nil {
		return time.Duration(s.retryAfter) * time.Second
	}
	return time.Second
}

package serve

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Request describes one call to admit: a forwarded verb, an HTTP path or an
// operator command. It is what flow control classifies (flowcontrol.md).
type Request struct {
	Kind   string // "verb" or "http"
	Verb   string // the plugin verb, for Kind "verb"
	Path   string // the URL path, for Kind "http"
	Caller string // who asked: "uid:N" on the socket, the client's CN or address over HTTP
	Stdin  []byte // the verb's request, for distinguishers that read it (podname)
}

// Rejection is a call flow control refused.
type Rejection struct {
	Level      string        // the priority level that had no room
	RetryAfter time.Duration // when to try again
}

// Line is the one-line refusal an exec'd binary prints.
func (r *Rejection) Line(binary, verb string) string {
	return fmt.Sprintf("%s: %s: unavailable: too many requests (priority level %s, retry after %ds)", binary, verb, r.Level, r.seconds())
}

func (r *Rejection) seconds() int { return int(math.Ceil(max(r.RetryAfter, time.Second).Seconds())) }

// Admission is the one function every call passes through before it runs:
// it returns a release to call when the call ends, or a rejection. It may
// wait (queue) until ctx ends. Flow control plugs in here.
type Admission func(ctx context.Context, r Request) (release func(), rej *Rejection)

// AdmitAll admits everything at once.
func AdmitAll(context.Context, Request) (func(), *Rejection) { return func() {}, nil }

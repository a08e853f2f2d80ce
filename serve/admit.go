package serve

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/eru-extend/resources/flowcontrol"
)

// Request describes one call to admit: a forwarded verb, an HTTP path or an
// operator command. It is what flow control classifies (docs/flowcontrol.md).
type Request struct {
	Kind   string // "verb" or "http"
	Verb   string // the plugin verb, for Kind "verb"
	Path   string // the URL path, for Kind "http"
	Pod    string // the request's podname, else its nodename (distinguisher pod)
	Caller string // who asked: "uid:N ppid:M" on the socket, "cn:…" or "addr:…" over HTTP
	Stdin  []byte // the verb's request
}

// Admitted is a call admission let through: the level and schema it runs
// at (for the X-Eru-PF-* headers), how long it queued, and Release, to be
// called once when the call ends.
type Admitted struct {
	Level, Schema string
	Waited        time.Duration
	Release       func()
}

// Rejection is a call flow control refused.
type Rejection struct {
	Level      string        // the priority level that had no room
	Schema     string        // the flow schema the call matched
	Reason     string        // queue-full, concurrency-limit, time-out, cancelled, shutdown
	RetryAfter time.Duration // when to try again
}

// Line is the one-line refusal an exec'd binary prints.
func (r *Rejection) Line(binary, verb string) string {
	return fmt.Sprintf("%s: %s: unavailable: %s", binary, verb, r.message())
}

func (r *Rejection) message() string {
	return fmt.Sprintf("too many requests (priority level %s, retry after %ds)", r.Level, r.seconds())
}

func (r *Rejection) seconds() int { return int(math.Ceil(max(r.RetryAfter, time.Second).Seconds())) }

// Admission is the one function every call passes through before it runs:
// it returns what was admitted, or a rejection. It may wait (queue) until
// ctx ends.
type Admission func(ctx context.Context, r Request) (*Admitted, *Rejection)

// AdmitAll admits everything at once.
func AdmitAll(context.Context, Request) (*Admitted, *Rejection) {
	return &Admitted{Release: func() {}}, nil
}

// FlowControl is the admission of a flow-control controller.
func FlowControl(ctl *flowcontrol.Controller) Admission {
	return func(ctx context.Context, r Request) (*Admitted, *Rejection) {
		t, err := ctl.Admit(ctx, flowcontrol.Request{Verb: r.Verb, Path: r.Path, Pod: r.Pod, Caller: r.Caller})
		if err != nil {
			if rej, ok := flowcontrol.IsRejected(err); ok {
				return nil, &Rejection{Level: rej.Level, Schema: rej.Schema, Reason: rej.Reason, RetryAfter: rej.RetryAfter}
			}
			return nil, &Rejection{Level: "unknown", Reason: err.Error(), RetryAfter: time.Second}
		}
		return &Admitted{Level: t.Level(), Schema: t.Schema(), Waited: t.Waited(), Release: t.Done}, nil
	}
}

package serve

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/forward"
)

// startDaemon runs a daemon on an embedded store in a fresh folder with
// the given admission, and returns the folder's config file.
func startDaemon(t *testing.T, admit Admission) string {
	t.Helper()
	_, file := flowDaemon(t, "", admit)
	return file
}

func forwardCall(t *testing.T, file, verb, stdin string) (int, bool, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code, handled, _ := forward.Try(forward.Call{Binary: "storage", Args: []string{"--config", file, verb},
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
	return code, handled, out.String(), errb.String()
}

// TestAFlowControlRejectionIsAnsweredNotRunLocally: a call the admission
// refuses comes back as exit 128 and the one-line refusal, handled (the
// binary must not run it itself), and the verb never ran.
func TestAFlowControlRejectionIsAnsweredNotRunLocally(t *testing.T) {
	var asked atomic.Int64
	var seen atomic.Value
	file := startDaemon(t, func(_ context.Context, r Request) (*Admitted, *Rejection) {
		asked.Add(1)
		seen.Store(r)
		return nil, &Rejection{Level: "placement", RetryAfter: 1500 * time.Millisecond}
	})
	code, handled, out, errOut := forwardCall(t, file, "calculate-deploy", `{"nodename":"n1","deploy_count":1}`)
	require.True(t, handled, "a rejection is an answer, not a reason to run locally")
	require.Equal(t, 128, code)
	require.Empty(t, out)
	require.Equal(t, "storage: calculate-deploy: unavailable: too many requests (priority level placement, retry after 2s)\n", errOut)
	require.Equal(t, int64(1), asked.Load())
	r := seen.Load().(Request)
	require.Equal(t, "verb", r.Kind)
	require.Equal(t, "calculate-deploy", r.Verb)
	require.Equal(t, `{"nodename":"n1","deploy_count":1}`, string(r.Stdin))
	require.True(t, strings.HasPrefix(r.Caller, "uid:"))
	require.Contains(t, r.Caller, " ppid:", "the caller names the peer's parent process")
	require.Equal(t, "node:n1", r.Pod, "without a podname the node names the flow")
	_, err := os.Stat(filepath.Join(filepath.Dir(file), "eru-resources.db"))
	require.True(t, os.IsNotExist(err), "the verb never ran: no store was created")
}

// TestAdmissionIsReleasedAfterEveryCall: what the admission hands out is
// given back once the call has run.
func TestAdmissionIsReleasedAfterEveryCall(t *testing.T) {
	var inFlight, admitted atomic.Int64
	file := startDaemon(t, func(context.Context, Request) (*Admitted, *Rejection) {
		inFlight.Add(1)
		admitted.Add(1)
		return &Admitted{Release: func() { inFlight.Add(-1) }}, nil
	})
	for range 5 {
		code, handled, out, errOut := forwardCall(t, file, "name", "")
		require.True(t, handled)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "\"storage\"\n", out)
	}
	require.Equal(t, int64(5), admitted.Load())
	require.Equal(t, int64(0), inFlight.Load())
}

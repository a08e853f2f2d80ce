package serve

import (
	"io"
	"sync"
	"time"

	"github.com/eru-extend/resources/internal/forward"
)

// keepalive tells a read's client, every interval while the daemon still
// holds its call (waiting for a seat, or running), that the daemon is
// alive: the client takes forward.ReadStall of silence for a stalled
// daemon and runs the call itself. A read answered within one interval
// costs nothing; a stopped daemon sends nothing.
type keepalive struct {
	mu    sync.Mutex
	w     io.Writer
	every time.Duration
	timer *time.Timer
	done  bool
}

func startKeepalive(w io.Writer, every time.Duration) *keepalive {
	k := &keepalive{w: w, every: every}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.timer = time.AfterFunc(every, k.beat)
	return k
}

func (k *keepalive) beat() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return
	}
	if _, err := k.w.Write([]byte{forward.Waiting}); err != nil {
		k.done = true // the client went away: its answer will be lost too
		return
	}
	k.timer.Reset(k.every)
}

// stop ends the beats: once it returns, none is being or will be written,
// so the answer can follow on the connection.
func (k *keepalive) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.done = true
	k.timer.Stop()
}

package serve

import (
	"context"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hangup watches the connection of a call that waits (for its node's lock
// or for a seat) and cancels the wait when the client has closed it: a
// client killed by core's timeout, or a read's client that gave up and ran
// the call itself, no longer wants it, and a call nobody waits for must
// not take a seat from one somebody does. The client shuts its side for
// writing once its request is whole, which is not a hangup; only a closed
// connection is (POLLHUP). The check is a poll that does not wait, every
// interval, on a timer: nothing blocks a thread while the call waits.
type hangup struct {
	mu     sync.Mutex
	conn   syscall.RawConn
	every  time.Duration
	cancel context.CancelFunc
	timer  *time.Timer
	done   bool
	gone   bool
}

func watchHangup(conn syscall.Conn, every time.Duration, cancel context.CancelFunc) *hangup {
	h := &hangup{every: every, cancel: cancel}
	rc, err := conn.SyscallConn()
	if err != nil {
		h.done = true // nothing to watch: the call waits as before
		return h
	}
	h.conn = rc
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer = time.AfterFunc(every, h.check)
	return h
}

func (h *hangup) check() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return
	}
	if peerClosed(h.conn) {
		h.done, h.gone = true, true
		h.cancel()
		return
	}
	h.timer.Reset(h.every)
}

// stop ends the watch and reports whether the client had gone away.
func (h *hangup) stop() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if h.timer != nil {
		h.timer.Stop()
	}
	return h.gone
}

// peerClosed reports whether the other end of a unix stream connection
// has closed it (both directions shut: POLLHUP), without waiting.
func peerClosed(rc syscall.RawConn) bool {
	closed := false
	err := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd)}}
		n, err := unix.Poll(fds, 0)
		closed = err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
	})
	return err == nil && closed
}

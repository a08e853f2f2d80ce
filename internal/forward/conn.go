package forward

import (
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/eru-extend/resources/internal/configsearch"
)

// conn is a connected unix stream socket, driven by plain blocking system
// calls: the client makes one call and exits, so it needs neither package
// net's poller nor its resolver (which would link the C library).
type conn struct {
	fd int
	// send and recv bound each send and each receive (0: no bound); a
	// signal does not extend them.
	send, recv time.Duration
}

// MaxSocketPath is the longest path a unix socket address holds (its
// sun_path, less the terminating NUL): 107 bytes on Linux. A longer path
// can name no socket anyone could bind or connect to; the daemon refuses
// a serve.socket longer than this when it reads its config.
const MaxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

// dial connects to the unix socket at path. With a send timeout, the
// connect (a daemon that takes no connection leaves them in its listen
// queue, and a full queue blocks connect) and every send fail with EAGAIN
// once it has passed.
func dial(path string, send time.Duration) (*conn, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if send > 0 {
		if err := setTimeout(fd, unix.SO_SNDTIMEO, send); err != nil {
			_ = unix.Close(fd)
			return nil, err
		}
	}
	c := &conn{fd: fd, send: send}
	// A signal does not extend the bound: a connect interrupted (EINTR, a
	// socket timeout is set, so the kernel does not restart it) resumes
	// with what is left of it.
	start, shortened := time.Now(), false
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
		if err = c.interrupted(unix.SO_SNDTIMEO, send, start); err != nil {
			break
		}
		shortened = true
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	c.restore(unix.SO_SNDTIMEO, send, shortened)
	return c, nil
}

func setTimeout(fd, opt int, d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv)
}

// interrupted decides what a call bounded by d (socket option opt) does
// after EINTR: a socket timeout restarts from whole at each retry, so the
// retry gets only what is left of d, and none left is a timeout (EAGAIN).
func (c *conn) interrupted(opt int, d time.Duration, start time.Time) error {
	if d <= 0 {
		return nil
	}
	left := d - time.Since(start)
	if left <= 0 {
		return unix.EAGAIN
	}
	return setTimeout(c.fd, opt, left)
}

// restore gives opt its whole bound again after interrupted shortened it.
func (c *conn) restore(opt int, d time.Duration, shortened bool) {
	if shortened && d > 0 {
		_ = setTimeout(c.fd, opt, d)
	}
}

// socketExists reports whether path names a socket.
func socketExists(path string) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK
}

func (c *conn) Read(p []byte) (int, error) {
	start, shortened := time.Now(), false
	defer func() { c.restore(unix.SO_RCVTIMEO, c.recv, shortened) }()
	for {
		n, err := unix.Read(c.fd, p)
		switch {
		case err == unix.EINTR:
			if err := c.interrupted(unix.SO_RCVTIMEO, c.recv, start); err != nil {
				return 0, err
			}
			shortened = true
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *conn) Write(p []byte) (int, error) {
	written := 0
	start, shortened := time.Now(), false
	defer func() { c.restore(unix.SO_SNDTIMEO, c.send, shortened) }()
	for written < len(p) {
		n, err := unix.Write(c.fd, p[written:])
		if err == unix.EINTR {
			if err := c.interrupted(unix.SO_SNDTIMEO, c.send, start); err != nil {
				return written, err
			}
			shortened = true
			continue
		}
		if err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// setReadTimeout bounds each read of the socket to d (0: no bound); a read
// that times out fails with EAGAIN.
func (c *conn) setReadTimeout(d time.Duration) error {
	c.recv = d
	return setTimeout(c.fd, unix.SO_RCVTIMEO, d)
}

// CloseWrite tells the daemon the request is whole.
func (c *conn) CloseWrite() error { return unix.Shutdown(c.fd, unix.SHUT_WR) }

func (c *conn) Close() error { return unix.Close(c.fd) }

// reader buffers the answer: it reads as much as the socket holds at each
// read, so a small answer costs one system call.
type reader struct {
	conn *conn
	buf  []byte
	off  int
}

func (r *reader) fill() error {
	if r.off == len(r.buf) {
		r.buf, r.off = r.buf[:0], 0
	}
	if len(r.buf) == cap(r.buf) {
		grown := make([]byte, len(r.buf), 2*cap(r.buf)+1)
		copy(grown, r.buf)
		r.buf = grown
	}
	n, err := r.conn.Read(r.buf[len(r.buf):cap(r.buf)])
	r.buf = r.buf[:len(r.buf)+n]
	return err
}

func (r *reader) ReadByte() (byte, error) {
	for r.off == len(r.buf) {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	b := r.buf[r.off]
	r.off++
	return b, nil
}

func (r *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for r.off == len(r.buf) {
		if len(p) >= cap(r.buf) {
			return r.conn.Read(p) // a large frame goes straight in
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// maxConfig bounds the config file the client scans for serve.socket: the
// largest the command tree reads.
const maxConfig = configsearch.MaxFileSize

// readConfig reads a config file with plain system calls: os.ReadFile
// would first try to register the file with the runtime's poller, which
// sets the poller up (an epoll instance, an eventfd) for one read.
func readConfig(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) > maxConfig {
			// Past the limit, as the command tree refuses it: whatever
			// the buffer's capacity reached.
			return nil, fmt.Errorf("%s: larger than %d bytes", path, maxConfig)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):min(cap(buf), maxConfig+1)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

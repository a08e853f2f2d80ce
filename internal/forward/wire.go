// Package forward is the small client an exec'd plugin binary uses to hand
// its call to a running `serve` daemon over a unix socket, and the framing
// both ends speak. It imports nothing heavy (no etcd, no gRPC, no YAML, not
// even package net: a program that links net is linked dynamically when cgo
// is on, and pays the dynamic loader at every start), and its request path
// uses no reflection, so that a forwarded call pays little more than the
// start of a small static process.
//
// One connection carries one call:
//
//	client -> daemon   request frame (the header fields, see Request), stdin frame; then half-close
//	daemon -> client   for a read the daemon holds a while: Waiting, every ReadStall/2
//	daemon -> client   one status byte: Accepted, Declined or Refused
//	daemon -> client   after Accepted: the exit code (4 bytes), stdout frame, stderr frame
//
// A frame is a 4-byte big-endian length and that many bytes.
package forward

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Status bytes the daemon answers first.
const (
	// Accepted: the daemon runs the call; its answer follows. A connection
	// that dies after this byte may have run the call.
	Accepted byte = 'A'
	// Declined: the daemon does not serve this call (another config, a
	// config changed since it started, shutting down): run it locally.
	Declined byte = 'D'
	// Refused: the peer's credentials are not allowed on the socket.
	Refused byte = 'R'
	// Waiting: sent before the status byte, every ReadStall/2 while the
	// daemon holds a read (waiting for a seat, or running): a read's
	// client takes ReadStall of silence for a stalled daemon and runs the
	// call itself. A read answered sooner is sent none.
	Waiting byte = 'W'
)

// ReadStall is how long a read's client waits for the daemon (to take its
// connection and request, then for its next byte) before it runs the call
// itself: a daemon stopped (SIGSTOP) answers nothing, and core would
// otherwise wait its whole call timeout (30 s by default). A write's client
// gives up only before its request is whole in the daemon's hands.
const ReadStall = 5 * time.Second

// MaxFrame bounds one frame: a request's stdin may hold 16 MiB and one
// byte more (so the verb itself reports the limit), answers are smaller
// than the largest capacity answer of a big cluster.
const MaxFrame = 256 << 20

// MaxHeader bounds the request's header frame.
const MaxHeader = 1 << 20

// wireVersion is the first field of every request header: a daemon of
// another version declines (or fails to read) the request, and the binary
// then runs the call itself.
const wireVersion = "eru-forward/4"

// Request is what the client sends before stdin.
//
// On the wire it is one frame of NUL-separated fields: the wire version,
// Binary, Config, Dir, Verb, Found, then each argument. None of them can hold a
// NUL (they come from a command line and file paths), so no escaping is
// needed and neither end needs a JSON codec for it. Whether the verb
// writes is not sent: each end knows it from the verb (Write).
type Request struct {
	Binary string   // storage or compute
	Args   []string // as given to the binary, without the program name
	Config string   // the config file the binary resolved (absolute), "" for none
	Dir    string   // the client's working directory
	Verb   string
	// Found is how the binary found Config (one of the Found* values), so
	// that the daemon logs the call as the binary run locally would.
	Found string
}

// How a binary found its config file (Request.Found).
const (
	FoundFlag    = "flag"    // --config
	FoundEnv     = "env"     // $ERU_RESOURCE_CONFIG_PATH
	FoundOwn     = "own"     // the binary's own file in the working directory
	FoundSibling = "sibling" // the sibling plugin's file there
	FoundShared  = "shared"  // the shared file there
	FoundNone    = "none"    // no file: the built-in defaults
)

// errNUL: a field that the header cannot carry.
var errNUL = errors.New("a request field holds a NUL byte")

// MarshalBinary is the request's header frame content.
func (r Request) MarshalBinary() ([]byte, error) {
	fields := append([]string{wireVersion, r.Binary, r.Config, r.Dir, r.Verb, r.Found}, r.Args...)
	n := 0
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, errNUL
		}
		n += len(f) + 1
	}
	b := make([]byte, 0, n)
	for i, f := range fields {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, f...)
	}
	return b, nil
}

// UnmarshalBinary reads a header frame's content.
func (r *Request) UnmarshalBinary(data []byte) error {
	fields := strings.Split(string(data), "\x00")
	if len(fields) < 6 || fields[0] != wireVersion {
		return fmt.Errorf("not a request of %s", wireVersion)
	}
	*r = Request{Binary: fields[1], Config: fields[2], Dir: fields[3], Verb: fields[4], Found: fields[5], Args: fields[6:]}
	return nil
}

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, data []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// ReadFrame reads one frame of at most MaxFrame bytes.
func ReadFrame(r io.Reader) ([]byte, error) { return ReadFrameLimit(r, MaxFrame) }

// ReadFrameLimit reads one frame of at most limit bytes.
func ReadFrameLimit(r io.Reader, limit uint32) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > limit {
		return nil, fmt.Errorf("frame of %d bytes exceeds the limit of %d", size, limit)
	}
	// The buffer grows with what arrives, up to size: a peer that announces
	// a large frame and sends little of it holds no more than it sent.
	buf := make([]byte, 0, min(size, frameChunk))
	for len(buf) < int(size) {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), int(size)))
			copy(grown, buf)
			buf = grown
		}
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// frameChunk is what ReadFrameLimit allocates before any of a frame has
// arrived; the buffer then doubles as its bytes come.
const frameChunk = 64 << 10

// WriteRequest writes the request's two frames, header and stdin, in one
// buffer (one write on the socket).
func WriteRequest(w io.Writer, req Request, stdin []byte) error {
	head, err := req.MarshalBinary()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Grow(8 + len(head) + len(stdin))
	_ = WriteFrame(&b, head)
	_ = WriteFrame(&b, stdin)
	_, err = w.Write(b.Bytes())
	return err
}

// ReadRequest reads a request's header and stdin; stdin may hold at most
// MaxRequest bytes and one more.
func ReadRequest(r io.Reader) (Request, []byte, error) {
	var req Request
	head, err := ReadFrameLimit(r, MaxHeader)
	if err != nil {
		return req, nil, err
	}
	if err := req.UnmarshalBinary(head); err != nil {
		return req, nil, err
	}
	stdin, err := ReadFrameLimit(r, MaxRequest+1)
	return req, stdin, err
}

// WriteAnswer writes what follows Accepted: the exit code, stdout and
// stderr, in one buffer, after status (the Accepted byte when it was not
// sent before the call ran, else nothing).
func WriteAnswer(w io.Writer, status []byte, code int, stdout, stderr []byte) error {
	var b bytes.Buffer
	b.Grow(len(status) + 12 + len(stdout) + len(stderr))
	b.Write(status)
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], uint32(int32(code)))
	b.Write(c[:])
	_ = WriteFrame(&b, stdout)
	_ = WriteFrame(&b, stderr)
	_, err := w.Write(b.Bytes())
	return err
}

// ReadAnswer reads what follows Accepted.
func ReadAnswer(r io.Reader) (code int, stdout, stderr []byte, err error) {
	var c [4]byte
	if _, err = io.ReadFull(r, c[:]); err != nil {
		return 0, nil, nil, err
	}
	if stdout, err = ReadFrame(r); err != nil {
		return 0, nil, nil, err
	}
	if stderr, err = ReadFrame(r); err != nil {
		return 0, nil, nil, err
	}
	return int(int32(binary.BigEndian.Uint32(c[:]))), stdout, stderr, nil
}

// verbs are the plugin verbs a binary forwards, and whether each writes
// (an array of constants: nothing to build at start).
var verbs = [...]struct {
	name  string
	write bool
}{
	{"name", false},
	{"add-node", true},
	{"remove-node", true},
	{"get-nodes-deploy-capacity", false},
	{"set-node-resource-capacity", true},
	{"get-node-resource-info", false},
	{"set-node-resource-info", true},
	{"set-node-resource-usage", true},
	{"get-most-idle-node", false},
	{"fix-node-resource", true},
	{"calculate-deploy", false},
	{"calculate-realloc", false},
	{"calculate-remap", false},
	{"get-metrics-description", false},
	{"get-metrics", false},
}

// Verbs lists the plugin verbs a binary forwards. Other commands (operator
// commands, help) always run locally: `nodes heartbeat` measures the host it
// runs on.
func Verbs() []string {
	out := make([]string, len(verbs))
	for i, v := range verbs {
		out[i] = v.name
	}
	return out
}

// Write reports whether verb writes; ok is false when it is not a plugin
// verb.
func Write(verb string) (write, ok bool) {
	for _, v := range verbs {
		if v.name == verb {
			return v.write, true
		}
	}
	return false, false
}

// NoInput reports whether verb reads no stdin.
func NoInput(verb string) bool { return verb == "name" || verb == "get-metrics-description" }

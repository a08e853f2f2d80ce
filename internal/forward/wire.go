// Package forward is the small client an exec'd plugin binary uses to hand
// its call to a running `serve` daemon over a unix socket, and the framing
// both ends speak. It imports nothing heavy (no etcd, no gRPC, no YAML), so
// that a forwarded call pays little more than process start.
//
// One connection carries one call:
//
//	client -> daemon   request frame (JSON header), stdin frame; then half-close
//	daemon -> client   one status byte: Accepted, Declined or Refused
//	daemon -> client   after Accepted: answer frame (JSON: exit code), stdout frame, stderr frame
//
// A frame is a 4-byte big-endian length and that many bytes.
package forward

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
)

// MaxFrame bounds one frame: a request's stdin may hold 16 MiB and one
// byte more (so the verb itself reports the limit), answers are smaller
// than the largest capacity answer of a big cluster.
const MaxFrame = 256 << 20

// Request is what the client sends before stdin.
type Request struct {
	Binary string   `json:"binary"` // storage or compute
	Args   []string `json:"args"`   // as given to the binary, without the program name
	Config string   `json:"config"` // the config file the binary resolved (absolute), "" for none
	Dir    string   `json:"dir"`    // the client's working directory
	Verb   string   `json:"verb"`
	Write  bool     `json:"write"`
}

// Answer is what the daemon sends after Accepted, before stdout and stderr.
type Answer struct {
	Code int `json:"code"`
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
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// WriteJSON writes v as one frame.
func WriteJSON(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteFrame(w, data)
}

// ReadJSON reads one frame into v.
func ReadJSON(r io.Reader, v any) error {
	data, err := ReadFrame(r)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// Verbs are the plugin verbs a binary forwards, and whether each writes.
// Other commands (operator commands, help) always run locally: `nodes
// heartbeat` measures the host it runs on.
var Verbs = map[string]bool{
	"name":                       false,
	"add-node":                   true,
	"remove-node":                true,
	"get-nodes-deploy-capacity":  false,
	"set-node-resource-capacity": true,
	"get-node-resource-info":     false,
	"set-node-resource-info":     true,
	"set-node-resource-usage":    true,
	"get-most-idle-node":         false,
	"fix-node-resource":          true,
	"calculate-deploy":           false,
	"calculate-realloc":          false,
	"calculate-remap":            false,
	"get-metrics-description":    false,
	"get-metrics":                false,
}

// NoInput are the verbs that do not read stdin.
var NoInput = map[string]bool{"name": true, "get-metrics-description": true}

package forward

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzWire reads what a peer sent as a request (the daemon's side) and as
// an answer (the client's side): a refusal is one line, and whatever is
// read is written back byte for byte as the frames it was read from
// (nothing past them consumed).
func FuzzWire(f *testing.F) {
	for _, c := range []struct {
		req   Request
		stdin []byte
	}{
		{Request{Binary: "storage", Args: []string{"name"}, Dir: "/w", Verb: "name"}, nil},
		{Request{Binary: "compute", Args: []string{"--config", "/etc/c y.yaml", "add-node"}, Config: "/etc/c y.yaml", Dir: "/", Verb: "add-node", Found: FoundFlag}, []byte(`{"nodename":"n1"}`)},
		{Request{Binary: "storage", Args: []string{"--config=/a\n\tb", "get-metrics"}, Config: "/a\n\tb", Dir: "/d", Verb: "get-metrics"}, []byte("x\x00y")},
	} {
		var b bytes.Buffer
		if err := WriteRequest(&b, c.req, c.stdin); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
		f.Add(append(b.Bytes(), "trailing"...))
	}
	var a bytes.Buffer
	_ = WriteAnswer(&a, nil, 128, []byte("out"), []byte("err\n"))
	f.Add(a.Bytes())
	a.Reset()
	_ = WriteAnswer(&a, nil, -1, nil, nil)
	f.Add(a.Bytes())
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0x10, 0, 1, 'e'})
	f.Add([]byte("\x00\x00\x00\x0eeru-forward/4\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		req, stdin, err := ReadRequest(r)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("request refusal is not one line: %q", err)
			}
		} else {
			used := data[:len(data)-r.Len()]
			var b bytes.Buffer
			if err := WriteRequest(&b, req, stdin); err != nil {
				t.Fatalf("request %+v read, then refused on writing: %v", req, err)
			}
			if !bytes.Equal(b.Bytes(), used) {
				t.Fatalf("request %+v read from %q writes %q", req, used, b.Bytes())
			}
		}
		r = bytes.NewReader(data)
		code, out, errOut, err := ReadAnswer(r)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("answer refusal is not one line: %q", err)
			}
			return
		}
		used := data[:len(data)-r.Len()]
		var b bytes.Buffer
		if err := WriteAnswer(&b, nil, code, out, errOut); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), used) {
			t.Fatalf("answer read from %q writes %q", used, b.Bytes())
		}
	})
}

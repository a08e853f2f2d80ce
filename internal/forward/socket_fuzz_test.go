package forward

import (
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzServeSocket: the front binary's own reading of serve.socket (it links
// no YAML library) never names a socket other than the one a YAML decoder,
// as the daemon uses, reads from the same file. Finding none is allowed
// (a flow-style serve section is not seen: the call then looks for the
// default socket).
func FuzzServeSocket(f *testing.F) {
	for _, doc := range []string{
		"etcd:\n  prefix: /x\n", "serve:\n  http: 127.0.0.1:1\n  socket: run/s.sock # comment\n",
		"etcd:\n  machines: [a]\nserve:\n  socket: \"/run/eru.sock\"\nlog:\n  file: x\n", "serve:\n    socket: '/run/q.sock'\n",
		"etcd:\n  socket: /no\nserve:\n  http: x\n", "serve:\n  tls:\n    socket: /no\n", "serve: {socket: /f}\n",
		"serve:\r\n  socket: /crlf\r\n", "serve:\n  socket: \"a\\tb\"\n", "serve:\n\tsocket: /tab\n",
		"serve:\n  socket: ~\n", "serve:\n  socket: a#b\n", "serve: # c\n  socket: /c\n", "serve:\n  socket: /a\n  socket: /b\n",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got := serveSocket(doc)
		if got == "" {
			return
		}
		var ref struct {
			Serve struct {
				Socket *string `yaml:"socket"`
			} `yaml:"serve"`
		}
		if err := yaml.Unmarshal(doc, &ref); err != nil || ref.Serve.Socket == nil {
			return // the daemon refuses the file, or finds no socket: the call runs locally
		}
		if *ref.Serve.Socket != got {
			t.Fatalf("%q: the front binary reads serve.socket %q, the daemon %q", doc, got, *ref.Serve.Socket)
		}
	})
}

package cmd

import (
	"bytes"
	"encoding/json"
	"io"
	"os"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/eru-extend/resources/types"
)

// Output formats of the operator commands.
const (
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatTable = "table"
)

func checkFormat(format string) error {
	switch format {
	case formatJSON, formatYAML, formatTable:
		return nil
	}
	return types.Invalid("--output %q: want json, yaml or table", format)
}

// writeJSONAnswer writes raw as one line, or indented when w is a terminal
// (a person reads it; a script gets one line).
func writeJSONAnswer(w io.Writer, raw json.RawMessage) error {
	if isTerminal(w) {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	return writeJSON(w, raw)
}

// writeYAML writes the JSON answer as YAML, keys in the JSON's order.
func writeYAML(w io.Writer, raw json.RawMessage) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return types.Wrap(types.Internal, err, "answer as YAML")
	}
	blockStyle(&doc)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	return enc.Close()
}

// blockStyle turns JSON's flow style into YAML's block style, and its quoted
// strings into plain ones where YAML allows it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

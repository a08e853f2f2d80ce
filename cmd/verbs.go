package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/eru-extend/resources/cmd/config"
	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/internal/forward"
	"github.com/eru-extend/resources/types"
)

// MaxRequest is the largest request read from stdin.
const MaxRequest = 16 << 20

func (r *runner) verbCommands() []*cli.Command {
	table := engine.Table()
	out := make([]*cli.Command, 0, len(table))
	for _, verb := range table {
		out = append(out, &cli.Command{
			Name:      verb.Name,
			Usage:     verb.Usage,
			Category:  "core plugin verbs (JSON on stdin, JSON on stdout)",
			ArgsUsage: " ",
			Action:    r.runVerb(verb),
		})
	}
	return out
}

func (r *runner) runVerb(v engine.Verb) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() > 0 {
			return verbError{verb: v.Name, err: types.Invalid("unexpected argument %q: the request comes on stdin", c.Args().First())}
		}
		return r.verb(v)
	}
}

// RunVerb runs a plugin verb command line (the verb and at most a --config
// flag, as `name verb` would be run) without building the command tree:
// the answer and the exit status are MainWith's for the same arguments.
// ok is false for any other command line; the caller then runs MainWith.
// A long-running process that serves one call after another (the serve
// daemon) saves the tree's construction and parsing this way.
func RunVerb(opts Options, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, ok bool) {
	path, rest, err := config.FlagFromArgs(args)
	if err != nil || len(rest) != 1 {
		return 0, false
	}
	v, found := engine.Lookup(rest[0])
	if !found {
		return 0, false
	}
	r := &runner{name: name, stdin: stdin, stdout: stdout, stderr: stderr, opts: opts, cfgPath: path}
	if err := r.verb(v); err != nil {
		return r.fail(err), true
	}
	return 0, true
}

// RunFixed answers a verb whose answer the binary alone fixes (no request,
// no config, no store: name, get-metrics-description) when args are
// exactly that verb. The answer and exit status are MainWith's for the same
// arguments, without what such a verb has no use for: the command tree,
// the config lookup, the daemon's socket, the cold GC settings. core calls
// `name` of every plugin it loads, so this is the whole of its cost past
// the process's start. ok is false for any other command line.
func RunFixed(name string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if len(args) != 1 {
		return 0, false
	}
	v, found := engine.Lookup(args[0])
	if !found || v.Input {
		return 0, false
	}
	r := &runner{name: name, stdout: stdout, stderr: stderr}
	if err := r.fixed(v); err != nil {
		return r.fail(err), true
	}
	return 0, true
}

// fixed runs a verb without input: its engine is built on the built-in
// defaults and never opens a store.
func (r *runner) fixed(v engine.Verb) error {
	eng, err := r.engine(config.Default(""), nil, nil)
	if err != nil {
		return verbError{verb: v.Name, err: err}
	}
	answer, err := engine.Call(context.Background(), eng, v.Name, &types.Request{})
	if err != nil {
		return verbError{verb: v.Name, err: err}
	}
	if err := writeJSON(r.stdout, answer); err != nil {
		return verbError{verb: v.Name, err: unprinted(v.Writes, err)}
	}
	return nil
}

// verb runs plugin verb v on the runner's streams. Verbs that need
// nothing configured answer without reading the config, so they work (and
// stay fast) anywhere.
func (r *runner) verb(v engine.Verb) error {
	if !v.Input {
		return r.fixed(v)
	}
	verb := v.Name
	start := time.Now()
	req := &types.Request{}
	if err := decodeRequest(r.stdin, req); err != nil {
		return verbError{verb: verb, err: err}
	}
	cfg, err := r.config()
	if err != nil {
		return verbError{verb: verb, node: req.Nodename, err: err}
	}
	// A plugin verb goes on without a log it cannot open: core needs
	// its answer more.
	log, closeLog, _ := cfg.Logger(r.name, false)
	defer closeLog()
	o := &opener{cfg: cfg, with: r.open, mode: func(write bool) config.Mode {
		switch {
		case write && createsRecords(verb): // only a verb that creates nodes creates the store
			return config.Write
		case write:
			return config.WriteNoCreate
		}
		return config.Read
	}}
	defer o.close()
	eng, err := r.engine(cfg, o.open, log)
	if err != nil {
		return verbError{verb: verb, node: req.Nodename, err: err}
	}
	ctx, cancel := withTimeout(cfg)
	defer cancel()
	answer, err := engine.Call(ctx, eng, verb, req)
	if err != nil {
		log.Warn("verb refused", "verb", verb, "node", req.Nodename, "took", since(start), "class", types.ClassOf(err), "error", err.Error())
		return verbError{verb: verb, node: req.Nodename, err: err}
	}
	log.Info("verb", "verb", verb, "node", req.Nodename, "took", since(start))
	if err := writeJSON(r.stdout, answer); err != nil {
		log.Warn("answer not printed", "verb", verb, "node", req.Nodename, "error", err.Error())
		return verbError{verb: verb, node: req.Nodename, err: unprinted(v.Writes, err)}
	}
	return nil
}

// unprinted is the failure of a verb or command that ran but whose answer
// could not be written to stdout: when it wrote, its change was made, and
// the line says so (forward.AnswerUnprinted, which the forwarding front
// prints too).
func unprinted(wrote bool, err error) error {
	class, reason := forward.AnswerUnprinted(wrote, err)
	return types.Errorf(types.Class(class), "%s", reason)
}

// decodeRequest reads stdin to its end and decodes one JSON object.
func decodeRequest(in io.Reader, req *types.Request) error {
	data, err := io.ReadAll(io.LimitReader(in, MaxRequest+1))
	if err != nil {
		return types.Wrap(types.InvalidArgument, err, "reading stdin")
	}
	if len(data) > MaxRequest {
		return types.Invalid("stdin holds more than %d MiB", MaxRequest>>20)
	}
	data = bytes.Trim(data, jsonSpace) // only what JSON calls white space
	if len(data) == 0 {
		return types.Invalid("stdin is empty: want one JSON object")
	}
	if !utf8.Valid(data) {
		return types.Invalid("stdin is not valid UTF-8")
	}
	if data[0] != '{' {
		return types.Invalid("stdin is not a JSON object (it starts with %q)", data[0])
	}
	if decodeRequestFast(data, req) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(req); err != nil {
		return types.Invalid("request: %s", describeJSONError(err))
	}
	if rest := data[dec.InputOffset():]; len(bytes.Trim(rest, jsonSpace)) > 0 {
		if json.Valid(bytes.Trim(rest, jsonSpace)) {
			return types.Invalid("request: more than one JSON value on stdin")
		}
		return types.Invalid("request: malformed JSON: %s after the object", types.Clip(bytes.Trim(rest, jsonSpace)))
	}
	return nil
}

// jsonSpace is the white space JSON allows around a value.
const jsonSpace = " \t\r\n"

func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: want %s, got a JSON %s", te.Field, te.Type, te.Value)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "malformed JSON: it ends before the object is complete"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error())
	}
	return err.Error()
}

// jsonAppender is an answer that encodes itself as encoding/json would,
// byte for byte, without reflection (types.DeployCapacity).
type jsonAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// writeJSON prints v as the one answer.
func writeJSON(w io.Writer, v any) error {
	if a, ok := v.(jsonAppender); ok {
		b, err := a.AppendJSON(nil)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return bw.Flush()
}

// createsRecords says whether a verb may write a node's first record (the
// protocol lets core set capacity, usage or info on a node the plugin has
// never seen): only those may create the embedded store's file.
func createsRecords(verb string) bool {
	switch verb {
	case "add-node", "set-node-resource-capacity", "set-node-resource-usage", "set-node-resource-info":
		return true
	}
	return false
}

package forward

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/eru-extend/resources/internal/configsearch"
)

// EnvPath names the environment variable that points at a config file (the
// same one the command tree reads).
const EnvPath = configsearch.EnvPath

// EnvNoForward, set to 1, makes a binary run every call itself.
const EnvNoForward = "ERU_RESOURCE_NO_FORWARD"

// NoForwardEnv is environ for a binary that must run the call itself (the
// front's fallback to the full binary): every EnvNoForward entry it held
// is dropped and EnvNoForward=1 set, for a program reads the first of two
// entries of one name.
func NoForwardEnv(environ []string) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); name != EnvNoForward {
			out = append(out, kv)
		}
	}
	return append(out, EnvNoForward+"=1")
}

// MaxRequest is the largest stdin a verb reads; one byte more is sent so
// the verb itself reports the limit.
const MaxRequest = 16 << 20

// DefaultSocket is the socket's file name beside the config file.
const DefaultSocket = "eru-resources.sock"

// PluginExitCode is what a failed plugin verb exits with.
const PluginExitCode = 128

// Call is one invocation of a plugin binary as the client sees it.
type Call struct {
	Binary string
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Stall is how long a call waits for a daemon that takes neither its
	// connection nor its request, and a read for a silent daemon; 0 is
	// ReadStall.
	Stall time.Duration
}

// Outcome is what Forward did with a call.
type Outcome struct {
	// Handled: the daemon answered (or the call's outcome is unknown) and
	// the answer has been printed; exit with Code.
	Handled bool
	Code    int
	// Read is what was taken from stdin when ReadStdin is true: a call run
	// locally must be given these bytes first.
	Read      []byte
	ReadStdin bool
}

// Try hands the call to a serve daemon when one answers for it. It returns
// handled false when the binary must run the call itself, with the stdin to
// run it on (what Try already read, then the rest). When handled is true,
// code is the exit status to exit with and the answer has been printed.
func Try(c Call) (code int, handled bool, stdin io.Reader) {
	o := Forward(c)
	if o.ReadStdin {
		return o.Code, o.Handled, io.MultiReader(bytes.NewReader(o.Read), c.Stdin)
	}
	return o.Code, o.Handled, c.Stdin
}

// Forward is Try for callers that hand stdin on by other means (an exec).
func Forward(c Call) Outcome {
	var o Outcome
	if os.Getenv(EnvNoForward) == "1" {
		return o
	}
	verb, explicit, ok := VerbOf(c.Args)
	if !ok {
		return o
	}
	write, _ := Write(verb)
	wd, err := os.Getwd()
	if err != nil {
		return o
	}
	cfg, found := Find(explicit, c.Binary, wd)
	sock := SocketPath(cfg, wd)
	if len(sock) > MaxSocketPath || !socketExists(sock) {
		// No daemon (none can listen on a path longer than a socket
		// address holds: it refuses such a config): the binary reads its
		// stdin itself.
		return o
	}
	// Stdin is read before connecting, so that the request follows the
	// connection at once: the daemon, woken by the connection, finds the
	// whole request there instead of waiting for it (one wake-up fewer).
	if !NoInput(verb) {
		read, err := io.ReadAll(io.LimitReader(c.Stdin, MaxRequest+1))
		if err != nil {
			// Stdin cannot be read: the binary reads it itself and reports
			// that, as it does without a daemon; given first what was read
			// before the failure, if anything (a directory gives nothing).
			o.Read, o.ReadStdin = read, len(read) > 0
			return o
		}
		o.Read, o.ReadStdin = read, true
	}
	stall := c.Stall
	if stall == 0 {
		stall = ReadStall
	}
	// A daemon that takes no connection or reads no request (stopped,
	// say) holds a call for at most stall: the daemon runs nothing before
	// it holds the whole request, so any call may then run here.
	conn, err := dial(sock, stall)
	if err != nil {
		return o // a stale socket, not ours to use, or a daemon taking no call
	}
	defer conn.Close()
	req := Request{Binary: c.Binary, Args: c.Args, Config: cfg, Dir: wd, Verb: verb, Found: found}
	if WriteRequest(conn, req, o.Read) != nil || conn.CloseWrite() != nil {
		return o
	}
	// A small call's whole answer comes in one read of the socket.
	r := &reader{conn: conn, buf: make([]byte, 0, 16<<10)}
	// A read waits for the daemon's next byte at most stall: the daemon
	// sends Waiting bytes while it holds the call. A write waits for its
	// status however long (it may be running).
	if !write && conn.setReadTimeout(stall) != nil {
		return o
	}
	status, err := r.ReadByte()
	for err == nil && status == Waiting {
		status, err = r.ReadByte()
	}
	if err != nil || status != Accepted {
		// Declined or refused: nothing ran. Died or silent: a write ran
		// nothing (its Accepted comes before it runs); a read may have,
		// and runs again harmlessly.
		return o
	}
	code, out, errOut, err := ReadAnswer(r)
	if err != nil {
		if !write {
			return o // a read runs again safely
		}
		fmt.Fprintf(c.Stderr, "%s: %s%s: unavailable: outcome unknown: the serve daemon at %s took the call and closed the connection before answering (%s); read the node before retrying\n",
			c.Binary, verb, nodeOf(o.Read), sock, oneLine(err))
		o.Handled, o.Code = true, PluginExitCode
		return o
	}
	if len(out) > 0 {
		if _, err := c.Stdout.Write(out); err != nil {
			class, reason := AnswerUnprinted(write, err)
			fmt.Fprintf(c.Stderr, "%s: %s%s: %s: %s\n", c.Binary, verb, nodeOf(o.Read), class, reason)
			o.Handled, o.Code = true, PluginExitCode
			return o
		}
	}
	if len(errOut) > 0 {
		_, _ = c.Stderr.Write(errOut)
	}
	o.Handled, o.Code = true, code
	return o
}

// AnswerUnprinted is the class and reason of the one line of a call that
// ran but whose answer could not be written to stdout (a full disk behind
// `> file`): a write verb's change was made, so its caller is told that
// and not that it failed; a read changed nothing. The binary run locally
// and the forwarding client print the same line.
func AnswerUnprinted(write bool, err error) (class, reason string) {
	if write {
		return "unavailable: outcome unknown", "the call was applied, but its answer could not be printed: " + oneLine(err)
	}
	return "unavailable", "its answer could not be printed: " + oneLine(err)
}

// VerbOf finds the plugin verb of a command line: exactly one argument
// besides an optional --config FILE, and that argument a verb. explicit is
// the --config value. Anything else (flags, extra arguments, operator
// commands, and an empty or repeated --config, which the command tree
// refuses: config.FlagFromArgs) is not forwarded, so the binary reports it
// itself.
func VerbOf(args []string) (verb, explicit string, ok bool) {
	configs := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--config" || a == "-config":
			if i+1 >= len(args) {
				return "", "", false
			}
			explicit = args[i+1]
			configs++
			i++
		case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-config="):
			explicit = a[strings.IndexByte(a, '=')+1:]
			configs++
		case verb == "" && !strings.HasPrefix(a, "-"):
			verb = a
		default:
			return "", "", false
		}
	}
	if configs > 1 || configs == 1 && explicit == "" {
		return "", "", false
	}
	_, ok = Write(verb)
	return verb, explicit, ok
}

// Plugins are the plugins' names: each one's binary is installed under its
// plugin's name, and its `name` verb answers it.
var Plugins = [...]string{"storage", "compute"}

// NameAnswer is what the binary of plugin binary prints for args when args
// are its `name` verb (with or without --config, which the verb does not
// read): a front answers it without a daemon or the full binary, as the
// full binary would, byte for byte. ok false for anything else.
func NameAnswer(binary string, args []string) (answer string, ok bool) {
	verb, _, ok := VerbOf(args)
	if !ok || verb != "name" || !slices.Contains(Plugins[:], binary) {
		return "", false
	}
	return `"` + binary + `"` + "\n", true
}

// NameUnprinted is the one line the binary of plugin binary prints on
// stderr when its name could not be written to stdout (the full binary's
// line for a read whose answer could not be printed).
func NameUnprinted(binary string, err error) string {
	class, reason := AnswerUnprinted(false, err)
	return binary + ": name: " + class + ": " + reason + "\n"
}

// Resolve finds the config file the way the command tree does: the explicit
// path, else $ERU_RESOURCE_CONFIG_PATH, else the first of the working
// directory's files that exists (configsearch: the binary's own, the
// sibling plugin's, the shared one); "" when there is none. The path is
// absolute.
func Resolve(explicit, binary, wd string) string {
	file, _ := Find(explicit, binary, wd)
	return file
}

// Find is Resolve's file and how it was found (one of the Found* values).
func Find(explicit, binary, wd string) (file, found string) {
	file, found = explicit, FoundFlag
	if file == "" {
		file, found = os.Getenv(EnvPath), FoundEnv
	}
	if file == "" {
		for _, c := range configsearch.Candidates(binary, wd) {
			if configsearch.Exists(c.File) {
				file, found = c.File, foundIn(c.Place)
				break
			}
		}
		if file == "" {
			return "", FoundNone
		}
	}
	// Clean would drop "link/.." as text, where the kernel (and so the
	// command tree's open) follows link first: the path is resolved as it
	// is opened, as the command tree names it. One that cannot be resolved
	// is left as it is, so that no daemon serves it and the binary reports
	// it.
	return configsearch.Abs(file, wd), found
}

func foundIn(p configsearch.Place) string {
	switch p {
	case configsearch.Own:
		return FoundOwn
	case configsearch.Sibling:
		return FoundSibling
	}
	return FoundShared
}

// SocketPath is serve.socket of the config file (relative to its folder),
// else eru-resources.sock beside it (in wd when there is no file).
func SocketPath(configFile, wd string) string {
	dir := wd
	if configFile != "" {
		dir = filepath.Dir(configFile)
		if data, err := readConfig(configFile); err == nil {
			if s := serveSocket(data); s != "" {
				if filepath.IsAbs(s) {
					return s
				}
				return filepath.Join(dir, s)
			}
		}
	}
	return filepath.Join(dir, DefaultSocket)
}

// serveSocket reads serve.socket from a YAML document written in block
// style (the daemon decodes the same key with a YAML library; a flow-style
// serve section is not seen here, and the binary then looks for the
// default socket).
func serveSocket(doc []byte) string {
	inServe := false
	indent := -1
	lines := strings.Split(string(doc), "\n")
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		depth := len(line) - len(trimmed)
		if depth == 0 {
			inServe = isKey(trimmed, "serve")
			indent = -1
			continue
		}
		if !inServe {
			continue
		}
		if indent < 0 {
			indent = depth
		}
		if depth != indent || !isKey(trimmed, "socket") {
			continue
		}
		if continued(lines[i+1:], depth) {
			return "" // a plain scalar folded over lines
		}
		v := scalar(strings.TrimSpace(strings.TrimPrefix(trimmed, "socket:")))
		if strings.ContainsAny(v, "\r\u0085\u2028\u2029") {
			return "" // a line break YAML folds into a space
		}
		return v
	}
	return ""
}

// continued reports whether the next line that holds anything is indented
// deeper than depth: the value goes on there.
func continued(rest []string, depth int) bool {
	for _, line := range rest {
		trimmed := strings.TrimLeft(line, " \t")
		if strings.TrimSpace(trimmed) == "" {
			continue
		}
		return len(line)-len(trimmed) > depth
	}
	return false
}

// sameEscapes reports whether every escape of a double-quoted scalar is
// one Go's Unquote and YAML read alike.
func sameEscapes(q string) bool {
	for i := 0; i < len(q); i++ {
		if q[i] == '\\' {
			if i+1 >= len(q) || !strings.ContainsRune(`\"abfnrtvuU`, rune(q[i+1])) {
				return false
			}
			i++
		}
	}
	return true
}

// isKey reports whether a block mapping line starts with key and its
// colon, followed by a blank or nothing ("serve:x" is another key).
func isKey(line, key string) bool {
	rest, ok := strings.CutPrefix(line, key+":")
	return ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r')
}

// scalar is a YAML scalar value: quoted, or plain up to a comment; "" for
// what it cannot read as YAML does (a tag, an anchor, an alias, a block
// scalar, a flow collection, a double-quoted escape Go and YAML read
// differently: \xe9 is a byte to Go and a character to YAML, \000 an
// octal NUL to Go and a NUL and "00" to YAML).
func scalar(v string) string {
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil && sameEscapes(s) {
			if u, err := strconv.Unquote(s); err == nil {
				return u
			}
		}
		return ""
	}
	if strings.HasPrefix(v, "'") {
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			if v[i] != '\'' {
				b.WriteByte(v[i])
				continue
			}
			if i+1 < len(v) && v[i+1] == '\'' { // '' is a quote
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String()
		}
		return ""
	}
	if v != "" && strings.ContainsRune("!&*|>%@`{[", rune(v[0])) {
		return ""
	}
	for i := 1; i < len(v); i++ { // a comment follows a space or a tab
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			v = v[:i]
			break
		}
	}
	return strings.TrimSpace(v)
}

// nodeOf is ": node NAME" for a request naming a node, as the command tree
// prints it.
func nodeOf(stdin []byte) string {
	node := Names(stdin).Nodename
	if node == "" {
		return ""
	}
	if plainName(node) {
		return ": node " + node
	}
	return ": node " + strconv.Quote(node)
}

func plainName(n string) bool {
	if len(n) > 253 || !utf8.ValidString(n) {
		return false
	}
	for _, r := range n {
		if r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/eru-extend/resources/types"
)

// The body fields of the operator API's writes, by route.
var (
	// reads take no body (it is not read).
	reads []string
	// mutatingFields are what every write takes: the command's replay id
	// and the version it must find.
	mutatingFields = []string{"command_id", "if_version"}
	ratioFields    = []string{"cpu", "memory", "command_id", "if_version"}
	capacityFields = []string{"capacity", "command_id", "if_version"}
)

// maxBody bounds an operator write's body.
const maxBody = 1 << 20

// argsOf turns an admitted request and its decoded body into the operator
// command line it runs.
type argsOf func(r *http.Request, body opBody) ([]string, error)

// opBody is an operator write's body, decoded into the command-line values
// it stands for; a field left out or null is "".
type opBody struct {
	commandID, ifVersion string
	cpu, memory          string
	capacity             string
}

// decodeBody reads a write's JSON body (none, or an object): each field
// must be one the route takes and of its type. A misspelt field is refused,
// never dropped: dropped, `{"cpus": 3000}` would clear a node's ratio and
// `{"if_verison": 4}` would write unguarded.
func decodeBody(r io.Reader, route string, takes []string) (opBody, error) {
	var b opBody
	if r == nil {
		return b, nil
	}
	data, err := readBody(r)
	if err != nil {
		return b, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return b, nil
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return b, types.Invalid("body: want a JSON object, not %s", typeErr.Value)
		}
		return b, types.Invalid("body: %s", err.Error())
	}
	if err := onlyOneValue(data, dec); err != nil {
		return b, err
	}
	for _, name := range types.SortedKeys(fields) {
		if !slices.Contains(takes, name) {
			return b, types.Invalid("body: unknown field %q: %s takes %s", name, route, strings.Join(takes, ", "))
		}
		raw := fields[name]
		if string(raw) == "null" {
			continue
		}
		switch name {
		case "command_id":
			if err := json.Unmarshal(raw, &b.commandID); err != nil || b.commandID == "" {
				return b, types.Invalid("body: command_id must be a non-empty string, not %s", raw)
			}
		case "if_version":
			var v int64
			if err := json.Unmarshal(raw, &v); err != nil {
				return b, types.Invalid("body: if_version must be an integer (the record's version), not %s", raw)
			}
			if v < 0 { // said here: the command's own refusal names its flag
				return b, types.Invalid("body: if_version %d: a record's version is 0 or more", v)
			}
			b.ifVersion = string(raw)
		case "cpu":
			b.cpu, err = numberOrString(name, raw)
		case "memory":
			b.memory, err = numberOrString(name, raw)
		case "capacity":
			b.capacity, err = numberOrString(name, raw)
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// numberOrString is a field the command line takes as text: a JSON number
// as written, or a string's content.
func numberOrString(name string, raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return "", types.Invalid("body: %s is empty", name)
		}
		return s, nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), nil
	}
	return "", types.Invalid("body: %s must be a number or a string, not %s", name, raw)
}

// mutating is the body's --command-id and --if-version flags.
func (b opBody) mutating() []string {
	return givenFlags("--command-id", b.commandID, "--if-version", b.ifVersion)
}

// ratios is the body's --cpu and --memory flags.
func (b opBody) ratios() []string {
	return givenFlags("--cpu", b.cpu, "--memory", b.memory)
}

// givenFlags is the command-line flags of flag, value pairs whose value was
// given (not "").
func givenFlags(pairs ...string) []string {
	var out []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			out = append(out, pairs[i], pairs[i+1])
		}
	}
	return out
}

// readBody reads a request's body whole, at most maxBody bytes.
func readBody(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return nil, types.Wrap(types.InvalidArgument, err, "body")
	}
	if len(data) > maxBody {
		return nil, types.Invalid("body: more than %d bytes", maxBody)
	}
	return data, nil
}

// onlyOneValue refuses a body with anything but blanks after the JSON
// value dec decoded from data: a write's body is one object. (Decoder.More
// would miss a stray } or ] after it.)
func onlyOneValue(data []byte, dec *json.Decoder) error {
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return types.Invalid("body: data after the JSON object")
	}
	return nil
}

package types

// NameAnswer is the answer of the name verb: the resource's name, a JSON
// string. It encodes itself, so that the one call core makes of every
// plugin it loads touches none of encoding/json.
type NameAnswer string

// AppendJSON appends the name as encoding/json encodes a string with HTML
// escaping off.
func (n NameAnswer) AppendJSON(b []byte) ([]byte, error) { return appendString(b, string(n)), nil }

package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestCoresRequestsAreDecodedWithoutReflection(t *testing.T) {
	for bin, verbs := range validRequests {
		for verb, in := range verbs {
			t.Run(bin+" "+verb+" decodes as encoding/json decodes it", func(t *testing.T) {
				var want, got types.Request
				require.NoError(t, json.Unmarshal([]byte(in), &want))
				fast := decodeRequestFast([]byte(in), &got)
				if strings.Contains(in, `"info":`) || strings.Contains(in, `"nodes":`) {
					require.False(t, fast, "info and nodes are left to encoding/json")
					return
				}
				require.True(t, fast, "the request took the slow path: %s", in)
				require.Equal(t, want, got)
			})
		}
	}
}

func TestRequestsOutsideCoresFormAreLeftToEncodingJSON(t *testing.T) {
	for _, c := range []struct{ name, in string }{
		{"a key in another case", `{"NodeName":"n1"}`},
		{"a key twice", `{"nodename":"n1","nodename":"n2"}`},
		{"the names twice", `{"nodenames":["a"],"nodenames":["b"]}`},
		{"an escaped name", `{"nodenames":["a\u0041"]}`},
		{"white space", `{"nodename": "n1"}`},
		{"names that are null", `{"nodenames":null}`},
		{"a resource that is a string", `{"resource":"x"}`},
		{"a resource that is not JSON", `{"resource":{"a":}}`},
		{"a count that is a float", `{"deploy_count":1.0}`},
		{"an unknown key", `{"nodename":"n1","extra":1}`},
		{"what follows the object", `{"nodename":"n1"}x`},
		{"brackets that do not match", `{"resource":{"a":[1}]}`},
		{"a resource that is a string followed by a space", `{"resource":"x" }`},
		{"a workload resource that is a string followed by a new line", "{\"workload_resource\":\"x\"\n,\"nodenames\":[\"a\"]}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := types.Request{Podname: "untouched"}
			require.False(t, decodeRequestFast([]byte(c.in), &req))
			require.Equal(t, types.Request{Podname: "untouched"}, req, "nothing written")
		})
	}
}

// FuzzDecodeRequestFast holds the fast decoding to encoding/json's: what it
// decodes, encoding/json decodes alike.
func FuzzDecodeRequestFast(f *testing.F) {
	for _, verbs := range validRequests {
		for _, in := range verbs {
			f.Add([]byte(in))
		}
	}
	for _, in := range []string{`{"nodenames":[]}`, `{"nodenames":["a","b"],"delta":false,"deploy_count":-3}`, `{"resource":{"a":"}\"]"}}`, `{"usage":[1,{"x":[]}]}`, `{"resource":"x" }`} {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast types.Request
		if !decodeRequestFast(data, &fast) {
			return
		}
		var want types.Request
		require.NoError(t, json.Unmarshal(data, &want), "decoded fast what encoding/json refuses: %q", data)
		require.Equal(t, want, fast)
	})
}

func TestARawValueIsDecodedAsEncodingJSONHoldsIt(t *testing.T) {
	for _, c := range []struct{ name, in string }{
		{"a resource that is a string followed by a space", `{"resource":"x" }`},
		{"a workload resource that is a string followed by a tab", "{\"workload_resource\":\"x\"\t,\"nodenames\":[\"a\"]}"},
		{"an object whose string holds brackets and a quote", `{"resource":{"a":"}\"]"}}`},
		{"an array with white space inside", `{"usage":[ 1 , {"x" : []} ]}`},
		{"a capacity that is null", `{"capacity":null}`},
	} {
		t.Run(c.name+" holds the bytes encoding/json holds", func(t *testing.T) {
			var want, got types.Request
			require.NoError(t, json.Unmarshal([]byte(c.in), &want))
			require.NoError(t, decodeRequest(strings.NewReader(c.in), &got))
			require.Equal(t, want, got)
		})
	}
}

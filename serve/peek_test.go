package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// unmarshalled is what encoding/json reads of a request's naming fields:
// what peek must answer for every valid JSON document.
func unmarshalled(stdin []byte) named {
	var n named
	_ = json.Unmarshal(stdin, &n)
	return n
}

var peekSeeds = []string{
	`{"podname":"p","nodename":"n1"}`,
	`{"nodename":"n1","workloads_resource":[]}`,
	` { "podname" : "p" , "nodenames" : ["a","b","c"] , "workload_resource" : {"volumes":["/d:1G"],"x":[{"y":"]}"}]} } `,
	`{"nodes":[{"podname":"inner","nodename":"inner"}],"podname":"outer"}`,
	`{"PodName":"case","NODENAME":"folded"}`,
	`{"nodename":"first","nodename":"last"}`,
	`{"nodename":"kept","nodename":null}`,
	`{"nodename":"kept","nodename":7,"podname":{"a":1}}`,
	`{"nodename":"esc\"aped\\\u00e9\n","podname":"\ud83d\ude00"}`,
	`{"nodename":"bad utf8 ` + "\xff\xfe" + `"}`,
	`{"pod\u006eame":"escaped key"}`,
	`{"podname":"p","nodenames":["` + strings.Repeat("n", 300) + `"]}`,
	`{}`, `[]`, `"nodename"`, `null`, `7`, `{"nodename":"a"} `, ``, `{`, `{"nodename"`, `{"nodename":"x"`, `{"a":[1,2,{"b":"c"}],"nodename":"n"}`,
	`{"a":true,"b":false,"c":null,"d":-1.5e3,"nodename":"after literals"}`,
}

func TestPeekReadsTheNamesEncodingJSONReads(t *testing.T) {
	for _, seed := range peekSeeds {
		if !json.Valid([]byte(seed)) {
			continue
		}
		t.Run(seed, func(t *testing.T) {
			require.Equal(t, unmarshalled([]byte(seed)), peek([]byte(seed)))
		})
	}
	t.Run("a request that is not a JSON object names nothing", func(t *testing.T) {
		for _, in := range []string{``, `[]`, `"x"`, `null`, `nodename`, `[{"nodename":"n"}]`} {
			require.Zero(t, peek([]byte(in)), in)
		}
	})
}

func FuzzPeek(f *testing.F) {
	for _, s := range peekSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got := peek(in) // never panics, valid or not
		if json.Valid(in) {
			require.Equal(t, unmarshalled(in), got)
		}
	})
}

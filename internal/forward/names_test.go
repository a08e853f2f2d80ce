package forward

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// unmarshalled is what encoding/json reads of a request's naming fields:
// what Names must answer for every valid JSON document.
func unmarshalled(stdin []byte) Named {
	var n Named
	_ = json.Unmarshal(stdin, &n)
	return n
}

var namesSeeds = []string{
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
	`{"nodename":"\ud800","podname":"\udc00\ud800x"}`, `{"nodename":"\ud83d\u0041","podname":"\/\b\f\r\t\u00"}`,
	`{"nodename":"\uD83D\uDE00\uFFFF\u0000"}`, `{"nodename":"é` + "\xc3" + `"}`,
}

func TestNamesAreWhatEncodingJSONReads(t *testing.T) {
	for _, seed := range namesSeeds {
		if !json.Valid([]byte(seed)) {
			continue
		}
		t.Run(seed, func(t *testing.T) {
			require.Equal(t, unmarshalled([]byte(seed)), Names([]byte(seed)))
		})
	}
	t.Run("a request that is not a JSON object names nothing", func(t *testing.T) {
		for _, in := range []string{``, `[]`, `"x"`, `null`, `nodename`, `[{"nodename":"n"}]`} {
			require.Zero(t, Names([]byte(in)), in)
		}
	})
}

func FuzzNames(f *testing.F) {
	for _, s := range namesSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got := Names(in) // never panics, valid or not
		if json.Valid(in) {
			require.Equal(t, unmarshalled(in), got)
		}
	})
}

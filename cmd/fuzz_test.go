package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/types"
)

// validRequests are one well-formed request per verb and binary, the
// starting points the fuzzer mutates.
var validRequests = map[string]map[string]string{
	"storage": {
		"add-node":                   `{"nodename":"n1","resource":{"volumes":["/data0:1T","/data1:1T"],"disks":["/dev/vda:/,/data0:1000:1000:1G:1G"],"storage":"2T"},"info":{"Type":"docker","NCPU":8,"MemTotal":16777216000,"StorageTotal":1000000000000}}`,
		"remove-node":                `{"nodename":"n1"}`,
		"get-nodes-deploy-capacity":  `{"nodenames":["n1","n2"],"workload_resource":{"volumes":["AUTO:/data:rw:1G:10:10:1M:1M"],"storage":"1G"}}`,
		"set-node-resource-capacity": `{"nodename":"n1","resource":null,"resource_request":{"volumes":["/data2:1T"],"storage":"1T"},"delta":true,"incr":true}`,
		"get-node-resource-info":     `{"nodename":"n1","workloads_resource":[{"volume_plan_request":{"AUTO:/data:rw:1073741824:0:0:0:0":{"/data0":1073741824}},"storage_request":1073741824}]}`,
		"set-node-resource-info":     `{"nodename":"n1","capacity":{"volumes":{"/data0":1099511627776},"disks":[],"storage":2199023255552},"usage":{"volumes":{"/data0":0},"disks":[],"storage":0}}`,
		"set-node-resource-usage":    `{"nodename":"n1","resource_request":{"volumes":["/data0:1G"],"storage":"1G"},"workloads_resource":null,"delta":true,"incr":true}`,
		"get-most-idle-node":         `{"nodenames":["n1","n2"]}`,
		"fix-node-resource":          `{"nodename":"n1","workloads_resource":[]}`,
		"calculate-deploy":           `{"nodename":"n1","deploy_count":2,"workload_resource_request":{"volumes":["AUTO:/data:rw:1G","AUTO:/logs:mrw:0:10:10:0:0"]}}`,
		"calculate-realloc":          `{"nodename":"n1","workload_resource":{},"workload_resource_request":{"volumes":["AUTO:/data:rw:1G"]}}`,
		"calculate-remap":            `{"nodename":"n1","workloads_resource":{"w1":{}}}`,
		"get-metrics":                `{"podname":"pod1","nodename":"n1","nodes":[{"podname":"pod1","nodename":"n2"}]}`,
	},
	"compute": {
		"add-node":                   `{"nodename":"n1","resource":{"cpu":4,"memory":"8G"},"info":{"NCPU":8,"MemTotal":16777216000}}`,
		"remove-node":                `{"nodename":"n1"}`,
		"get-nodes-deploy-capacity":  `{"nodenames":["n1","n2"],"workload_resource":{"cpu":1,"memory":"1G"}}`,
		"set-node-resource-capacity": `{"nodename":"n1","resource_request":{"cpu":8,"memory":"16G"},"delta":false}`,
		"get-node-resource-info":     `{"nodename":"n1","workloads_resource":[{"cpu_request_millis":1000,"cpu_limit_millis":1000,"memory_request":1073741824,"memory_limit":1073741824}]}`,
		"set-node-resource-info":     `{"nodename":"n1","capacity":{"cpu_millis":4000,"memory_bytes":8589934592},"usage":{"cpu_millis":0,"memory_bytes":0}}`,
		"set-node-resource-usage":    `{"nodename":"n1","resource_request":{"cpu":1,"memory":"1G"},"delta":true,"incr":true}`,
		"get-most-idle-node":         `{"nodenames":["n1","n2"]}`,
		"fix-node-resource":          `{"nodename":"n1","workloads_resource":[]}`,
		"calculate-deploy":           `{"nodename":"n1","deploy_count":3,"workload_resource_request":{"cpu-request":1,"cpu-limit":2,"memory":"1G"}}`,
		"calculate-realloc":          `{"nodename":"n1","workload_resource":{"cpu_request_millis":1000,"cpu_limit_millis":1000,"memory_request":1073741824,"memory_limit":1073741824},"workload_resource_request":{"cpu":1}}`,
		"calculate-remap":            `{"nodename":"n1","workloads_resource":{}}`,
		"get-metrics":                `{"podname":"pod1","nodename":"n1"}`,
	},
}

// requestKeys are the keys of types.Request and, for each, a value of
// every JSON type; all but the right ones are wrong for that key.
var requestKeys = []string{
	"nodename", "nodenames", "podname", "nodes", "resource", "resource_request", "info", "capacity", "usage",
	"delta", "incr", "deploy_count", "workload_resource", "workload_resource_request", "workloads_resource",
}

var jsonValuesOfEveryType = []string{`1`, `-1.5e300`, `"n1"`, `true`, `[]`, `[1,"a"]`, `{}`, `{"a":[1]}`}

// badInputs are the hostile requests both targets start from.
func badInputs() []string {
	in := []string{
		// nothing, or not an object
		``, "   \n\t ", `null`, `true`, `0`, `"n1"`, `[]`, `[{"nodename":"n1"}]`,
		// malformed
		`{`, `{"nodename":"n1",`, `{"nodename":"n1"}{"nodename":"n2"}`, `{"nodename":"n1"} {}`, `{"nodename":"n1"}]`, `{"nodename":"n1"}}`,
		`{"nodename":"n1" "x":1}`, `{"nodename":'n1'}`, `{nodename:"n1"}`, "\u00a0{\"nodename\":\"n1\"}", "{\"nodename\":\"n1\"}\u0085",
		// invalid UTF-8
		"{\"nodename\": \"n\xff\"}", "\xff\xfe{}", "{\"nodename\":\"n1\",\"resource\":{\"volumes\":[\"/d\xc0\xaf:1G\"]}}",
		// NUL bytes and escapes in names
		`{"nodename":"n1\u0000x"}`, `{"nodename":"../../n1"}`, `{"nodename":"/resource/storage/n1"}`, `{"nodename":"n1\n"}`,
		// huge numbers: overflowing int64 and 2^53, as numbers and as sizes
		`{"nodename":"n1","deploy_count":1e30}`,
		`{"nodename":"n1","deploy_count":9223372036854775808}`,
		`{"nodename":"n1","deploy_count":-9223372036854775809}`,
		`{"nodename":"n1","deploy_count":1000001,"workload_resource_request":{}}`,
		`{"nodename":"n1","resource":{"volumes":["/data0:9223372036854775807"],"storage":"9223372036854775807"}}`,
		`{"nodename":"n1","resource":{"volumes":["/data0:9007199254740993"],"storage":"9007199254740993"}}`,
		`{"nodename":"n1","resource":{"volumes":["/data0:99999999999P","/data1:8E"],"storage":"16E"}}`,
		`{"nodename":"n1","resource":{"volumes":["/data0:4P","/data1:4P"],"storage":"4P"}}`,
		`{"nodename":"n1","resource":{"disks":["/dev/vda:/:9223372036854775807:9223372036854775807:9223372036854775807:9223372036854775807"]}}`,
		`{"nodename":"n1","resource_request":{"disks":["/dev/vda:/:9223372036854775807:1:8E:8E"]},"delta":true,"incr":true}`,
		`{"nodename":"n1","resource_request":{"volumes":["/data0:9223372036854775807"]},"delta":true,"incr":true}`,
		`{"nodename":"n1","resource":{"volumes":{"/data0":9223372036854775807},"disks":[],"storage":9223372036854775807},"delta":false}`,
		`{"nodename":"n1","capacity":{"volumes":{"/data0":9007199254740993},"disks":[{"device":"/dev/vda","mounts":["/data0"],"read_IOPS":9223372036854775807,"write_IOPS":1,"read_bps":1,"write_bps":1}],"storage":9007199254740993},"usage":{"volumes":{"/data0":0},"disks":[],"storage":0}}`,
		`{"nodename":"n1","workloads_resource":[{"storage_request":9223372036854775807,"storage_limit":9223372036854775807},{"storage_request":9223372036854775807,"storage_limit":9223372036854775807}],"delta":true,"incr":true}`,
		`{"nodename":"n1","workloads_resource":[{"volume_plan_request":{"AUTO:/d:rw:8E":{"/data0":9223372036854775807}},"storage_request":1},{"volume_plan_request":{"AUTO:/d:rw:8E":{"/data0":9223372036854775807}},"storage_request":1}]}`,
		`{"nodename":"n1","workload_resource_request":{"volumes":["AUTO:/a:rw:5P:9223372036854775807:9223372036854775807:8E:8E","AUTO:/b:rw:5P:9223372036854775807:9223372036854775807:8E:8E"]},"deploy_count":1}`,
		`{"nodenames":["n1"],"workload_resource":{"volumes":["AUTO:/a:rw:1:9223372036854775807:9223372036854775807:0:0","AUTO:/b:rw:1:9223372036854775807:9223372036854775807:0:0"]}}`,
		`{"nodename":"n1","resource":{"cpu":1e300,"memory":"99999999999P"}}`,
		`{"nodename":"n1","resource":{"cpu":"9223372036854775807","memory":"9223372036854775807"}}`,
		`{"nodename":"n1","resource":{"cpu":9007199254740993,"memory":9007199254740993}}`,
		`{"nodename":"n1","resource_request":{"cpu":-1,"memory":"-1G"},"delta":true,"incr":false}`,
		`{"nodename":"n1","workloads_resource":[{"cpu_request_millis":9223372036854775807,"memory_request":9223372036854775807},{"cpu_request_millis":9223372036854775807,"memory_request":9223372036854775807}],"delta":true,"incr":true}`,
		`{"nodename":"n1","info":{"NCPU":9223372036854775807,"MemTotal":9223372036854775807,"StorageTotal":9223372036854775807}}`,
		`{"nodename":"n1","info":{"StorageTotal":-1,"Resources":{"storage":"not base64!","compute":{"cpu":1}}}}`,
		// deeply nested JSON
		strings.Repeat("[", 100000),
		`{"nodename":"n1","resource":` + strings.Repeat("[", 100000),
		`{"nodename":"n1","resource":` + strings.Repeat(`{"a":`, 100000) + `1` + strings.Repeat("}", 100000) + `}`,
		`{"nodename":"n1","workloads_resource":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`,
	}
	// wrong types for every key
	for _, key := range requestKeys {
		for _, v := range jsonValuesOfEveryType {
			if key == "nodename" {
				in = append(in, fmt.Sprintf(`{%q:%s}`, key, v))
			} else {
				in = append(in, fmt.Sprintf(`{"nodename":"n1",%q:%s}`, key, v))
			}
		}
	}
	return in
}

// bigRequest is a valid add-node request of about size bytes, and one just
// past the 16 MiB limit.
func bigRequest(size int) []byte {
	head := `{"nodename":"big","resource":{"volumes":["/data0:1G"]},"padding":"`
	return []byte(head + strings.Repeat("x", size-len(head)-2) + `"}`)
}

func FuzzDecodeRequest(f *testing.F) {
	for _, in := range badInputs() {
		f.Add([]byte(in))
	}
	for _, reqs := range validRequests {
		for _, in := range reqs {
			f.Add([]byte(in))
		}
	}
	f.Add(bigRequest(10 << 20))
	f.Add(bigRequest(MaxRequest + 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req types.Request
		err := decodeRequest(bytes.NewReader(data), &req)
		if err != nil {
			require.Equal(t, types.InvalidArgument, types.ClassOf(err), "a refused request is invalid_argument: %v", err)
			return
		}
		require.LessOrEqual(t, len(data), MaxRequest, "accepted more than the limit")
		require.True(t, utf8.Valid(data), "accepted invalid UTF-8")
		require.True(t, json.Valid(data), "accepted what is not one JSON value: %q", clip(data))
		var object map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(data, &object), "accepted what is not a JSON object: %q", clip(data))
		require.NotNil(t, object, "accepted null")
	})
}

func FuzzVerbs(f *testing.F) {
	dir := f.TempDir()
	config := filepath.Join(dir, "plugins.yaml")
	require.NoError(f, os.WriteFile(config, fmt.Appendf(nil, "embedded:\n  path: %q\n", filepath.Join(dir, "store.db")), 0o644))
	bins := []string{"storage", "compute"}

	for v, verb := range engine.Names() {
		for b, bin := range bins {
			if req, ok := validRequests[bin][verb]; ok {
				f.Add(uint8(b), uint8(v), []byte(req))
			} else {
				f.Add(uint8(b), uint8(v), []byte(`{}`))
			}
		}
	}
	for i, in := range badInputs() {
		// every hostile input reaches a few verbs of either binary
		for k := range 3 {
			f.Add(uint8((i+k)%2), uint8((i*3+k*5)%len(engine.Names())), []byte(in))
		}
	}
	addNode := uint8(slices.Index(engine.Names(), "add-node"))
	f.Add(uint8(0), addNode, bigRequest(10<<20))
	f.Add(uint8(1), addNode, bigRequest(MaxRequest+1))

	f.Fuzz(func(t *testing.T, b, v uint8, stdin []byte) {
		bin := bins[int(b)%len(bins)]
		verb := engine.Names()[int(v)%len(engine.Names())]
		var stdout, stderr bytes.Buffer
		code := Main(bin, []string{"--config", config, verb}, bytes.NewReader(stdin), &stdout, &stderr)
		switch code {
		case 0:
			require.Empty(t, stderr.String(), "%s %s succeeded but wrote to stderr", bin, verb)
			requireOneJSONValue(t, stdout.Bytes())
			requireExactNumbers(t, stdout.Bytes())
			if v, _ := engine.Lookup(verb); v.Input {
				require.True(t, json.Valid(stdin) && bytes.HasPrefix(bytes.TrimLeft(stdin, " \t\r\n"), []byte("{")),
					"%s %s succeeded on stdin that is not one JSON object: %q", bin, verb, clip(stdin))
			}
		case PluginExitCode:
			require.Empty(t, stdout.String(), "%s %s failed but printed an answer", bin, verb)
			line := stderr.String()
			require.True(t, strings.HasSuffix(line, "\n"), "the error line ends with a newline: %q", line)
			require.Equal(t, 1, strings.Count(line, "\n"), "the error is one line: %q", line)
			require.True(t, strings.HasPrefix(line, bin+": "+verb+": "), "the error line names binary and verb: %q", line)
			require.NotContains(t, line, "goroutine ", "no stack trace")
		default:
			t.Fatalf("%s %s exited %d; stdout %q stderr %q", bin, verb, code, clip(stdout.Bytes()), clip(stderr.Bytes()))
		}
	})
}

// requireOneJSONValue checks that out is exactly one JSON value.
func requireOneJSONValue(t *testing.T, out []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	var v any
	require.NoError(t, dec.Decode(&v), "stdout is not JSON: %q", clip(out))
	_, err := dec.Token()
	require.True(t, errors.Is(err, io.EOF), "stdout holds more than one JSON value: %q", clip(out))
}

// maxExact is 2^53: core decodes answers into float64, so an integer above
// it does not come back as it was (docs/protocol.md).
var maxExact = new(big.Float).SetInt64(1 << 53)

// requireExactNumbers checks that every number of an answer survives core's
// float64 decoding; only get-nodes-deploy-capacity's total may saturate.
func requireExactNumbers(t *testing.T, out []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if path == "" && k == "total" {
					continue
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case json.Number:
			f, _, err := big.ParseFloat(string(x), 10, 200, big.ToNearestEven)
			require.NoError(t, err)
			require.LessOrEqual(t, new(big.Float).Abs(f).Cmp(maxExact), 0, "answer %s = %s is beyond 2^53, which core cannot read back exactly", path, x)
		}
	}
	walk("", v)
}

// clip shortens a large input for a failure message.
func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}

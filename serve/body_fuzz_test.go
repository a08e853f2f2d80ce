package serve

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eru-extend/resources/types"
)

// FuzzDecodeBody: an operator write's body is read or refused with one
// invalid_argument line; a body read sets only the fields its route takes,
// a command id is never empty and an if_version is a version (an integer,
// 0 or more).
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `null`, `[]`, `1`, `"x"`, `{"cpu": 3000}`, `{"cpu": "1500", "memory": 2000}`, `{"cpus": 3000}`,
		`{"if_verison": 4}`, `{"command_id": "c1", "if_version": 4}`, `{"command_id": ""}`, `{"if_version": -1}`,
		`{"if_version": 1.5}`, `{"if_version": 1e3}`, `{"if_version": 99999999999999999999}`, `{"capacity": "10G"}`,
		`{"capacity": ""}`, `{"capacity": [1]}`, `{"cpu": null}`, `{} {}`, `{}]`, `{"cpu": 1,}`, `{"cpu":1,"cpu":"x"}`,
		`{"CPU": 1}`, "{\"cpu\": \"\xff\"}", `{"command_id": "a\nb"}`, `{"if_version": "4"}`, `{"cpu": -0.0}`,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(2))
	}
	routes := []struct {
		name  string
		takes []string
	}{{"ratios", ratioFields}, {"capacity", capacityFields}, {"write", mutatingFields}}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		route := routes[int(which)%len(routes)]
		b, err := decodeBody(bytes.NewReader(data), route.name, route.takes)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || types.ClassOf(err) != types.InvalidArgument || !strings.HasPrefix(msg, "body") {
				t.Fatalf("refusal of %q is not one invalid_argument line about the body: %s %q", data, types.ClassOf(err), msg)
			}
			return
		}
		for name, v := range map[string]string{"command_id": b.commandID, "if_version": b.ifVersion, "cpu": b.cpu, "memory": b.memory, "capacity": b.capacity} {
			if v != "" && !slices.Contains(route.takes, name) {
				t.Fatalf("%q set %s, which %s does not take", data, name, route.name)
			}
		}
		if b.ifVersion != "" {
			if v, err := strconv.ParseInt(b.ifVersion, 10, 64); err != nil || v < 0 {
				t.Fatalf("%q gave if_version %q, which is no version", data, b.ifVersion)
			}
		}
	})
}

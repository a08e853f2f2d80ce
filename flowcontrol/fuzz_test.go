package flowcontrol

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// testDocs are the raw-string YAML documents of a test file: the fuzz
// targets start from every document the tests read.
func testDocs(f *testing.F, file string) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		f.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)`([^`]*)`").FindAllStringSubmatch(string(data), -1) {
		out = append(out, m[1])
	}
	return out
}

// FuzzDecode: the flowcontrol section is read or refused in one line; a
// configuration read validates, and written back as YAML it reads the same.
func FuzzDecode(f *testing.F) {
	for _, doc := range testDocs(f, "config_test.go") {
		f.Add(doc)
	}
	for _, doc := range []string{"", "null", "[]", "levels: 1", "levels: [{name: x, type: Limited, nominal_concurrency_shares: -1}]",
		"server_concurrency_limit: 99999999999999999999", "&a [*a]", "levels: &a [*a, *a]", "schemas: [{match: {path: '['}}]"} {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		cfg, err := Decode(strings.NewReader(doc))
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "flowcontrol") {
				t.Fatalf("refusal of %q is not one line naming flowcontrol: %q", doc, msg)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%q decoded to a config that does not validate: %v", doc, err)
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("%q decoded to a config that does not marshal: %v", doc, err)
		}
		again, err := Decode(strings.NewReader(string(out)))
		if err != nil {
			t.Fatalf("%q decoded, written back as %q, is refused: %v", doc, out, err)
		}
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("%q decoded, written back as %q, reads differently:\n%+v\n%+v", doc, out, cfg, again)
		}
	})
}

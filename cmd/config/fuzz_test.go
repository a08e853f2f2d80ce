package config

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/eru-extend/resources/types"
)

// FuzzParse: a configuration file is read or refused with one
// invalid_argument line naming the file; a configuration read holds the
// document it came from.
func FuzzParse(f *testing.F) {
	for _, file := range []string{"config_test.go", "lines_test.go", "hooks_test.go"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range regexp.MustCompile("(?s)`([^`]*)`").FindAllStringSubmatch(string(data), -1) {
			f.Add(m[1])
		}
	}
	for _, file := range []string{"../../storage.yaml.sample", "../../compute.yaml.sample"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	for _, doc := range []string{"", "null", "---\n---\n", "[1]", "etcd: {machines: [a, a]}", "a: &x [*x]", "<<: {etcd: 1}",
		"etcd:\n  machines: 1\n", "log:\n  file: \"\\0\"\n", "\xff", "? [a]\n: 1\n", "etcd: !!binary aGk="} {
		f.Add(doc)
	}
	const file = "/etc/eru/storage.yaml"
	f.Fuzz(func(t *testing.T, doc string) {
		cfg, err := Parse([]byte(doc), file)
		if err != nil {
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || types.ClassOf(err) != types.InvalidArgument || !strings.Contains(msg, file) {
				t.Fatalf("refusal of %q is not one invalid_argument line naming the file: %s %q", doc, types.ClassOf(err), msg)
			}
			return
		}
		if cfg.File != file {
			t.Fatalf("%q read as a config of %q", doc, cfg.File)
		}
	})
}

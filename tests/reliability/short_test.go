package reliability_test

import "testing"

// skipUnderShort leaves the whole-process fault tests to the full suite
// (make test): `go test -short ./...` stays the quick check.
func skipUnderShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a whole-process fault test: run without -short")
	}
}

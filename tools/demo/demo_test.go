package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/tests/testenv"
)

// TestDemoRunsToTheEnd runs `make demo`'s walk on freshly built binaries:
// every step must succeed (or be refused where the demo expects it).
func TestDemoRunsToTheEnd(t *testing.T) {
	bin := filepath.Dir(testenv.Bin(t, "storage"))
	stdout := os.Stdout
	out, err := os.Create(filepath.Join(t.TempDir(), "demo.out"))
	require.NoError(t, err)
	os.Stdout = out
	defer func() { os.Stdout = stdout }()
	require.NoError(t, run(bin, false))
}

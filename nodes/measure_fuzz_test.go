package nodes

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzMeasure: whatever a host's /proc files hold (meminfo, the PSI
// files), a heartbeat's measurement of them passes the check the daemon
// applies to a measurement a node sends: a reading it cannot take is left
// out, never made up.
func FuzzMeasure(f *testing.F) {
	meminfo := "MemTotal:       16303428 kB\nMemFree:         1207360 kB\nMemAvailable:    9461272 kB\n"
	psi := "some avg10=0.00 avg60=1.25 avg300=0.50 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	f.Add(meminfo, psi, psi, "0b5c8d5e-6f6a-4d43-9e8f-7a7f7e7f7e7f\n")
	f.Add("MemAvailable: -1 kB\n", "some avg60=-0.5\n", "some avg60=100.01\n", "")
	f.Add("MemAvailable: 9223372036854775807 kB\n", "some avg60=NaN\n", "some avg60=Inf\n", "\xff")
	f.Add("MemAvailable: 9007199254740993 kB\n", "some avg60=99.995\n", "some avg60=1e2\n", " ")
	f.Add("MemAvailable:\n", "some avg60=\n", "some\n", "x\ny")
	f.Add("MemAvailable: 0x10 kB\n", "some avg60=0x1p-2\n", "some avg60=-0\n", "")
	f.Fuzz(func(t *testing.T, meminfo, cpu, memory, bootID string) {
		dir := t.TempDir()
		for name, data := range map[string]string{
			"meminfo": meminfo, "pressure/cpu": cpu, "pressure/memory": memory, "sys/kernel/random/boot_id": bootID,
		} {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m := Measure(dir, ClockReading{Sync: ClockUnspecified})
		if err := m.Check(); err != nil {
			t.Fatalf("meminfo %q, cpu %q, memory %q measure as %+v, which the daemon refuses: %v", meminfo, cpu, memory, m, err)
		}
	})
}

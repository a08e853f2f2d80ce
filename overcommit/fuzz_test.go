package overcommit

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/eru-extend/resources/types"
)

// refMillis reads a decimal CPU count exactly, as a rational number of
// millicores (nil: not a plain decimal).
func refMillis(text string) *big.Rat {
	text = strings.TrimPrefix(strings.TrimPrefix(text, "+"), "-")
	whole, frac, _ := strings.Cut(text, ".")
	if whole == "" && frac == "" || !digits(whole) || !digits(frac) {
		return nil
	}
	r, ok := new(big.Rat).SetString("0" + whole + "." + frac + "0")
	if !ok {
		return nil
	}
	return r.Mul(r, big.NewRat(1000, 1))
}

// FuzzParseMillis: a CPU count is read exactly (it agrees with a rational
// reading), within MaxHost, keeps its sign, and its decimal form reads
// back the same; a refusal is one line naming the cpu.
func FuzzParseMillis(f *testing.F) {
	for _, s := range []string{
		"16", "0.57", "0.1", "1.234", "0.001", "1.5000", ".5", "2.", " 3 ", "0", "0.0000", "+1",
		"562949953421.312", "-1.5", "-1", "1.2345", "0.0001", "1e3", "abc", "-1e3", "", ".", "1.2.3",
		"--1", "562949953421.313", "99999999999999", "9007199254740", "-0", "+.", "-.", "0000000000000000000001",
		"1.000000000000000000000", "\xff", "1\t", "٣",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, signed bool) {
		n, err := ParseMillis(s, signed)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "cpu ") {
				t.Fatalf("refusal of %q is not one line naming the cpu: %q", s, msg)
			}
			if strings.Contains(err.Error(), "too large") && !strings.Contains(err.Error(), maxHostCPUs()) {
				t.Fatalf("refusal of %q does not name the limit: %v", s, err)
			}
			return
		}
		if n > MaxHost || n < -MaxHost || (n < 0 && !signed) {
			t.Fatalf("%q (signed %v) read as %d", s, signed, n)
		}
		text := strings.TrimSpace(s)
		ref := refMillis(text)
		if ref == nil {
			t.Fatalf("%q read as %d, but it is no decimal number", s, n)
		}
		abs := n
		if abs < 0 {
			abs = -abs
		}
		if ref.Cmp(new(big.Rat).SetInt64(abs)) != 0 {
			t.Fatalf("%q read as %d millicores, exactly it is %s", s, n, ref.FloatString(3))
		}
		if n != 0 && strings.HasPrefix(text, "-") != (n < 0) {
			t.Fatalf("%q read as %d: the sign is lost", s, n)
		}
		back, err := ParseMillis(fmt.Sprintf("%d.%03d", n/1000, abs%1000), signed)
		if n < 0 && n > -1000 {
			back, err = ParseMillis(fmt.Sprintf("-0.%03d", abs), signed)
		}
		if err != nil || back != n {
			t.Fatalf("%q read as %d, which reads back as %d, %v", s, n, back, err)
		}
	})
}

// FuzzComputeRequest: a workload request and a node's add-node request
// (with what an engine reports) are read or refused with one
// invalid_argument line; what is read stays within the limits and, for a
// workload, a limit is never below its request.
func FuzzComputeRequest(f *testing.F) {
	const reported32 = "eyJjcHUiOiAzMiwgIm1lbW9yeSI6ICIxNkcifQ=="
	for _, s := range []string{
		`{"cpu": 1.5}`, `{"memory": "1G"}`, `{"cpu": 2, "memory": "4G"}`, `{"cpu": 0.1}`,
		`{"cpu-request": 1, "cpu-limit": 2, "memory-request": "1G", "memory-limit": "2G"}`, `{"cpu-request": 2, "cpu-limit": 1}`,
		`{"memory-request": "2G", "memory-limit": "1G"}`, `{"cpu-limit": 3}`, `{}`, `null`, `{"cpu": null, "memory": "1G"}`,
		`{"cpu": -1, "memory": "-1G"}`, `{"memory": "12Q"}`, `{"cpus": 1}`, `[1]`, `{"memory": "3P"}`, `{"cpu": 1e400}`,
		`{"cpu": "9007199254740", "memory": "1G"}`, `{"cpu": 1, "memory": "1G", "gpu": 1}`, `{"cpu":1,"cpu":2}`, `"x"`, ``,
	} {
		f.Add([]byte(s), false, []byte(``))
		f.Add([]byte(s), true, []byte(`{"NCPU": 8, "MemTotal": 999, "Resources": {"compute": "`+reported32+`"}}`))
	}
	f.Add([]byte(`{}`), false, []byte(`{"NCPU": 18446744073709552, "MemTotal": 1073741824}`))
	f.Add([]byte(`{}`), false, []byte(`{"Resources": {"compute": {"cpu": 6, "memory": "2G"}}}`))
	f.Add([]byte(`{}`), false, []byte(`{"NCPU": -4, "MemTotal": -1}`))
	oneLine := func(t *testing.T, in []byte, err error) {
		if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || types.ClassOf(err) != types.InvalidArgument {
			t.Fatalf("refusal of %q is not one invalid_argument line: %s %q", in, types.ClassOf(err), msg)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, signed bool, infoRaw []byte) {
		w, err := ParseWorkloadRequest(raw, signed)
		if err != nil {
			oneLine(t, raw, err)
		} else {
			for _, v := range []int64{w.CPURequestMillis, w.CPULimitMillis, w.MemoryRequest, w.MemoryLimit} {
				if v > MaxHost || v < -MaxHost || (!signed && v < 0) {
					t.Fatalf("%q (signed %v) read as %+v", raw, signed, *w)
				}
			}
			if !signed && (w.CPULimitMillis < w.CPURequestMillis || w.MemoryLimit < w.MemoryRequest) {
				t.Fatalf("%q read with a limit below its request: %+v", raw, *w)
			}
		}
		var info *types.EngineInfo
		if len(infoRaw) > 0 {
			info = &types.EngineInfo{}
			if json.Unmarshal(infoRaw, info) != nil {
				info = nil
			}
		}
		n, err := AddNode(raw, info)
		if err != nil {
			oneLine(t, raw, err)
			return
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("add-node %q made a record that does not validate: %v", raw, err)
		}
		if c := n.Capacity; c.CPUMillis > MaxHost || c.MemoryBytes > MaxHost || c.CPUMillis < 0 || c.MemoryBytes < 0 {
			t.Fatalf("add-node %q with %q made capacity %+v", raw, infoRaw, c)
		}
	})
}

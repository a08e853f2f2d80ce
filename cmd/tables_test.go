package cmd

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/types"
)

var update = flag.Bool("update", false, "rewrite the tables' golden files in testdata/")

// tableNow is the fixed clock the golden tables are rendered at.
var tableNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := tableNow.Add(-d); return &t }

func i64(v int64) *int64 { return &v }

func readyNode() *nodes.View {
	return &nodes.View{
		NodeID: "n1", Admission: nodes.Admitted, Status: nodes.StatusReady, Schedulable: true,
		Incarnation: 2, BootID: "5c0e6a4e-boot", Version: 7,
		CreatedAt: tableNow.Add(-72 * time.Hour), UpdatedAt: tableNow.Add(-3 * time.Minute),
		Session: nodes.SessionView{Live: true, Ever: true, Since: at(time.Hour), ExpiresAt: at(-18 * time.Second), LastSeen: at(12 * time.Second)},
		Observation: &nodes.Observation{
			Version: 40, ObservedAt: *at(12 * time.Second),
			Clock:     nodes.Clock{Synchronization: nodes.ClockSynchronized, MaxErrorMs: i64(12)},
			HostUsage: nodes.HostUsage{MemoryAvailableBytes: i64(3 << 30), CPUPressureBP: i64(40), MemoryPressureBP: i64(0)},
		},
		Released: map[string]any{},
		Resources: map[string]nodes.ResourceSummary{
			"storage": {
				Capacity: json.RawMessage(`{"volumes":{"/data0":1649267441664,"/data1":1099511627776},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":1000,"write_IOPS":1000,"read_bps":1073741824,"write_bps":1073741824}],"storage":3298534883328}`),
				Usage:    json.RawMessage(`{"volumes":{"/data0":107374182400,"/data1":0},"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":100,"write_IOPS":0,"read_bps":0,"write_bps":0}],"storage":107374182400}`),
			},
			"compute": {
				Capacity: json.RawMessage(`{"cpu_millis":16000,"memory_bytes":68719476736,"cpu_ratio":4000,"memory_ratio":1000,"schedulable_cpu_millis":64000,"schedulable_memory_bytes":68719476736,"cpu_ratio_source":"NODE","memory_ratio_source":"DEFAULT","overcommit_version":3}`),
				Usage:    json.RawMessage(`{"cpu_millis":2000,"memory_bytes":4294967296}`),
			},
		},
	}
}

func drainingNode() *nodes.View {
	return &nodes.View{
		NodeID: "n2", Admission: nodes.Admitted, Status: nodes.StatusDraining, Drain: true,
		UnschedulableReasons: []string{"node is draining", "clock exceeds tolerance: UNSYNCHRONIZED, max error 16s > 500ms"},
		Incarnation:          1, Version: 4,
		CreatedAt: tableNow.Add(-5 * 24 * time.Hour), UpdatedAt: tableNow.Add(-40 * time.Second),
		Session:  nodes.SessionView{Ever: true, LastSeen: at(3 * time.Minute)},
		Released: map[string]any{"compute": json.RawMessage(`{"cpu_millis":500,"memory_bytes":1073741824}`)},
		Resources: map[string]nodes.ResourceSummary{
			"compute": {
				Capacity: json.RawMessage(`{"cpu_millis":8000,"memory_bytes":17179869184,"cpu_ratio":1000,"memory_ratio":1000,"schedulable_cpu_millis":8000,"schedulable_memory_bytes":17179869184,"cpu_ratio_source":"DEFAULT","memory_ratio_source":"DEFAULT","overcommit_version":0}`),
				Usage:    json.RawMessage(`{"cpu_millis":6000,"memory_bytes":1073741824}`),
			},
		},
	}
}

func neverSeenNode() *nodes.View {
	return &nodes.View{NodeID: "n3", Admission: nodes.Retired, Status: nodes.StatusRetired, Version: 9,
		UnschedulableReasons: []string{"node is retired"},
		CreatedAt:            tableNow.Add(-30 * 24 * time.Hour), UpdatedAt: tableNow.Add(-2 * time.Hour),
		Released: map[string]any{}, Resources: map[string]nodes.ResourceSummary{}}
}

// The tables of every operator answer, rendered at a fixed time, are the
// golden files in testdata/ (go test ./cmd -run TestTables -update
// rewrites them).
func TestTablesMatchTheirGoldenFiles(t *testing.T) {
	cases := []struct {
		name   string
		blocks []block
	}{
		{"a ready node with a live session and both plugins", viewTables(readyNode(), tableNow)},
		{"a draining node with an expired session, reasons and a ledger", viewTables(drainingNode(), tableNow)},
		{"a retired node never seen", viewTables(neverSeenNode(), tableNow)},
		{"a list of nodes", listTables(nodeList{Nodes: []*nodes.View{readyNode(), drainingNode(), neverSeenNode()}}, tableNow)},
		{"an empty list", listTables(nodeList{Nodes: []*nodes.View{}}, tableNow)},
		{"an isolation", isolateTables(&nodes.IsolateResult{Node: drainingNode(), Figures: []types.Figure{
			{Name: "released_volumes", Value: 2}, {Name: "released_storage_bytes", Value: 1649267441664},
			{Name: "released_cpu_millis", Value: 2000}, {Name: "released_memory_bytes", Value: 4294967296}}}, tableNow)},
		{"the overcommit defaults", defaultsTables(overcommit.Defaults{CPU: 4000, Memory: 1500, Version: 2}, tableNow)},
		{"a node's ratios", nodeRatiosTables(overcommit.NodeOvercommit{NodeID: "n1",
			CPU: overcommit.Effective{Ratio: 2000, Source: "NODE"}, Memory: overcommit.Effective{Ratio: 1000, Source: "DEFAULT"}, Version: 3}, tableNow)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, writeBlocks(&buf, c.blocks))
			golden := filepath.Join("testdata", "table-"+slug(c.name)+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "no golden file: run go test ./cmd -run TestTables -update")
			require.Equal(t, string(want), buf.String())
			require.NotContains(t, buf.String(), "{", "no JSON blob in a table")
		})
	}
}

func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ' ' || c == '\'' || c == ',' {
			b[i] = '-'
		}
	}
	return string(b)
}

func TestHumanUnits(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {1536, "1.5 KiB"}, {1649267441664, "1.5 TiB"}, {100 << 30, "100 GiB"}, {-(10 << 30), "-10 GiB"}} {
		t.Run(c.want, func(t *testing.T) { require.Equal(t, c.want, humanBytes(c.bytes)) })
	}
	require.Equal(t, "2000m", millicores(2000))
	require.Equal(t, "12s ago", ago(tableNow.Add(-12*time.Second), tableNow))
	require.Equal(t, "3m ago", ago(tableNow.Add(-3*time.Minute-5*time.Second), tableNow))
	require.Equal(t, "<1%", percent(1, 1000))
	require.Equal(t, "-", percent(1, 0))
	l := leaves(json.RawMessage(`{"read_IOPS":9007199254740993}`))
	require.Len(t, l, 1)
	require.Equal(t, "9007199254740993", l[0].text, "a count above 2^53 prints exactly")
	require.Equal(t, "read IOPS", l[0].name)
}

func TestTableWordsKeepTheirCaseUnlessTheyAreEnumerations(t *testing.T) {
	for _, c := range []struct{ name, word, want string }{
		{"an enumerated source reads in lower case", "DEFAULT", "default"},
		{"an enumeration with an underscore reads in lower case", "MEMORY_TIGHT", "memory_tight"},
		{"a pool path keeps its case", "/tmp/tmp.2mItI9RsSx", "/tmp/tmp.2mItI9RsSx"},
		{"a mixed-case id keeps its case", "Ceph-A", "Ceph-A"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, wordText(c.word))
		})
	}
}

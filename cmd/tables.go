package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/eru-extend/resources/nodes"
)

// viewTable prints one registration (or isolate's answer) as rows of
// field and value.
func viewTable(w io.Writer, raw json.RawMessage) error {
	var iso nodes.IsolateResult
	if err := json.Unmarshal(raw, &iso); err == nil && iso.Node != nil {
		rows := viewRows(iso.Node)
		rows = append(rows,
			[]string{"RELEASED VOLUMES", strconv.FormatInt(iso.ReleasedVolumes, 10)},
			[]string{"RELEASED STORAGE BYTES", strconv.FormatInt(iso.ReleasedStorageBytes, 10)},
			[]string{"RELEASED CPU MILLIS", strconv.FormatInt(iso.ReleasedCPUMillis, 10)},
			[]string{"RELEASED MEMORY BYTES", strconv.FormatInt(iso.ReleasedMemoryBytes, 10)},
		)
		return table(w, rows)
	}
	var v nodes.View
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return table(w, viewRows(&v))
}

func viewRows(v *nodes.View) [][]string {
	rows := [][]string{
		{"NODE", v.NodeID},
		{"STATUS", string(v.Status)},
		{"ADMISSION", string(v.Admission)},
		{"DRAIN", strconv.FormatBool(v.Drain)},
		{"ISOLATED", fmt.Sprintf("%t (incarnation %d)", v.Isolated, v.IsolatedIncarnation)},
		{"INCARNATION", strconv.FormatInt(v.Incarnation, 10)},
		{"BOOT ID", dash(v.BootID)},
		{"VERSION", strconv.FormatInt(v.Version, 10)},
		{"SESSION", sessionText(v.Session)},
		{"UPDATED", v.UpdatedAt.Format(time.RFC3339)},
	}
	if o := v.Observation; o != nil {
		clock := o.Clock.Synchronization
		if o.Clock.MaxErrorMs != nil {
			clock += fmt.Sprintf(", max error %dms", *o.Clock.MaxErrorMs)
		}
		if o.Clock.ExceedsTolerance {
			clock += ", EXCEEDS TOLERANCE"
		}
		rows = append(rows, []string{"CLOCK", clock})
		if o.HostUsage.MemoryAvailableBytes != nil {
			rows = append(rows, []string{"MEMORY AVAILABLE", strconv.FormatInt(*o.HostUsage.MemoryAvailableBytes, 10)})
		}
		if o.MemoryTight != nil {
			rows = append(rows, []string{"MEMORY TIGHT SINCE", o.MemoryTight.Since.Format(time.RFC3339)})
		}
	}
	for _, name := range sortedNames(v.Released) {
		rows = append(rows, []string{"RELEASED " + strings.ToUpper(name), compact(v.Released[name])})
	}
	names := make([]string, 0, len(v.Resources))
	for n := range v.Resources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rows = append(rows,
			[]string{strings.ToUpper(n) + " CAPACITY", compact(v.Resources[n].Capacity)},
			[]string{strings.ToUpper(n) + " USAGE", compact(v.Resources[n].Usage)},
		)
	}
	return rows
}

// listTable prints `nodes list` one node a row.
func listTable(w io.Writer, raw json.RawMessage) error {
	var list struct {
		Nodes []*nodes.View `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return err
	}
	rows := [][]string{{"NODE", "STATUS", "ADMISSION", "DRAIN", "ISOLATED", "INCARNATION", "VERSION", "SESSION"}}
	for _, v := range list.Nodes {
		rows = append(rows, []string{v.NodeID, string(v.Status), string(v.Admission), strconv.FormatBool(v.Drain),
			strconv.FormatBool(v.Isolated), strconv.FormatInt(v.Incarnation, 10), strconv.FormatInt(v.Version, 10), sessionText(v.Session)})
	}
	return table(w, rows)
}

func sessionText(s nodes.SessionView) string {
	switch {
	case s.Live && s.ExpiresAt != nil:
		return "live until " + s.ExpiresAt.Format(time.RFC3339)
	case s.Ever:
		return "expired"
	default:
		return "never"
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

func sortedNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

package cmd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/types"
)

// The human tables of the operator commands (-o table), one function per
// answer type.

// viewRows are one registration as rows of field and value.
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
	for _, name := range types.SortedKeys(v.Released) {
		rows = append(rows, []string{"RELEASED " + strings.ToUpper(name), compact(v.Released[name])})
	}
	for _, n := range types.SortedKeys(v.Resources) {
		rows = append(rows,
			[]string{strings.ToUpper(n) + " CAPACITY", compact(v.Resources[n].Capacity)},
			[]string{strings.ToUpper(n) + " USAGE", compact(v.Resources[n].Usage)},
		)
	}
	return rows
}

// isolateRows are isolate's answer: the record, then each released figure
// (released_volumes reads RELEASED VOLUMES).
func isolateRows(iso *nodes.IsolateResult) [][]string {
	rows := viewRows(iso.Node)
	for _, f := range iso.Figures {
		rows = append(rows, []string{strings.ToUpper(strings.ReplaceAll(f.Name, "_", " ")), strconv.FormatInt(f.Value, 10)})
	}
	return rows
}

// listRows are `nodes list`, one node a row.
func listRows(list nodeList) [][]string {
	rows := [][]string{{"NODE", "STATUS", "ADMISSION", "DRAIN", "ISOLATED", "INCARNATION", "VERSION", "SESSION"}}
	for _, v := range list.Nodes {
		rows = append(rows, []string{v.NodeID, string(v.Status), string(v.Admission), strconv.FormatBool(v.Drain),
			strconv.FormatBool(v.Isolated), strconv.FormatInt(v.Incarnation, 10), strconv.FormatInt(v.Version, 10), sessionText(v.Session)})
	}
	return rows
}

func defaultsRows(d overcommit.Defaults) [][]string {
	return [][]string{
		{"CPU RATIO", strconv.FormatInt(d.CPU, 10)},
		{"MEMORY RATIO", strconv.FormatInt(d.Memory, 10)},
		{"VERSION", strconv.FormatInt(d.Version, 10)},
	}
}

func nodeRatiosRows(n overcommit.NodeOvercommit) [][]string {
	return [][]string{
		{"NODE", n.NodeID},
		{"CPU RATIO", strconv.FormatInt(n.CPU.Ratio, 10) + " (" + string(n.CPU.Source) + ")"},
		{"MEMORY RATIO", strconv.FormatInt(n.Memory.Ratio, 10) + " (" + string(n.Memory.Source) + ")"},
		{"VERSION", strconv.FormatInt(n.Version, 10)},
	}
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

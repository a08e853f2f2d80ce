package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/overcommit"
	"github.com/eru-extend/resources/types"
)

// The human tables of the operator commands (-o table), one function per
// answer type. A table is blocks of rows, each block aligned on its own and
// separated by a blank line; a block whose first row is a header has one
// header per column. Sizes are binary (1.5 TiB), CPU in millicores
// (2000m), times relative to now (seen 12s ago), so that a table reads the
// same whatever the clock: the golden tests fix now.

type block [][]string

// tables renders an answer at time now.
type tables[T any] func(v T, now time.Time) []block

// writeBlocks writes blocks as aligned columns, a blank line between two.
func writeBlocks(w io.Writer, blocks []block) error {
	var buf bytes.Buffer
	first := true
	for _, b := range blocks {
		if len(b) == 0 {
			continue
		}
		if !first {
			buf.WriteByte('\n')
		}
		first = false
		tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		for _, row := range b {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	// tabwriter pads the last column too when a row is shorter: trim.
	lines := strings.Split(buf.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}

// viewTables are one registration: its fields, then each plugin's
// resources and the isolation ledger, one item a row.
func viewTables(v *nodes.View, now time.Time) []block {
	fields := block{
		{"NODE", v.NodeID},
		{"STATUS", statusText(v)},
		{"SCHEDULABLE", yesNo(v.Schedulable)},
	}
	if len(v.UnschedulableReasons) > 0 {
		for i, r := range v.UnschedulableReasons {
			label := ""
			if i == 0 {
				label = "REASONS"
			}
			fields = append(fields, []string{label, r})
		}
	}
	isolated := yesNo(v.Isolated)
	if v.Isolated {
		isolated += fmt.Sprintf(" (incarnation %d)", v.IsolatedIncarnation)
	}
	fields = append(fields,
		[]string{"ADMISSION", string(v.Admission)},
		[]string{"DRAIN", yesNo(v.Drain)},
		[]string{"ISOLATED", isolated},
		[]string{"INCARNATION", strconv.FormatInt(v.Incarnation, 10)},
		[]string{"BOOT ID", dash(v.BootID)},
		[]string{"VERSION", strconv.FormatInt(v.Version, 10)},
		[]string{"SESSION", sessionText(v.Session, now)},
		[]string{"CREATED", ago(v.CreatedAt, now)},
		[]string{"UPDATED", ago(v.UpdatedAt, now)},
	)
	if o := v.Observation; o != nil {
		clock := o.Clock.Synchronization
		if o.Clock.MaxErrorMs != nil {
			clock += ", max error " + (time.Duration(*o.Clock.MaxErrorMs) * time.Millisecond).String()
		}
		if o.Clock.ExceedsTolerance {
			clock += ", exceeds tolerance"
		}
		fields = append(fields, []string{"OBSERVED", ago(o.ObservedAt, now)}, []string{"CLOCK", clock})
		if m := o.HostUsage.MemoryAvailableBytes; m != nil {
			fields = append(fields, []string{"MEMORY AVAILABLE", humanBytes(*m)})
		}
		if p := o.HostUsage.CPUPressureBP; p != nil {
			fields = append(fields, []string{"CPU PRESSURE", basisPoints(*p)})
		}
		if p := o.HostUsage.MemoryPressureBP; p != nil {
			fields = append(fields, []string{"MEMORY PRESSURE", basisPoints(*p)})
		}
		if o.MemoryTight != nil {
			fields = append(fields, []string{"MEMORY TIGHT", "since " + ago(o.MemoryTight.Since, now)})
		}
	}
	out := []block{fields}
	res := block{{"RESOURCE", "ITEM", "USED", "CAPACITY", "USE"}}
	for _, name := range types.SortedKeys(v.Resources) {
		for _, it := range resourceItems(v.Resources[name]) {
			res = append(res, []string{name, it.name, it.used, it.capacity, it.percent})
		}
	}
	if len(res) > 1 {
		out = append(out, res)
	}
	rel := block{{"RELEASED", "ITEM", "AMOUNT"}}
	for _, name := range types.SortedKeys(v.Released) {
		for _, it := range leaves(v.Released[name]) {
			rel = append(rel, []string{name, it.name, it.text})
		}
	}
	if len(rel) > 1 {
		out = append(out, rel)
	}
	return out
}

// isolateTables are isolate's answer: what was released, then the record.
func isolateTables(iso *nodes.IsolateResult, now time.Time) []block {
	figures := block{{"RELEASED", "AMOUNT"}}
	for _, f := range iso.Figures {
		name := strings.TrimPrefix(f.Name, "released_")
		figures = append(figures, []string{strings.ReplaceAll(unitless(name), "_", " "), formatLeaf(f.Name, f.Value)})
	}
	return append([]block{figures}, viewTables(iso.Node, now)...)
}

// listTables are `nodes list`, one node a row; an empty list says so.
func listTables(list nodeList, now time.Time) []block {
	if len(list.Nodes) == 0 {
		if list.status != "" {
			return []block{{{"No " + string(list.status) + " nodes."}}}
		}
		return []block{{{"No nodes registered."}}}
	}
	rows := block{{"NODE", "STATUS", "REASONS", "SESSION", "USAGE", "INCARNATION", "VERSION"}}
	for _, v := range list.Nodes {
		rows = append(rows, []string{v.NodeID, statusText(v), dash(strings.Join(v.UnschedulableReasons, "; ")),
			sessionText(v.Session, now), usageSummary(v), strconv.FormatInt(v.Incarnation, 10), strconv.FormatInt(v.Version, 10)})
	}
	return []block{rows}
}

func defaultsTables(d overcommit.Defaults, _ time.Time) []block {
	return []block{{
		{"CPU RATIO", ratioText(d.CPU)},
		{"MEMORY RATIO", ratioText(d.Memory)},
		{"VERSION", strconv.FormatInt(d.Version, 10)},
	}}
}

func nodeRatiosTables(n overcommit.NodeOvercommit, _ time.Time) []block {
	return []block{{
		{"NODE", n.NodeID},
		{"CPU RATIO", ratioText(n.CPU.Ratio) + ", " + strings.ToLower(string(n.CPU.Source))},
		{"MEMORY RATIO", ratioText(n.Memory.Ratio) + ", " + strings.ToLower(string(n.Memory.Source))},
		{"VERSION", strconv.FormatInt(n.Version, 10)},
	}}
}

// statusText is the status as kubectl shows a cordoned node:
// READY,Unschedulable.
func statusText(v *nodes.View) string {
	if v.Schedulable {
		return string(v.Status)
	}
	return string(v.Status) + ",Unschedulable"
}

// sessionText says whether the session is live and how long ago the node
// was last seen.
func sessionText(s nodes.SessionView, now time.Time) string {
	switch {
	case s.Live && s.LastSeen != nil:
		return "live, seen " + ago(*s.LastSeen, now)
	case s.Live:
		return "live"
	case s.Ever && s.LastSeen != nil:
		return "expired, seen " + ago(*s.LastSeen, now)
	case s.Ever:
		return "expired"
	default:
		return "never"
	}
}

// ago is how long before now t was, in the largest unit that fits
// (12s ago, 3m ago, 5h ago, 2d ago).
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + shortDuration(-d)
	}
	return shortDuration(d) + " ago"
}

func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d < 48*time.Hour:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	default:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
}

// humanBytes is a size in binary units, at most one decimal: 1.5 TiB.
func humanBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, neg := float64(n), n < 0
	if neg {
		v = -v
	}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(math.Floor(v*10)/10, 'f', -1, 64) + " " + units[i]
	if neg {
		return "-" + s
	}
	return s
}

// millicores is CPU as kubectl writes it: 2000m.
func millicores(n int64) string { return strconv.FormatInt(n, 10) + "m" }

// ratioText is a ratio in thousandths, and as a multiple: 4000 (4x).
func ratioText(r int64) string {
	return strconv.FormatInt(r, 10) + " (" + strconv.FormatFloat(float64(r)/1000, 'f', -1, 64) + "x)"
}

func basisPoints(bp int64) string {
	return strconv.FormatFloat(float64(bp)/100, 'f', -1, 64) + "%"
}

func percent(used, capacity float64) string {
	if capacity <= 0 {
		return "-"
	}
	p := used / capacity * 100
	if p > 0 && p < 1 {
		return "<1%"
	}
	return strconv.FormatFloat(math.Floor(p), 'f', 0, 64) + "%"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// leaf is one number (or word) of a plugin's summary, flattened.
type leaf struct {
	path  []string // keys from the top; a list item by its "device"
	value float64
	n     int64  // the value exactly, when it is an integer
	word  string // a string leaf (see wordText)
	name  string // the path as a reader reads it
	text  string // the value in its unit
}

// leaves flattens a summary value (capacity, usage, a ledger) to its
// leaves, in a stable order.
func leaves(v any) []leaf {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil
	}
	var out []leaf
	var walk func(path []string, t any)
	walk = func(path []string, t any) {
		switch x := t.(type) {
		case map[string]any:
			for _, k := range types.SortedKeys(x) {
				walk(append(append([]string{}, path...), k), x[k])
			}
		case []any:
			for i, item := range x {
				key := strconv.Itoa(i)
				if m, ok := item.(map[string]any); ok {
					if d, ok := m["device"].(string); ok {
						key = d
						item = without(m, "device", "mounts")
					}
				}
				walk(append(append([]string{}, path...), key), item)
			}
		case json.Number:
			f, _ := x.Float64()
			n, err := x.Int64()
			if err != nil {
				n = int64(f)
			}
			out = append(out, leaf{path: path, value: f, n: n})
		case string:
			out = append(out, leaf{path: path, word: x})
		}
	}
	walk(nil, tree)
	for i := range out {
		l := &out[i]
		l.name = leafName(l.path)
		if l.word != "" {
			l.text = wordText(l.word)
		} else {
			l.text = formatLeaf(strings.Join(l.path, "."), l.n)
		}
	}
	return out
}

// wordText shows a string leaf: an enumerated value (DEFAULT, OVERRIDE) in
// the table's lower case, anything else (a path, an id) exactly as stored.
func wordText(w string) string {
	for _, r := range w {
		if (r < 'A' || r > 'Z') && r != '_' {
			return w
		}
	}
	return strings.ToLower(w)
}

func without(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// leafName is a path as words: volumes./data0 reads "volume /data0",
// cpu_millis reads "cpu", disks./dev/vda.read_bps reads "disk /dev/vda
// read bps".
func leafName(path []string) string {
	words := make([]string, 0, len(path))
	for i, p := range path {
		if i == 0 && len(path) > 1 {
			p = strings.TrimSuffix(p, "s") // volumes./data0: volume /data0
		}
		if !strings.HasPrefix(p, "/") {
			p = strings.ReplaceAll(unitless(p), "_", " ")
		}
		words = append(words, p)
	}
	return strings.Join(words, " ")
}

// unitless drops a key's unit suffix (the value carries its unit).
func unitless(key string) string {
	for _, suffix := range []string{"_millis", "_bytes", "_bp"} {
		if s, ok := strings.CutSuffix(key, suffix); ok {
			return s
		}
	}
	return key
}

// formatLeaf writes a number in the unit its key names: bytes and the
// storage figures in binary units, bandwidth per second, CPU in
// millicores, ratios in thousandths, counts as they are.
func formatLeaf(path string, n int64) string {
	last := path[strings.LastIndex(path, ".")+1:]
	top, _, _ := strings.Cut(path, ".")
	switch {
	case strings.HasSuffix(last, "_millis"):
		return millicores(n)
	case strings.HasSuffix(strings.ToLower(last), "_bps"):
		return humanBytes(n) + "/s"
	case strings.HasSuffix(last, "_bytes"), last == "bytes", top == "volumes", top == "storage":
		return humanBytes(n)
	case strings.HasSuffix(last, "_ratio"):
		return ratioText(n)
	default:
		return strconv.FormatInt(n, 10)
	}
}

// item is one row of a node's resources: what is used of what.
type item struct{ name, used, capacity, percent string }

// resourceItems pairs each usage figure of a plugin with its capacity (the
// schedulable figure when the plugin answers one), then lists the
// capacity's other figures (host figures, ratios) without a usage.
func resourceItems(s nodes.ResourceSummary) []item {
	capacity := map[string]leaf{}
	var order []string
	for _, l := range leaves(s.Capacity) {
		k := strings.Join(l.path, ".")
		capacity[k] = l
		order = append(order, k)
	}
	used := map[string]bool{}
	var out []item
	for _, u := range leaves(s.Usage) {
		k := strings.Join(u.path, ".")
		c, ok := capacity["schedulable_"+k]
		if ok {
			used["schedulable_"+k] = true
		} else if c, ok = capacity[k]; ok {
			used[k] = true
		}
		it := item{name: u.name, used: u.text, capacity: "-", percent: "-"}
		if ok {
			it.capacity, it.percent = c.text, percent(u.value, c.value)
		}
		out = append(out, it)
	}
	for _, k := range order {
		if used[k] {
			continue
		}
		c := capacity[k]
		if strings.HasSuffix(k, "_source") || k == "overcommit_version" {
			continue
		}
		name := c.name
		if _, paired := capacity["schedulable_"+k]; paired {
			name = "host " + name
		}
		if src, ok := capacity[k+"_source"]; ok {
			c.text += ", " + src.text
		}
		out = append(out, item{name: name, used: "-", capacity: c.text, percent: "-"})
	}
	return out
}

// usageSummary is a node's busiest figure of each plugin, in percent:
// "compute 12%, storage 1%".
func usageSummary(v *nodes.View) string {
	var parts []string
	for _, name := range types.SortedKeys(v.Resources) {
		best, bestP := "", -1.0
		for _, it := range resourceItems(v.Resources[name]) {
			if it.percent == "-" {
				continue
			}
			p := parsePercent(it.percent)
			if p > bestP {
				best, bestP = it.percent, p
			}
		}
		if best != "" {
			parts = append(parts, name+" "+best)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func parsePercent(s string) float64 {
	if s == "<1%" {
		return 0.5
	}
	f, _ := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	return f
}

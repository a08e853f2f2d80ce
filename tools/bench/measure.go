package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// A step is one side of a measure: the command to time and the check of
// its answer. cmd gets the run's index, so that a write can alternate.
type step struct {
	label string
	cmd   func(i int) command
	check check
	// readsStore says the command must read etcd: etcd must serve at least
	// one range request while it runs, or its answer, right as it may be,
	// was not read from the store (a canned or cached answer).
	readsStore bool
}

// A measure times a subject against a floor in interleaved pairs (subject,
// floor, subject, floor, …) after one untimed warm-up pair, so that both
// sides see the same machine at the same moments.
type measure struct {
	name           string
	subject, floor step
	// target is the most the median ratio subject/floor may be (issue 13's
	// targets), 0 when there is none; rssTarget the most peak RSS of the
	// subject may be in any run, in MiB.
	target    float64
	rssTarget int64
	// undoes says the subject undoes its own write every second run: it
	// then runs an even number of times, leaving the store as it found it.
	undoes bool
	// via, when set, is the daemon every call of the subject must go
	// through: its count of answered calls must grow by exactly them.
	via *daemonCalls
}

// outcome is what the pairs of one measure gave.
type outcome struct {
	m             measure
	subject, base []sample
}

func (b *bench) runMeasure(m measure, pairs int) (outcome, error) {
	o := outcome{m: m}
	if b.progress != nil {
		fmt.Fprintf(b.progress, "bench: %s against %s, %d pairs\n", m.name, m.floor.label, pairs)
	}
	var before int
	if m.via != nil {
		var err error
		if before, err = m.via.answered(); err != nil {
			return o, fmt.Errorf("%s: the daemon's count of calls: %w", m.name, err)
		}
	}
	for i := -1; i < pairs; i++ {
		run := i + 1 // the run index the checks see; the warm-up is run 0
		s, err := b.timed(m.subject, run)
		if err != nil {
			return o, fmt.Errorf("%s: %w", m.name, err)
		}
		f, err := b.timed(m.floor, run)
		if err != nil {
			return o, fmt.Errorf("%s: floor %s: %w", m.name, m.floor.label, err)
		}
		if i >= 0 {
			o.subject, o.base = append(o.subject, s), append(o.base, f)
		}
	}
	if runs := pairs + 1; m.undoes && runs%2 == 1 {
		if _, err := b.timed(m.subject, runs); err != nil {
			return o, fmt.Errorf("%s: undoing the last run: %w", m.name, err)
		}
	}
	if m.via != nil {
		after, err := m.via.answered()
		if err != nil {
			return o, fmt.Errorf("%s: the daemon's count of calls: %w", m.name, err)
		}
		if want := m.via.perRun * (pairs + 1); after-before != want {
			return o, fmt.Errorf("%s: the daemon answered %d of the %d calls sent through it", m.name, after-before, want)
		}
	}
	b.sampleLoad()
	return o, nil
}

// timed runs a step once and checks its answer: exit 0, nothing on stderr,
// the answer the check wants.
func (b *bench) timed(st step, run int) (sample, error) {
	c := st.cmd(run)
	var ranges float64
	if st.readsStore {
		var err error
		if ranges, err = etcdRanges(b.endpoint); err != nil {
			return sample{}, err
		}
	}
	s, err := b.runner.run(c)
	if err != nil {
		return s, err
	}
	if s.code != 0 {
		return s, fmt.Errorf("%s: exit %d: %s", c, s.code, firstLine(string(s.stderr)))
	}
	if len(s.stderr) > 0 {
		return s, fmt.Errorf("%s: wrote on stderr: %s", c, firstLine(string(s.stderr)))
	}
	if err := st.check(run, s.stdout); err != nil {
		return s, fmt.Errorf("%s: wrong answer: %w", c, err)
	}
	if st.readsStore {
		after, err := etcdRanges(b.endpoint)
		if err != nil {
			return s, err
		}
		if after <= ranges {
			return s, fmt.Errorf("%s: answered without reading the store: etcd served no range request during the call", c)
		}
	}
	s.stdout = nil // checked; do not hold 10,000 nodes' answers
	return s, nil
}

// stat is a median and a range.
type stat struct{ median, low, high float64 }

func statOf(v []float64) stat {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return stat{}
	}
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return stat{median: med, low: s[0], high: s[n-1]}
}

func series(s []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(s))
	for i := range s {
		out[i] = f(s[i])
	}
	return out
}

func ms(s sample) float64  { return float64(s.wall) / float64(time.Millisecond) }
func cpu(s sample) float64 { return float64(s.cpu) / float64(time.Millisecond) }
func mib(s sample) float64 { return float64(s.rssKiB) / 1024 }

// faults are the page faults of a run, minor and major.
func faults(s sample) float64 { return float64(s.minflt + s.majflt) }

// ratios are the pair-by-pair ratios subject/floor of f.
func (o outcome) ratios(f func(sample) float64) []float64 {
	out := make([]float64, len(o.subject))
	for i := range o.subject {
		out[i] = f(o.subject[i]) / f(o.base[i])
	}
	return out
}

// verdict says whether the outcome meets the measure's targets.
func (o outcome) verdict() string {
	var parts []string
	if o.m.target > 0 {
		r := statOf(o.ratios(ms)).median
		mark := "met"
		if r > o.m.target {
			mark = "missed"
		}
		parts = append(parts, fmt.Sprintf("≤ %.1f×: %s", o.m.target, mark))
	}
	if o.m.rssTarget > 0 {
		// A ceiling on memory holds in every run, not in half of them.
		r := statOf(series(o.subject, mib)).high
		mark := "met"
		if r > float64(o.m.rssTarget) {
			mark = "missed"
		}
		parts = append(parts, fmt.Sprintf("RSS ≤ %d MiB: %s", o.m.rssTarget, mark))
	}
	return strings.Join(parts, "; ")
}

const tableHead = `| measure | floor | time, median [range] | floor time | ratio, median [range] | CPU time / floor's (ratio) | peak RSS / floor's | page faults / floor's | target |
|---|---|---|---|---|---|---|---|---|
`

func (o outcome) row(w io.Writer) {
	t, f := statOf(series(o.subject, ms)), statOf(series(o.base, ms))
	r := statOf(o.ratios(ms))
	cs, cf := statOf(series(o.subject, cpu)).median, statOf(series(o.base, cpu)).median
	rs, rf := statOf(series(o.subject, mib)), statOf(series(o.base, mib))
	ps, pf := statOf(series(o.subject, faults)), statOf(series(o.base, faults))
	fmt.Fprintf(w, "| %s | %s | %s [%s–%s] ms | %s [%s–%s] ms | **%.2f×** [%.2f–%.2f] | %s / %s ms (%.2f×) | %.0f / %.0f MiB | %.0f / %.0f | %s |\n",
		o.m.name, o.m.floor.label, num(t.median), num(t.low), num(t.high), num(f.median), num(f.low), num(f.high),
		r.median, r.low, r.high, num(cs), num(cf), cs/cf, rs.median, rf.median, ps.median, pf.median, o.verdict())
}

// num prints a time in ms with three significant figures or so.
func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

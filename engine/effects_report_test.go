package engine

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/speclet/speclet/spec"
)

// The rules of the effects check (effects_test.go), the failure of the
// tests whose engines broke them, and the suite's table.

// checkEffect returns how a run that raised raised to its own machine and
// delivered sent to others breaks effect e (nil: the action has none);
// unmet: e's requires did not hold when the run began; failed: the action
// returned an error.
func checkEffect(e *spec.Effect, unmet, failed bool, raised, sent []string) []string {
	var out []string
	if e == nil || unmet {
		why := "it has no effect in system.hcl"
		if unmet {
			why = "its requires did not hold"
		}
		if len(raised) > 0 {
			out = append(out, fmt.Sprintf("raised %v, but %s", raised, why))
		}
		if len(sent) > 0 {
			out = append(out, fmt.Sprintf("delivered %v, but %s", sent, why))
		}
		return out
	}
	reports := refNames(e.Reports)
	switch {
	case len(reports) == 0 && len(raised) > 0:
		out = append(out, fmt.Sprintf("raised %v, but reports nothing", raised))
	case len(reports) == 0:
	case len(raised) == 0 && !e.MayReportNothing:
		out = append(out, fmt.Sprintf("raised nothing, but reports one of %v (no may_report_nothing)", reports))
	case len(raised) == 0 && len(sent) > 0:
		out = append(out, fmt.Sprintf("raised nothing after it delivered %v: one that reports nothing fails before any effect", sent))
	case len(raised) > 0 && failed && e.MayReportNothing:
		out = append(out, fmt.Sprintf("raised %v, but it failed: an effect that may report nothing reports nothing when its action fails", raised))
	case len(raised) > 1:
		out = append(out, fmt.Sprintf("raised %v, but reports exactly one of %v", raised, reports))
	case len(raised) == 1 && !slices.Contains(reports, e.Machine.Name+"."+raised[0]):
		out = append(out, fmt.Sprintf("raised %s, which is not among its reports %v", raised[0], reports))
	}
	sends := refNames(e.Sends)
	at := 0
	for _, s := range sent {
		i := slices.Index(sends, s)
		switch {
		case i < 0:
			out = append(out, fmt.Sprintf("delivered %s, which is not among its sends %v", s, sends))
		case i < at:
			out = append(out, fmt.Sprintf("delivered %s after %s, against the order of its sends %v", s, sends[at], sends))
		default:
			at = i
		}
	}
	return out
}

func refNames(rs []spec.MRef) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// take returns and forgets the violations of engine e.
func (c *effectChecker) take(e *Engine) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := append(c.violations[&e.host], c.violations[e.node]...)
	delete(c.violations, &e.host)
	delete(c.violations, e.node)
	return v
}

// failEffects fails t on the violations of engine e (at most 20 shown).
func failEffects(t testing.TB, e *Engine) {
	t.Helper()
	v := effects.take(e)
	for i, msg := range v {
		if i == 20 {
			t.Errorf("effects: ... %d violations in all", len(v))
			break
		}
		t.Errorf("effects: %s", msg)
	}
}

// suiteEffects writes the violations no test claimed and, when table is
// set, the runs checked per action and outcome to w; it reports whether
// there were no such violations.
func suiteEffects(w io.Writer, table bool) bool {
	c := effects
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := true
	for _, v := range c.violations {
		for _, msg := range v {
			fmt.Fprintf(w, "effects: %s\n", msg)
			ok = false
		}
	}
	if !table {
		return ok
	}
	fmt.Fprintln(w, "\naction runs checked against system.hcl's effects (effects_test.go): what each raised, what it delivered")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	names := make([]string, 0, len(c.runs))
	for k := range c.runs {
		names = append(names, k)
	}
	sort.Strings(names)
	total := 0
	for _, name := range names {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", name, c.runs[name], counted(c.outcomes, name), counted(c.sent, name))
		total += c.runs[name]
	}
	tw.Flush()
	fmt.Fprintf(w, "%d action runs in all; events observers delivered: %s\n", total, counted(c.observed, ""))
	return ok
}

// counted lists the counts of m whose keys start with prefix+" -> " (all
// when prefix is empty) as "key-rest N, ...".
func counted(m map[string]int, prefix string) string {
	var out []string
	for k, n := range m {
		if prefix == "" {
			out = append(out, fmt.Sprintf("%s %d", k, n))
		} else if rest, ok := strings.CutPrefix(k, prefix+" -> "); ok {
			out = append(out, fmt.Sprintf("%s %d", rest, n))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// TestCheckEffect: each rule of the check on runs of the spec's own effects.
func TestCheckEffect(t *testing.T) {
	eff := func(name string) *spec.Effect {
		e := effects.effects[name]
		if e == nil {
			t.Fatalf("system.hcl declares no effect %s", name)
		}
		return e
	}
	upd, create, start := "container.update", "sandbox.create", "container.start"
	for _, tc := range []struct {
		name          string
		e             *spec.Effect
		unmet, failed bool
		raised, sent  []string
		want          string // in the only violation; "" for none
	}{
		{"sync ok", eff("pod.sync_pod"), false, false, []string{"sync_ok"}, []string{upd, upd, create, start, start}, ""},
		{"sync no report", eff("pod.sync_pod"), false, false, nil, nil, "raised nothing, but reports one of"},
		{"sync two reports", eff("pod.sync_pod"), false, false, []string{"sync_ok", "sync_failed"}, nil, "exactly one of"},
		{"sync undeclared report", eff("pod.sync_pod"), false, false, []string{"termination_done"}, nil, "not among its reports"},
		{"sync out of order", eff("pod.sync_pod"), false, false, []string{"sync_ok"}, []string{create, upd}, "against the order"},
		{"sync undeclared send", eff("pod.sync_pod"), false, false, []string{"sync_ok"}, []string{"container.kill"}, "not among its sends"},
		{"sends only", eff("pod.stop_sandbox"), false, false, nil, []string{"sandbox.stop"}, ""},
		{"sends only reports", eff("pod.stop_sandbox"), false, false, []string{"termination_done"}, nil, "but reports nothing"},
		{"stop fails", eff("container.stop_container"), false, true, nil, nil, ""},
		{"stop fails reports", eff("container.stop_container"), false, true, []string{"stopped"}, nil, "but it failed"},
		{"remove unmet", eff("pod.remove_pod"), true, false, []string{"cleanup_done"}, nil, "its requires did not hold"},
		{"remove half done", eff("pod.remove_pod"), false, true, nil, []string{"container.removed"}, "fails before any effect"},
		{"no effect", nil, false, false, nil, nil, ""},
		{"no effect raises", nil, false, false, []string{"sync_ok"}, nil, "has no effect"},
		{"no effect sends", nil, false, false, nil, []string{start}, "has no effect"},
	} {
		got := checkEffect(tc.e, tc.unmet, tc.failed, tc.raised, tc.sent)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: violations %q, want none", tc.name, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s: violations %q, want one with %q", tc.name, got, tc.want)
		}
	}
}

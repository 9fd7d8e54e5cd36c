package engine

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/criaudit"
	"github.com/speclet/speclet/fsm"
)

// This file holds the two checks every engine test feeds (doc.go, # Tests):
//
//   - CRI audit: each engine test dials its runtime through a
//     criaudit.Recorder's interceptors (auditRuntime). A test fails when its records show a mutating call
//     outside an action or an action calling a method its spec does not
//     allow. When the whole package ran, TestMain also fails when a declared
//     (machine, action, method) was never called by any test.
//   - Row coverage: each engine test logs through coverageLogger, which
//     counts the transition rows and choice branches of the engine's
//     "transition" debug records (attributes machine, row and choices).
//     When the whole package ran, TestMain prints the table and fails when a
//     row or branch was never taken.

// suite collects what every test of the package recorded.
var suite struct {
	mu      sync.Mutex
	records []criaudit.Record
	cov     *coverage
}

func init() { suite.cov = newCoverage() }

// coverage counts how often each transition row and choice branch was taken.
type coverage struct {
	mu      sync.Mutex
	rows    map[string][]int // machine -> count per transition row
	choices map[string][]int // machine -> count per choice branch
}

func newCoverage() *coverage {
	cv := &coverage{rows: map[string][]int{}, choices: map[string][]int{}}
	coverKind(cv, fsm.PodKind)
	coverKind(cv, fsm.ContainerKind)
	coverKind(cv, fsm.SandboxKind)
	coverKind(cv, fsm.ProbeKind)
	coverKind(cv, fsm.NodeKind)
	return cv
}

// coverKind adds the counters of kind k's rows and branches.
func coverKind[S, E, A, G fsm.Enum](cv *coverage, k fsm.Kind[S, E, A, G]) {
	cv.rows[k.Name] = make([]int, len(k.Transitions))
	cv.choices[k.Name] = make([]int, len(k.Choices))
}

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		registerEffects() // effects_test.go
	}
	code := m.Run()
	if wholePackage() {
		if !suiteChecks(os.Stdout) && code == 0 {
			code = 1
		}
	}
	if !suiteEffects(os.Stdout, wholePackage() || testing.Verbose()) && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// wholePackage: no -run filter was given, so every test of the package ran
// (a -skip, like a skipped TestContainerd without root, still counts: the
// suite checks then see what the remaining tests did).
func wholePackage() bool {
	f := flag.Lookup("test.run")
	return f == nil || f.Value.String() == ""
}

// audited is a client whose calls a recorder records.
type audited struct {
	*cri.Client
	*criaudit.Recorder
}

// auditRuntime dials the runtime at endpoint (with opts) through a
// recorder; when t ends, it fails t on the violations of its records, adds
// them to the suite's and closes the client.
func auditRuntime(t testing.TB, endpoint string, opts ...cri.Option) audited {
	rec := criaudit.NewRecorder()
	c, err := cri.Dial(context.Background(), endpoint, append(opts, rec.DialOption())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		recs := rec.Records()
		if v := criaudit.Check(recs); len(v) > 0 {
			t.Errorf("CRI audit: %d violations of the spec's cri lists (engine/criaudit):\n%s", len(v), criaudit.FormatViolations(v))
		}
		suite.mu.Lock()
		suite.records = append(suite.records, recs...)
		suite.mu.Unlock()
	})
	return audited{Client: c, Recorder: rec}
}

// coverageLogger returns a logger that counts the transitions the engine
// logs and passes every record inner handles on to it.
func coverageLogger(inner slog.Handler) *slog.Logger {
	return slog.New(coverageHandler{inner: inner, cov: suite.cov})
}

type coverageHandler struct {
	inner slog.Handler
	cov   *coverage
}

func (h coverageHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || h.inner.Enabled(ctx, l)
}

func (h coverageHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "transition" {
		var machine string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "machine" {
				machine = a.Value.String()
				return false
			}
			return true
		})
		h.cov.count(machine, r)
	}
	if h.inner.Enabled(ctx, r.Level) {
		return h.inner.Handle(ctx, r)
	}
	return nil
}

func (h coverageHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return coverageHandler{inner: h.inner.WithAttrs(as), cov: h.cov}
}

func (h coverageHandler) WithGroup(name string) slog.Handler {
	return coverageHandler{inner: h.inner.WithGroup(name), cov: h.cov}
}

// count counts the row and choices attributes of a transition record.
func (cv *coverage) count(machine string, r slog.Record) {
	row := -1
	var choices []int
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "row":
			if a.Value.Kind() == slog.KindInt64 {
				row = int(a.Value.Int64())
			}
		case "choices":
			if cs, ok := a.Value.Any().([]int); ok {
				choices = cs
			}
		}
		return true
	})
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if rows := cv.rows[machine]; row >= 0 && row < len(rows) {
		rows[row]++
	}
	for _, c := range choices {
		if cs := cv.choices[machine]; c >= 0 && c < len(cs) {
			cs[c]++
		}
	}
}

// coverageRow is one line of the row coverage table.
type coverageRow struct {
	machine, from, event, guard, to string
	choice                          bool
	count                           int
}

func (c coverageRow) String() string {
	if c.choice {
		return fmt.Sprintf("%s %s: [%s] -> %s", c.machine, c.from, c.guard, c.to)
	}
	g := ""
	if c.guard != "" {
		g = " [" + c.guard + "]"
	}
	return fmt.Sprintf("%s %s -%s%s-> %s", c.machine, c.from, c.event, g, c.to)
}

// table returns every transition row and choice branch of every machine,
// in spec order, with the number of times the tests took it.
func (cv *coverage) table() []coverageRow {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	var out []coverageRow
	out = kindCoverage(out, cv, fsm.PodKind)
	out = kindCoverage(out, cv, fsm.SandboxKind)
	out = kindCoverage(out, cv, fsm.ProbeKind)
	out = kindCoverage(out, cv, fsm.NodeKind)
	return kindCoverage(out, cv, fsm.ContainerKind)
}

// kindCoverage appends the rows, then the choice branches, of kind k with
// their counts. The caller holds cv.mu.
func kindCoverage[S, E, A, G fsm.Enum](out []coverageRow, cv *coverage, k fsm.Kind[S, E, A, G]) []coverageRow {
	for i, r := range k.Transitions {
		guard, to := "", r.To.String()
		if r.HasGuard {
			guard = r.Guard.String()
		}
		if r.Internal {
			to = "(internal)"
		}
		out = append(out, coverageRow{k.Name, r.From.String(), r.Event.String(), guard, to, false, cv.rows[k.Name][i]})
	}
	for i, c := range k.Choices {
		guard := "otherwise"
		if c.HasGuard {
			guard = c.Guard.String()
		}
		out = append(out, coverageRow{k.Name, c.State.String(), "", guard, c.To.String(), true, cv.choices[k.Name][i]})
	}
	return out
}

// formatCoverage renders the table: transitions as machine, from, event,
// [guard], to and count; then choice branches as "state: [guard] -> to".
func formatCoverage(rows []coverageRow) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MACHINE\tFROM\tEVENT\t[GUARD]\tTO\tTAKEN")
	for _, r := range rows {
		if r.choice {
			continue
		}
		g := ""
		if r.guard != "" {
			g = "[" + r.guard + "]"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", r.machine, r.from, r.event, g, r.to, r.count)
	}
	w.Flush()
	b.WriteString("\n")
	w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MACHINE\tCHOICE BRANCH\tTAKEN")
	for _, r := range rows {
		if r.choice {
			fmt.Fprintf(w, "%s\t%s: [%s] -> %s\t%d\n", r.machine, r.from, r.guard, r.to, r.count)
		}
	}
	w.Flush()
	return b.String()
}

// suiteChecks prints the row coverage table and the CRI audit over every
// test of the package to w, and reports whether both passed.
func suiteChecks(w io.Writer) bool {
	ok := true
	rows := suite.cov.table()
	fmt.Fprintf(w, "\nRow coverage of the engine tests (spec/*.hcl transitions and choice branches):\n%s", formatCoverage(rows))
	var untaken []string
	for _, r := range rows {
		if r.count == 0 {
			untaken = append(untaken, "  "+r.String())
		}
	}
	if len(untaken) > 0 {
		ok = false
		fmt.Fprintf(w, "FAIL: %d of %d rows and branches were never taken by the engine tests:\n%s\n", len(untaken), len(rows), strings.Join(untaken, "\n"))
	} else {
		fmt.Fprintf(w, "row coverage: all %d rows and branches taken\n", len(rows))
	}

	suite.mu.Lock()
	recs := append([]criaudit.Record(nil), suite.records...)
	suite.mu.Unlock()
	if v := criaudit.Check(recs); len(v) > 0 {
		ok = false
		fmt.Fprintf(w, "\nFAIL: CRI audit: %d violations over %d calls of all engine tests:\n%s", len(v), len(recs), criaudit.FormatViolations(v))
	}
	if u := criaudit.Unseen(recs, criaudit.Declared()); len(u) > 0 {
		ok = false
		fmt.Fprintf(w, "\nFAIL: CRI audit: %d methods declared in the spec's cri lists were never called by their action in any engine test:\n%s", len(u), criaudit.FormatUnseen(u))
	}
	if ok {
		fmt.Fprintf(w, "CRI audit: %d calls, no violation, every declared method seen\n", len(recs))
	}
	return ok
}

// TestCoverageHandler: the handler counts the row and choices of transition
// records and passes on what its inner handler takes.
func TestCoverageHandler(t *testing.T) {
	var out strings.Builder
	cv := newCoverage()
	log := slog.New(coverageHandler{inner: slog.NewTextHandler(&out, nil), cov: cv}).With("pod", "default/web")
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		t.Fatal("debug disabled: the engine would not log its transitions")
	}
	log.Debug("transition", "machine", "pod", "row", 1, "choices", []int{})
	log.Debug("transition", "machine", "container", "row", 21, "choices", []int{2})
	log.Debug("transition", "machine", "container", "row", 21, "choices", []int{2})
	log.Info("something else", "row", 3)
	if cv.rows[fsm.PodMachineName][1] != 1 || cv.rows[fsm.ContainerMachineName][21] != 2 || cv.choices[fsm.ContainerMachineName][2] != 2 {
		t.Errorf("counts: pod rows %v, container rows %v, container choices %v",
			cv.rows[fsm.PodMachineName], cv.rows[fsm.ContainerMachineName], cv.choices[fsm.ContainerMachineName])
	}
	if cv.rows[fsm.PodMachineName][3] != 0 {
		t.Error("a record that is no transition was counted")
	}
	if got := out.String(); strings.Contains(got, "msg=transition") || !strings.Contains(got, "something else") {
		t.Errorf("inner handler (info) got:\n%s", got)
	}
	var taken int
	for _, r := range cv.table() {
		taken += r.count
	}
	if taken != 5 {
		t.Errorf("table counts %d, want 5 (3 rows, 2 branches)", taken)
	}
}

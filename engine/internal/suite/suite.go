// Package suite holds the two checks every engine test feeds, in the test
// packages engine, engine/devicemanager and engine/containerdtest
// (engine/doc.go, # Tests):
//
//   - CRI audit: a test dials its runtime through Runtime, a
//     criaudit.Recorder's interceptors. The test fails when its records
//     show a mutating call outside an action or an action calling a method
//     its spec does not allow.
//   - Row coverage: a test gives the engine Took as its observer of steps
//     (engine.Config.Steps), which counts the transition row and the
//     choice branches of every step a machine took.
//
// Both are about the union of the Parts: the engine scripts (package
// engine), the device plugin manager's tests (engine/devicemanager, the
// only ones that drive the device plugin machine) and the tests on a real
// containerd (engine/containerdtest) take different rows. Each part's TestMain is Main: when its whole package ran,
// it records what its tests took and called in the directory named by
// $SPECLET_ENGINE_SUITE (make unit sets it), and the part that finds every
// part recorded there prints the table of the union and fails when a row
// or branch of spec/*.hcl was never taken, a call broke the spec's cri
// lists, or a declared (machine, action, method) was never called by its
// action. A part that cannot see every part prints its own table and fails
// only on a violation of its own calls.
package suite

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/criaudit"
)

// EnvDir names the environment variable that holds the directory where
// the parts record what they took (make unit makes a new one per run).
const EnvDir = "SPECLET_ENGINE_SUITE"

// Parts are the test packages (module-relative paths) whose union the
// checks are about.
var Parts = []string{"engine", "engine/devicemanager", "engine/containerdtest"}

// current is what the tests of this process recorded.
var current = struct {
	mu      sync.Mutex
	records []criaudit.Record
	cov     *coverage
}{cov: newCoverage()}

// Audited is a runtime client whose calls a recorder records.
type Audited struct {
	*cri.Client
	*criaudit.Recorder
}

// Runtime dials the runtime at endpoint (with opts) through a recorder;
// when t ends, it closes the client, fails t on the violations of its
// records and adds them to the records of the part.
func Runtime(t testing.TB, endpoint string, opts ...cri.Option) Audited {
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
		current.mu.Lock()
		current.records = append(current.records, recs...)
		current.mu.Unlock()
	})
	return Audited{Client: c, Recorder: rec}
}

// Main is the TestMain of part (one of Parts): it runs the tests and, when
// the whole package ran, the checks (Check with $SPECLET_ENGINE_SUITE),
// and exits with their verdict.
func Main(m *testing.M, part string) { os.Exit(Run(m, part)) }

// Run is Main without the exit: it returns the exit code, for a TestMain
// that checks more after the suite's checks.
func Run(m *testing.M, part string) int {
	if !slices.Contains(Parts, part) {
		panic(fmt.Sprintf("suite.Run: %q is none of the parts %v", part, Parts))
	}
	code := m.Run()
	if WholePackage() && !Check(os.Stdout, Taken(part), os.Getenv(EnvDir)) && code == 0 {
		code = 1
	}
	return code
}

// WholePackage: no -run filter was given, so every test of the package ran
// (a -skip, like a skipped containerd test without root, still counts: the
// checks then see what the remaining tests did). Call it after flag.Parse.
func WholePackage() bool {
	f := flag.Lookup("test.run")
	return f == nil || f.Value.String() == ""
}

// Taken returns what the tests of this process took and called so far,
// as part.
func Taken(part string) Part {
	current.mu.Lock()
	recs := append([]criaudit.Record(nil), current.records...)
	current.mu.Unlock()
	return Part{Name: part, Recorded: time.Now().UTC(), Taken: current.cov.taken(), Calls: countCalls(recs)}
}

// Check prints to w the row coverage table and the CRI audit and reports
// whether they passed. With dir (may be empty) it first records self
// there, then reads the other parts: when every one of Parts is there, the
// table and the checks are those of the union, and a row or branch never
// taken, a violation or a declared method never called fails; otherwise
// the table is self's, and only a violation of self's calls fails.
func Check(w io.Writer, self Part, dir string) bool {
	// Writing before reading: of parts that finish together, the last to
	// read sees every record.
	if dir != "" {
		if err := writePart(dir, self); err != nil {
			fmt.Fprintf(w, "FAIL: %v\n", err)
			return false
		}
	}
	parts := []Part{self}
	var missing []string
	for _, name := range Parts {
		if name == self.Name {
			continue
		}
		if dir == "" {
			missing = append(missing, name)
			continue
		}
		p, ok, err := readPart(dir, name)
		switch {
		case err != nil:
			fmt.Fprintf(w, "FAIL: %v\n", err)
			return false
		case !ok:
			missing = append(missing, name)
		default:
			parts = append(parts, p)
		}
	}
	slices.SortFunc(parts, func(a, b Part) int { return slices.Index(Parts, a.Name) - slices.Index(Parts, b.Name) })
	rows := specRows()
	if len(missing) > 0 {
		fmt.Fprintf(w, "\nRow coverage of the tests of %s (spec/*.hcl transitions and choice branches):\n%s", self.Name, formatTable(rows, parts))
		n := 0
		for _, r := range rows {
			if self.Taken[r.String()] > 0 {
				n++
			}
		}
		why := fmt.Sprintf("the tests of %v have not recorded theirs in $%s", missing, EnvDir)
		if dir == "" {
			why = fmt.Sprintf("$%s is not set", EnvDir)
		}
		fmt.Fprintf(w, "row coverage: %d of %d rows and branches taken by %s; whether every engine test together takes them all is not checked: %s (make unit runs every part)\n",
			n, len(rows), self.Name, why)
		return auditOK(w, self.Name, self.records(), false)
	}
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.Name
		if p.Name != self.Name {
			names[i] += fmt.Sprintf(" (recorded %s)", p.Recorded.Format(time.RFC3339))
		}
	}
	fmt.Fprintf(w, "\nRow coverage of the engine tests, %v (spec/*.hcl transitions and choice branches):\n%s", names, formatTable(rows, parts))
	ok := true
	var untaken []string
	for _, r := range rows {
		if sum(parts, r.String()) == 0 {
			untaken = append(untaken, "  "+r.String())
		}
	}
	if len(untaken) > 0 {
		ok = false
		fmt.Fprintf(w, "FAIL: %d of %d rows and branches were never taken by the engine tests:\n", len(untaken), len(rows))
		for _, u := range untaken {
			fmt.Fprintln(w, u)
		}
	} else {
		fmt.Fprintf(w, "row coverage: all %d rows and branches taken\n", len(rows))
	}
	var recs []criaudit.Record
	for _, p := range parts {
		recs = append(recs, p.records()...)
	}
	return auditOK(w, "all engine tests", recs, true) && ok
}

// auditOK prints the CRI audit of recs, the calls of what; with whole
// (the records of every part) a declared method that no action called
// fails too.
func auditOK(w io.Writer, what string, recs []criaudit.Record, whole bool) bool {
	ok := true
	if v := criaudit.Check(recs); len(v) > 0 {
		ok = false
		fmt.Fprintf(w, "\nFAIL: CRI audit: %d violations over %d calls of %s:\n%s", len(v), len(recs), what, criaudit.FormatViolations(v))
	}
	if !whole {
		if ok {
			fmt.Fprintf(w, "CRI audit: %d calls of %s, no violation\n", len(recs), what)
		}
		return ok
	}
	if u := criaudit.Unseen(recs, criaudit.Declared()); len(u) > 0 {
		ok = false
		fmt.Fprintf(w, "\nFAIL: CRI audit: %d methods declared in the spec's cri lists were never called by their action in any engine test:\n%s", len(u), criaudit.FormatUnseen(u))
	}
	if ok {
		fmt.Fprintf(w, "CRI audit: %d calls of %s, no violation, every declared method seen\n", len(recs), what)
	}
	return ok
}

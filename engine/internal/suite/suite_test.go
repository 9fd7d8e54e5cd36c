package suite

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/speclet/speclet/engine/criaudit"
	"github.com/speclet/speclet/fsm"
)

// TestCount: count counts each step's row and branches in its machine's
// tables, and nothing outside them.
func TestCount(t *testing.T) {
	cv := newCoverage()
	cv.count(fsm.PodMachineName, 1, nil)
	cv.count(fsm.ContainerMachineName, 21, []int{2})
	cv.count(fsm.ContainerMachineName, 21, []int{2})
	cv.count(fsm.ContainerMachineName, len(fsm.ContainerKind.Transitions), []int{len(fsm.ContainerKind.Choices), -1})
	cv.count("no such machine", 0, []int{0})
	if cv.rows[fsm.PodMachineName][1] != 1 || cv.rows[fsm.ContainerMachineName][21] != 2 || cv.choices[fsm.ContainerMachineName][2] != 2 {
		t.Errorf("counts: pod rows %v, container rows %v, container choices %v",
			cv.rows[fsm.PodMachineName], cv.rows[fsm.ContainerMachineName], cv.choices[fsm.ContainerMachineName])
	}
	var taken int
	for _, n := range cv.taken() {
		taken += n
	}
	if taken != 5 {
		t.Errorf("taken counts %d, want 5 (3 rows, 2 branches)", taken)
	}
}

// TestRowKeys: every row and branch has a key of its own, so that a
// part's Taken counts each one apart.
func TestRowKeys(t *testing.T) {
	seen := map[string]bool{}
	rows := specRows()
	for _, r := range rows {
		if seen[r.String()] {
			t.Errorf("two rows render as %q", r.String())
		}
		seen[r.String()] = true
	}
	if len(rows) == 0 {
		t.Fatal("no rows")
	}
}

// parts returns a record of each of Parts that together take every row
// and branch but the first and call every declared method once: engine
// takes the even rows and the first half of the calls, the other part the
// rest; the parts after those two (rest) take and call nothing.
func parts() (engine, other Part, rest []Part) {
	for _, name := range Parts[2:] {
		rest = append(rest, Part{Name: name, Taken: map[string]int{}})
	}
	engine = Part{Name: Parts[0], Taken: map[string]int{}}
	other = Part{Name: Parts[1], Taken: map[string]int{}}
	for i, r := range specRows() {
		if i%2 == 0 {
			engine.Taken[r.String()] = 1
		} else {
			other.Taken[r.String()] = 2
		}
	}
	decl := criaudit.Declared()
	for i, d := range decl {
		p := &engine
		if i >= len(decl)/2 {
			p = &other
		}
		p.Calls = append(p.Calls, Calls{Machine: d.Machine, Action: d.Action, Method: d.Method, N: 1})
	}
	return engine, other, rest
}

// TestCheckUnion: the checks pass on the union of the parts recorded in
// the directory, fail on a row or branch neither took, on a violation and
// on a declared method neither called; a part alone passes without a
// verdict on the rows.
func TestCheckUnion(t *testing.T) {
	first := specRows()[0].String()
	for _, tc := range []struct {
		name   string
		change func(engine, other *Part)
		alone  bool // the other part has not recorded
		pass   bool
		want   string
	}{
		{name: "union", pass: true, want: "row coverage: all "},
		{name: "alone", alone: true, pass: true, want: fmt.Sprintf("not checked: the tests of %v have not recorded", Parts[1:])},
		{name: "row untaken", change: func(e, o *Part) { delete(e.Taken, first) }, want: "FAIL: 1 of "},
		{name: "violation in the other part", change: func(e, o *Part) {
			o.Calls = append(o.Calls, Calls{Method: "StartContainer", N: 3})
		}, want: "FAIL: CRI audit: 1 violations"},
		{name: "declared method never called", change: func(e, o *Part) { o.Calls = o.Calls[1:] }, want: "were never called by their action"},
		{name: "violation alone", alone: true, change: func(e, o *Part) {
			e.Calls = append(e.Calls, Calls{Method: "RemoveImage", N: 1})
		}, want: "FAIL: CRI audit: 1 violations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			engine, other, rest := parts()
			if tc.change != nil {
				tc.change(&engine, &other)
			}
			if !tc.alone {
				for _, p := range append([]Part{other}, rest...) {
					if err := writePart(dir, p); err != nil {
						t.Fatal(err)
					}
				}
			}
			var out strings.Builder
			if got := Check(&out, engine, dir); got != tc.pass || !strings.Contains(out.String(), tc.want) {
				t.Errorf("Check = %v, want %v and output with %q:\n%s", got, tc.pass, tc.want, out.String())
			}
			if _, ok, err := readPart(dir, engine.Name); !ok || err != nil {
				t.Errorf("engine's record in the directory: %v, %v", ok, err)
			}
		})
	}
}

// TestCheckWithoutDir: without a directory a part is checked alone.
func TestCheckWithoutDir(t *testing.T) {
	engine, _, _ := parts()
	var out strings.Builder
	if !Check(&out, engine, "") || !strings.Contains(out.String(), "not checked: $SPECLET_ENGINE_SUITE is not set") {
		t.Errorf("Check without a directory:\n%s", out.String())
	}
}

// TestReadPart: a record that names another part, or is no record, is an
// error that names the file.
func TestReadPart(t *testing.T) {
	dir := t.TempDir()
	other := Part{Name: Parts[0]}
	if err := writePart(dir, other); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(partFile(dir, Parts[0]), partFile(dir, Parts[1])); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readPart(dir, Parts[1]); err == nil || !strings.Contains(err.Error(), partFile(dir, Parts[1])) {
		t.Errorf("a record of %s read as %s: %v", Parts[0], Parts[1], err)
	}
	if err := os.WriteFile(partFile(dir, Parts[0]), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readPart(dir, Parts[0]); err == nil || !strings.Contains(err.Error(), partFile(dir, Parts[0])) {
		t.Errorf("a broken record: %v", err)
	}
	if _, ok, err := readPart(t.TempDir(), Parts[0]); ok || err != nil {
		t.Errorf("no record: %v, %v", ok, err)
	}
}

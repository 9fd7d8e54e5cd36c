package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// packageTable is where docs/architecture.md lists every package of ours
// with what it may import.
const packageTable = "| package | owns | may import |"

// tableRow is one row of the package table: the packages it is about and
// the packages of ours they may import (all of them with everything).
type tableRow struct {
	line       int
	pkgs       []string
	mayImport  map[string]bool
	everything bool
}

// readPackageTable parses the package table of docs/architecture.md. In
// the first column every backquoted name is a package (module-relative);
// the third column is a comma-separated list whose entries that name a
// package of ours (ours reports which do), each perhaps followed by why in
// parentheses, are what the row's packages may import of ours. "everything" allows every package, "nothing of ours"
// none; any other entry (k8s types, client-go, ...) names a dependency
// outside the module and is not checked here. An entry that looks like
// ours but names no package of ours is an error, so that a typo cannot
// allow nothing silently.
func readPackageTable(doc string, ours func(string) bool) ([]tableRow, error) {
	lines := strings.Split(doc, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == packageTable {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no line %q", packageTable)
	}
	var rows []tableRow
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cols := strings.Split(strings.Trim(strings.TrimSpace(lines[i]), "|"), "|")
		if len(cols) != 3 {
			return nil, fmt.Errorf("line %d: %d columns, want 3 (package, owns, may import)", i+1, len(cols))
		}
		r := tableRow{line: i + 1, mayImport: map[string]bool{}}
		r.pkgs = backquoted(cols[0])
		if len(r.pkgs) == 0 {
			return nil, fmt.Errorf("line %d: no `package` in the first column", i+1)
		}
		for _, e := range strings.Split(cols[2], ",") {
			e = strings.TrimSpace(strings.ReplaceAll(e, "`", ""))
			if name, _, ok := strings.Cut(e, " ("); ok {
				e = name // "engine/cgroups (what for)"
			}
			switch {
			case e == "everything":
				r.everything = true
			case e == "nothing of ours" || e == "":
			case ours(e):
				r.mayImport[e] = true
			case looksOurs(e):
				return nil, fmt.Errorf("line %d: %q in the may-import column is no package of ours", i+1, e)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// backquoted returns the backquoted names of s.
func backquoted(s string) []string {
	var out []string
	parts := strings.Split(s, "`")
	for i := 1; i < len(parts); i += 2 {
		out = append(out, parts[i])
	}
	return out
}

// looksOurs reports whether e reads like a module-relative package path of
// ours (a top-level directory of the module, alone or with a sub-path).
func looksOurs(e string) bool {
	top, _, _ := strings.Cut(e, "/")
	switch top {
	case "cmd", "spec", "gen", "verify", "fsm", "engine", "cri":
		return !strings.ContainsAny(e, " ")
	}
	return false
}

// listedPkg is what TestPackageTable reads of a package `go list -json`
// lists.
type listedPkg struct {
	ImportPath                                  string
	GoFiles, Imports, TestImports, XTestImports []string
}

// imports are the packages p imports; those of its tests when it has
// nothing but tests (engine/containerdtest), so that its row binds them.
func (p listedPkg) imports() []string {
	if len(p.GoFiles) == 0 {
		return append(append([]string(nil), p.TestImports...), p.XTestImports...)
	}
	return p.Imports
}

// TestPackageTable: every package of ours outside test/ has a row in
// docs/architecture.md's package table, and imports no package of ours
// that its row does not name. The table is the dependency rule; this test
// is what keeps it true (tailscale's deptest does the same with lists in
// Go).
func TestPackageTable(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{} // module-relative package -> its imports of ours
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if layer(p.ImportPath) == "test" {
			continue
		}
		var own []string
		for _, imp := range p.imports() {
			if strings.HasPrefix(imp, module+"/") && imp != p.ImportPath {
				own = append(own, strings.TrimPrefix(imp, module+"/"))
			}
		}
		imports[rel] = own
	}
	if len(imports) == 0 {
		t.Fatal("go list found no packages")
	}
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := readPackageTable(string(doc), func(p string) bool { _, ok := imports[p]; return ok })
	if err != nil {
		t.Fatalf("docs/architecture.md package table: %v", err)
	}
	rowOf := map[string]tableRow{}
	for _, r := range rows {
		for _, p := range r.pkgs {
			if _, ok := imports[p]; !ok {
				t.Errorf("docs/architecture.md:%d: `%s` is no package of the module", r.line, p)
			}
			if prev, dup := rowOf[p]; dup {
				t.Errorf("docs/architecture.md:%d: `%s` already has the row of line %d", r.line, p, prev.line)
			}
			rowOf[p] = r
		}
	}
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		r, ok := rowOf[p]
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md's package table: add what it owns and may import", p)
			continue
		}
		if r.everything {
			continue
		}
		for _, imp := range imports[p] {
			if !r.mayImport[imp] {
				t.Errorf("%s imports %s, which its row (docs/architecture.md:%d) does not allow", p, imp, r.line)
			}
		}
	}
}

func TestReadPackageTable(t *testing.T) {
	ours := func(p string) bool { return p == "cri" || p == "cri/sim" || p == "engine" || p == "fsm" }
	doc := "x\n" + packageTable + "\n| --- | --- | --- |\n" +
		"| `engine` | the engine | fsm, cri, client-go |\n" +
		"| `cri`, `cri/sim` | the boundary | nothing of ours |\n" +
		"| `cmd/speclet` | wiring | everything |\n\nafter\n"
	rows, err := readPackageTable(doc, ours)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	if got := rows[0]; strings.Join(got.pkgs, ",") != "engine" || !got.mayImport["fsm"] || !got.mayImport["cri"] || len(got.mayImport) != 2 {
		t.Errorf("row 1: %+v", got)
	}
	if got := rows[1]; strings.Join(got.pkgs, ",") != "cri,cri/sim" || len(got.mayImport) != 0 || got.everything {
		t.Errorf("row 2: %+v", got)
	}
	if !rows[2].everything {
		t.Errorf("row 3: %+v", rows[2])
	}
	for _, bad := range []string{
		"| `engine` | x | fsm, engine/nosuch |\n",         // a typo of ours
		"| engine | x | fsm |\n",                          // no package named
		"| `engine` | x |\n",                              // a column missing
		"| `engine` | x | fsm (y), engine/nosuch (z) |\n", // a typo with a reason
	} {
		if _, err := readPackageTable(packageTable+"\n| --- | --- | --- |\n"+bad, ours); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

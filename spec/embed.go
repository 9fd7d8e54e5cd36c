package spec

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/hashicorp/hcl/v2"
)

//go:embed *.hcl
var embedded embed.FS

// Embedded returns the repository's spec files, built into the binary, named
// spec/<base>.hcl in name order.
func Embedded() []File {
	names, err := fs.Glob(embedded, "*.hcl")
	if err != nil {
		panic("spec: embedded files: " + err.Error()) // the pattern is constant
	}
	sort.Strings(names)
	files := make([]File, 0, len(names))
	for _, n := range names {
		b, err := embedded.ReadFile(n)
		if err != nil {
			panic("spec: embedded files: " + err.Error())
		}
		files = append(files, File{Name: "spec/" + n, Src: b})
	}
	return files
}

// WriteDiagnostics prints each diagnostic as a Line, then with its source
// snippet, wrapped at 100 columns.
func (s *Spec) WriteDiagnostics(w io.Writer, diags hcl.Diagnostics) error {
	tw := hcl.NewDiagnosticTextWriter(w, s.Sources, 100, false)
	for _, d := range diags {
		if _, err := fmt.Fprintln(w, Line(d)); err != nil {
			return err
		}
		if err := tw.WriteDiagnostic(d); err != nil {
			return err
		}
	}
	return nil
}

// Line renders d on one line: "file:line:col: error: summary: detail".
func Line(d *hcl.Diagnostic) string {
	sev := "error"
	if d.Severity == hcl.DiagWarning {
		sev = "warning"
	}
	pos := "spec"
	if d.Subject != nil {
		pos = fmt.Sprintf("%s:%d:%d", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	}
	msg := d.Summary
	if d.Detail != "" {
		msg += ": " + d.Detail
	}
	return fmt.Sprintf("%s: %s: %s", pos, sev, msg)
}

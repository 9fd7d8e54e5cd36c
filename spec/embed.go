package spec

import (
	"embed"
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

// WriteDiagnostics prints diags with source snippets, wrapped at 100 columns.
func (s *Spec) WriteDiagnostics(w io.Writer, diags hcl.Diagnostics) error {
	return hcl.NewDiagnosticTextWriter(w, s.Sources, 100, false).WriteDiagnostics(diags)
}

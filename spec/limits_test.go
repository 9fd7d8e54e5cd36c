package spec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// nested returns a machine whose body holds n nested copies of open ...
// close around inner (n levels past the machine's own body).
func nested(n int, open, inner, close string) []byte {
	return []byte("machine \"m\" {\n  initial = " + strings.Repeat(open, n) + inner + strings.Repeat(close, n) + "\n}\n")
}

// TestParseBoundsNesting: a file nesting deeper than MaxNestingDepth, by any
// construct the HCL parser recurses on, is refused with one error
// positioned where the limit is passed, and the parser is not called.
func TestParseBoundsNesting(t *testing.T) {
	deep := MaxNestingDepth + 50
	blocks := "machine \"m\" {\n" + strings.Repeat("a {\n", deep) + strings.Repeat("}\n", deep) + "}\n"
	for _, tc := range []struct {
		name string
		src  []byte
		line int // where the limit is passed
	}{
		{"blocks", []byte(blocks), MaxNestingDepth + 1},
		{"tuples", nested(deep, "[", "1", "]"), 2},
		{"parentheses", nested(deep, "(", "1", ")"), 2},
		{"objects", nested(deep, "{a = ", "1", "}"), 2},
		{"templates", nested(deep, "\"${", "1", "}\""), 2},
		{"negations", nested(deep, "!", "true", ""), 2},
		{"conditionals", nested(deep, "true ? 1 : ", "1", ""), 2},
		{"binary operators", nested(deep, "1 + ", "1", ""), 2},
		{"template directives", []byte("machine \"m\" {\n  doc = <<EOT\n" + strings.Repeat("%{ if true }\n", deep) + strings.Repeat("%{ endif }\n", deep) + "EOT\n}\n"), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := Parse([]File{{Name: "deep.hcl", Src: tc.src}})
			if len(diags) != 1 || diags[0].Summary != "Spec file nested too deeply" {
				t.Fatalf("got %d diagnostic(s), want one \"Spec file nested too deeply\":\n%s", len(diags), diags.Error())
			}
			d := diags[0]
			if d.Severity != hcl.DiagError || d.Subject == nil || d.Subject.Filename != "deep.hcl" || d.Subject.Start.Line < tc.line {
				t.Fatalf("diagnostic %s: want an error at deep.hcl line %d or later", Line(d), tc.line)
			}
			if !strings.Contains(d.Detail, "100 levels") || !strings.Contains(d.Detail, "spec.MaxNestingDepth") {
				t.Errorf("detail %q does not name the limit", d.Detail)
			}
		})
	}
}

// TestParseAcceptsNestingAtTheLimit: the bound counts levels as documented:
// exactly MaxNestingDepth levels parse (the tuple's error, if any, is the
// schema's, not the bound's).
func TestParseAcceptsNestingAtTheLimit(t *testing.T) {
	// The machine's body is one level, so MaxNestingDepth-1 brackets.
	_, diags := Parse([]File{{Name: "ok.hcl", Src: nested(MaxNestingDepth-1, "[", "1", "]")}})
	for _, d := range diags {
		if strings.Contains(d.Summary, "too") {
			t.Fatalf("nesting at the limit refused: %s", Line(d))
		}
	}
	_, diags = Parse([]File{{Name: "over.hcl", Src: nested(MaxNestingDepth, "[", "1", "]")}})
	if len(diags) != 1 || diags[0].Summary != "Spec file nested too deeply" {
		t.Fatalf("one level past the limit: %s", diags.Error())
	}
	if got, want := diags[0].Subject.Start, (hcl.Pos{Line: 2, Column: 13 + MaxNestingDepth - 1, Byte: diags[0].Subject.Start.Byte}); got != want {
		t.Errorf("position %+v, want line 2 column %d (the bracket that passes the limit)", got, want.Column)
	}
}

// TestParseBoundsSize: a file larger than MaxFileSize is refused at the
// position of its first byte past the limit, and ReadFiles reads no more of
// it than that.
func TestParseBoundsSize(t *testing.T) {
	src := []byte("# header\n# " + strings.Repeat("x", MaxFileSize) + "\n")
	p := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(p, src, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := ReadFiles(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(files[0].Src); n != MaxFileSize+1 {
		t.Errorf("ReadFiles read %d bytes of a %d-byte file, want %d", n, len(src), MaxFileSize+1)
	}
	_, diags := Parse(files)
	if len(diags) != 1 || diags[0].Summary != "Spec file too large" {
		t.Fatalf("got %s, want one \"Spec file too large\"", diags.Error())
	}
	if got := diags[0].Subject.Start; got.Line != 2 || got.Column != MaxFileSize-9+1 {
		t.Errorf("position %d:%d, want 2:%d (the first byte past the limit)", got.Line, got.Column, MaxFileSize-9+1)
	}
	if !strings.Contains(diags[0].Detail, "1048576 bytes") {
		t.Errorf("detail %q does not name the limit", diags[0].Detail)
	}
}

// TestParseDeepFileDoesNotCrash parses a 60,000-level file (tuples), which overflowed
// the parser's stack (a fatal error that kills the process, so the parse
// runs in a child: this test binary, re-run with SPEC_DEEP_CHILD set).
func TestParseDeepFileDoesNotCrash(t *testing.T) {
	if os.Getenv("SPEC_DEEP_CHILD") != "" {
		_, diags := Parse([]File{{Name: "deep.hcl", Src: nested(60000, "[", "1", "]")}})
		for _, d := range diags {
			os.Stdout.WriteString(Line(d) + "\n")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestParseDeepFileDoesNotCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SPEC_DEEP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := string(out)
		if len(tail) > 600 {
			tail = tail[:600]
		}
		t.Fatalf("parsing a 60,000-deep file: %v\n%s", err, tail)
	}
	if !strings.Contains(string(out), "deep.hcl:2:112: error: Spec file nested too deeply") {
		t.Fatalf("want the nesting diagnostic at deep.hcl:2:112, got:\n%s", out)
	}
}

package spec

import (
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Bounds on one spec file, checked by Parse before the file reaches the HCL
// parser. The parser recurses once per nesting level (block, bracket,
// parenthesis, template, unary or conditional operator) and a file some
// tens of thousands of levels deep kills the process with a Go stack
// overflow, a fatal error that no recover catches. Every path that decodes
// spec files (spec check, verify and graph --spec, go generate's specgen,
// the daemon's built-in spec) goes through Parse and so through these
// bounds.
const (
	// MaxFileSize is the largest spec file Parse accepts, in bytes; ReadFiles
	// reads no more than one byte past it. The built-in spec's largest file
	// is about 16 KB.
	MaxFileSize = 1 << 20
	// MaxNestingDepth is the deepest nesting Parse accepts. A level is an
	// open block body, object, tuple, parenthesis, quoted string, heredoc,
	// template interpolation or directive (%{if}/%{for} until its end), plus
	// one per operator in the expression being read, since the parser
	// recurses for unary and conditional operators and the decoder for
	// chains of binary ones. The built-in spec nests about 6 levels.
	MaxNestingDepth = 100
)

// checkBounds returns an error diagnostic, positioned where the bound is
// passed, when src is larger than MaxFileSize or nests deeper than
// MaxNestingDepth. It lexes the file (the HCL scanner keeps its own stack,
// it does not recurse) and counts levels; it never calls the parser.
func checkBounds(name string, src []byte) *hcl.Diagnostic {
	if len(src) > MaxFileSize {
		at := posAt(src, MaxFileSize)
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Spec file too large",
			Detail:   fmt.Sprintf("the file holds more than %d bytes, the limit of a spec file (spec.MaxFileSize); split it into several files", MaxFileSize),
			Subject:  &hcl.Range{Filename: name, Start: at, End: at},
		}
	}
	toks, _ := hclsyntax.LexConfig(src, name, hcl.InitialPos)
	type frame struct {
		// body: a newline ends the expression being read (a block body,
		// an object, the top level); in brackets, parentheses and
		// templates newlines are not separators.
		body bool
		// ops counts the operators of the expression being read; ctl the
		// template directives open in this frame.
		ops, ctl int
	}
	stack := []frame{{body: true}}
	depth := 0 // open frames past the top, plus every frame's ops and ctl
	open := func(body bool) { stack = append(stack, frame{body: body}); depth++ }
	closeFrame := func() {
		if len(stack) > 1 {
			f := stack[len(stack)-1]
			depth -= 1 + f.ops + f.ctl
			stack = stack[:len(stack)-1]
		}
	}
	endExpr := func() {
		f := &stack[len(stack)-1]
		depth -= f.ops
		f.ops = 0
	}
	for i, t := range toks {
		top := &stack[len(stack)-1]
		switch t.Type {
		case hclsyntax.TokenOBrace:
			open(true)
		case hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			open(false)
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			closeFrame()
		case hclsyntax.TokenComma:
			endExpr()
		case hclsyntax.TokenNewline:
			if top.body {
				endExpr()
			}
		case hclsyntax.TokenBang, hclsyntax.TokenMinus, hclsyntax.TokenQuestion, hclsyntax.TokenPlus,
			hclsyntax.TokenStar, hclsyntax.TokenSlash, hclsyntax.TokenPercent, hclsyntax.TokenEqualOp,
			hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq,
			hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd, hclsyntax.TokenOr:
			top.ops++
			depth++
		case hclsyntax.TokenIdent:
			// A directive's keyword: the token after %{ (the frame the
			// directive opened); its nesting counts in the enclosing frame,
			// where the template's parts are.
			if i == 0 || toks[i-1].Type != hclsyntax.TokenTemplateControl || len(stack) < 2 {
				break
			}
			outer := &stack[len(stack)-2]
			switch string(t.Bytes) {
			case "if", "for":
				outer.ctl++
				depth++
			case "endif", "endfor":
				if outer.ctl > 0 {
					outer.ctl--
					depth--
				}
			}
		}
		if depth > MaxNestingDepth {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Spec file nested too deeply",
				Detail: fmt.Sprintf("nesting passes %d levels here, the limit of a spec file (spec.MaxNestingDepth; blocks, brackets, parentheses, strings, templates and operators count); spec files nest a few levels: flatten it",
					MaxNestingDepth),
				Subject: t.Range.Ptr(),
			}
		}
	}
	return nil
}

// posAt returns the line and column of byte offset off of src.
func posAt(src []byte, off int) hcl.Pos {
	p := hcl.Pos{Line: 1, Column: 1, Byte: off}
	for _, b := range src[:off] {
		if b == '\n' {
			p.Line++
			p.Column = 1
		} else if b&0xC0 != 0x80 { // count characters, not UTF-8 continuation bytes
			p.Column++
		}
	}
	return p
}

// readBounded reads the file name, at most MaxFileSize+1 bytes of it: a
// larger file is refused by Parse with a positioned diagnostic without being
// read whole.
func readBounded(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileSize+1))
}

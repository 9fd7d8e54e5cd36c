package spec

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
)

// File is one spec source: its name (used in diagnostics and in the headers of
// generated files) and its bytes.
type File struct {
	Name string
	Src  []byte
}

// Parse decodes and validates files as one spec. The Spec is never nil: on
// errors it holds what could be decoded and Sources for printing diagnostics.
// Files are processed in the order given; machine and input order is spec
// order, which the generated tables keep.
func Parse(files []File) (*Spec, hcl.Diagnostics) {
	s, diags := decode(files)
	if diags.HasErrors() {
		return s, diags
	}
	return s, append(diags, validate(s)...)
}

// ParseDir parses every *.hcl file of dir, in name order.
func ParseDir(dir string) (*Spec, hcl.Diagnostics) {
	files, err := ReadDir(dir)
	if err != nil {
		return &Spec{}, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read spec directory", Detail: err.Error()}}
	}
	return Parse(files)
}

// ReadDir reads every *.hcl file of dir, in name order, naming each
// dir/base.
func ReadDir(dir string) ([]File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil {
		return nil, fmt.Errorf("list spec files in %s: %w", dir, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("list spec files in %s: no *.hcl file", dir)
	}
	sort.Strings(names)
	return ReadFiles(names...)
}

// ReadFiles reads the named files, each up to one byte past MaxFileSize (a
// larger file is refused by Parse, positioned at the limit).
func ReadFiles(names ...string) ([]File, error) {
	var files []File
	for _, n := range names {
		b, err := readBounded(n)
		if err != nil {
			return nil, fmt.Errorf("read spec file: %w", err)
		}
		files = append(files, File{Name: n, Src: b})
	}
	return files, nil
}

var fileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "machine", LabelNames: []string{"name"}},
	{Type: "input", LabelNames: []string{"name"}},
	// The system blocks (see System), written in system.hcl.
	{Type: "replicated", LabelNames: []string{"machine"}},
	{Type: "tie", LabelNames: []string{"machine", "guard"}},
	{Type: "effect", LabelNames: []string{"machine", "action"}},
	{Type: "external", LabelNames: []string{"machine", "event"}},
	{Type: "invariant", LabelNames: []string{"name"}},
}}

var machineSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "initial", Required: true}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "event", LabelNames: []string{"name"}},
		{Type: "guard", LabelNames: []string{"name"}},
		{Type: "action", LabelNames: []string{"name"}},
		{Type: "duration", LabelNames: []string{"name"}},
		{Type: "state", LabelNames: []string{"name"}},
	},
}

var docSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}}}

var actionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "cri"}, {Name: "calls"}}}

var durationSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "default"}, {Name: "max"}}}

var stateSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "final"}, {Name: "entry"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "transition", LabelNames: []string{"event"}},
		{Type: "timeout", LabelNames: []string{"event"}},
		{Type: "choice"},
	},
}

var transitionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "doc"}, {Name: "guard"}, {Name: "to"}, {Name: "actions"},
}}

var timeoutSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "after", Required: true}}}

var choiceSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "when", LabelNames: []string{"guard"}},
	{Type: "otherwise"},
}}

var branchSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "doc"}, {Name: "to", Required: true}, {Name: "actions"},
}}

func decode(files []File) (*Spec, hcl.Diagnostics) {
	p := hclparse.NewParser()
	s := &Spec{Files: map[string][]byte{}}
	var diags hcl.Diagnostics
	for _, f := range files {
		s.Files[f.Name] = f.Src
		if d := checkBounds(f.Name, f.Src); d != nil {
			diags = append(diags, d)
			continue
		}
		hf, d := p.ParseHCL(f.Src, f.Name)
		diags = append(diags, d...)
		if hf == nil || d.HasErrors() {
			continue
		}
		content, d := hf.Body.Content(fileSchema)
		diags = append(diags, d...)
		for _, b := range content.Blocks {
			switch b.Type {
			case "machine":
				m, d := decodeMachine(b)
				diags = append(diags, d...)
				m.File = f.Name
				s.Machines = append(s.Machines, m)
			case "input":
				in, d := decodeInput(b)
				diags = append(diags, d...)
				s.Inputs = append(s.Inputs, in)
			default:
				diags = append(diags, s.decodeSystemBlock(b)...)
			}
		}
	}
	s.Sources = p.Files()
	return s, diags
}

func declOf(b *hcl.Block) Decl {
	return Decl{Name: b.Labels[0], Range: b.DefRange, NameRange: b.LabelRanges[0]}
}

func decodeMachine(b *hcl.Block) (*Machine, hcl.Diagnostics) {
	m := &Machine{Decl: declOf(b)}
	content, diags := b.Body.Content(machineSchema)
	m.Doc = stringAttr(content.Attributes["doc"], &diags)
	if a := content.Attributes["initial"]; a != nil {
		m.Initial = refAttr(a, "state", &diags)
	}
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "event", "guard":
			d := declOf(blk)
			c, dd := blk.Body.Content(docSchema)
			diags = append(diags, dd...)
			d.Doc = stringAttr(c.Attributes["doc"], &diags)
			if blk.Type == "event" {
				m.Events = append(m.Events, &d)
			} else {
				m.Guards = append(m.Guards, &d)
			}
		case "action":
			a := &Action{Decl: declOf(blk)}
			c, dd := blk.Body.Content(actionSchema)
			diags = append(diags, dd...)
			a.Doc = stringAttr(c.Attributes["doc"], &diags)
			if at := c.Attributes["cri"]; at != nil {
				a.CRI = stringListAttr(at, &diags)
				a.CRIRange = at.Expr.Range()
			}
			if at := c.Attributes["calls"]; at != nil {
				a.Calls = refListAttr(at, "action", &diags)
			}
			m.Actions = append(m.Actions, a)
		case "duration":
			du := &Duration{Decl: declOf(blk)}
			c, dd := blk.Body.Content(durationSchema)
			diags = append(diags, dd...)
			du.Doc = stringAttr(c.Attributes["doc"], &diags)
			du.Default = durationAttr(c.Attributes["default"], &diags)
			du.Max = durationAttr(c.Attributes["max"], &diags)
			m.Durations = append(m.Durations, du)
		case "state":
			st, dd := decodeState(blk)
			diags = append(diags, dd...)
			m.States = append(m.States, st)
		}
	}
	return m, diags
}

func decodeState(b *hcl.Block) (*State, hcl.Diagnostics) {
	st := &State{Decl: declOf(b)}
	content, diags := b.Body.Content(stateSchema)
	st.Doc = stringAttr(content.Attributes["doc"], &diags)
	if a := content.Attributes["final"]; a != nil {
		v, d := a.Expr.Value(nil)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if v.Type() != cty.Bool || v.IsNull() {
				diags = append(diags, attrErr(a, "Invalid final", "final must be true or false."))
			} else {
				st.Final = v.True()
			}
		}
	}
	if a := content.Attributes["entry"]; a != nil {
		st.Entry = refListAttr(a, "action", &diags)
	}
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "transition":
			t := &Transition{Event: Ref{Name: blk.Labels[0], Range: blk.LabelRanges[0]}, Range: blk.DefRange}
			c, d := blk.Body.Content(transitionSchema)
			diags = append(diags, d...)
			t.Doc = stringAttr(c.Attributes["doc"], &diags)
			if a := c.Attributes["guard"]; a != nil {
				t.Guard = refAttr(a, "guard", &diags)
			}
			if a := c.Attributes["to"]; a != nil {
				t.To = refAttr(a, "state", &diags)
			}
			if a := c.Attributes["actions"]; a != nil {
				t.Actions = refListAttr(a, "action", &diags)
			}
			st.Transitions = append(st.Transitions, t)
		case "timeout":
			tm := &Timer{Event: Ref{Name: blk.Labels[0], Range: blk.LabelRanges[0]}, Range: blk.DefRange}
			c, d := blk.Body.Content(timeoutSchema)
			diags = append(diags, d...)
			if a := c.Attributes["after"]; a != nil {
				tm.After = refAttr(a, "duration", &diags)
			}
			st.Timers = append(st.Timers, tm)
		case "choice":
			if st.Choice != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Duplicate choice",
					Detail:  fmt.Sprintf("State %q already has a choice at %s; a state has at most one.", st.Name, st.Choice.Range),
					Subject: blk.DefRange.Ptr(),
				})
				continue
			}
			ch, d := decodeChoice(blk)
			diags = append(diags, d...)
			st.Choice = ch
		}
	}
	return st, diags
}

func decodeChoice(b *hcl.Block) (*Choice, hcl.Diagnostics) {
	ch := &Choice{Range: b.DefRange}
	content, diags := b.Body.Content(choiceSchema)
	for _, blk := range content.Blocks {
		br := &Branch{Range: blk.DefRange}
		if blk.Type == "when" {
			br.Guard = Ref{Name: blk.Labels[0], Range: blk.LabelRanges[0]}
		}
		c, d := blk.Body.Content(branchSchema)
		diags = append(diags, d...)
		br.Doc = stringAttr(c.Attributes["doc"], &diags)
		if a := c.Attributes["to"]; a != nil {
			br.To = refAttr(a, "state", &diags)
		}
		if a := c.Attributes["actions"]; a != nil {
			br.Actions = refListAttr(a, "action", &diags)
		}
		if blk.Type == "when" {
			if ch.Otherwise != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Branch after otherwise",
					Detail:  "A when branch after otherwise can never be taken; move otherwise last.",
					Subject: blk.DefRange.Ptr(),
				})
			}
			ch.When = append(ch.When, br)
			continue
		}
		if ch.Otherwise != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Duplicate otherwise",
				Detail:  fmt.Sprintf("This choice already has an otherwise branch at %s.", ch.Otherwise.Range),
				Subject: blk.DefRange.Ptr(),
			})
			continue
		}
		ch.Otherwise = br
	}
	return ch, diags
}

func decodeInput(b *hcl.Block) (*Input, hcl.Diagnostics) {
	in := &Input{Decl: declOf(b)}
	attrs, diags := b.Body.JustAttributes()
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	// Routes keep source order, so that generated code is deterministic.
	sort.Slice(names, func(i, j int) bool {
		return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte
	})
	for _, n := range names {
		a := attrs[n]
		if n == "doc" {
			in.Doc = stringAttr(a, &diags)
			continue
		}
		tr, d := hcl.AbsTraversalForExpr(a.Expr)
		if d.HasErrors() || len(tr) != 2 {
			diags = append(diags, attrErr(a, "Invalid route",
				fmt.Sprintf("A route is written %s = %s.EVENT, naming an event of machine %q.", n, n, n)))
			continue
		}
		root := tr.RootName()
		ev, ok := tr[1].(hcl.TraverseAttr)
		if root != n || !ok {
			diags = append(diags, attrErr(a, "Invalid route",
				fmt.Sprintf("A route is written %s = %s.EVENT, naming an event of machine %q.", n, n, n)))
			continue
		}
		in.Routes = append(in.Routes, &Route{
			Machine: Ref{Name: n, Range: a.NameRange},
			Event:   Ref{Name: ev.Name, Range: tr.SourceRange()},
			Range:   a.Range,
		})
	}
	return in, diags
}

func attrErr(a *hcl.Attribute, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: a.Expr.Range().Ptr(), Context: a.Range.Ptr()}
}

func stringAttr(a *hcl.Attribute, diags *hcl.Diagnostics) string {
	if a == nil {
		return ""
	}
	v, d := a.Expr.Value(nil)
	*diags = append(*diags, d...)
	if d.HasErrors() {
		return ""
	}
	if v.Type() != cty.String || v.IsNull() || !v.IsKnown() {
		*diags = append(*diags, attrErr(a, "Invalid "+a.Name, a.Name+" must be a string."))
		return ""
	}
	return v.AsString()
}

func stringListAttr(a *hcl.Attribute, diags *hcl.Diagnostics) []string {
	v, d := a.Expr.Value(nil)
	*diags = append(*diags, d...)
	if d.HasErrors() {
		return nil
	}
	t := v.Type()
	if v.IsNull() || !v.IsKnown() || !(t.IsTupleType() || t.IsListType()) {
		*diags = append(*diags, attrErr(a, "Invalid "+a.Name, a.Name+" must be a list of strings."))
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.Type() != cty.String || e.IsNull() || !e.IsKnown() {
			*diags = append(*diags, attrErr(a, "Invalid "+a.Name, a.Name+" must be a list of strings."))
			return nil
		}
		out = append(out, e.AsString())
	}
	return out
}

func durationAttr(a *hcl.Attribute, diags *hcl.Diagnostics) time.Duration {
	s := stringAttr(a, diags)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		*diags = append(*diags, attrErr(a, "Invalid "+a.Name,
			fmt.Sprintf("%s must be a positive duration such as \"10s\" or \"5m\", not %q.", a.Name, s)))
		return 0
	}
	return d
}

// refAttr decodes `kind.name`.
func refAttr(a *hcl.Attribute, kind string, diags *hcl.Diagnostics) Ref {
	r, ok := traversalRef(a.Expr, kind)
	if !ok {
		*diags = append(*diags, attrErr(a, "Invalid reference",
			fmt.Sprintf("%s must be a reference written %s.NAME.", a.Name, kind)))
	}
	return r
}

func refListAttr(a *hcl.Attribute, kind string, diags *hcl.Diagnostics) []Ref {
	exprs, d := hcl.ExprList(a.Expr)
	if d.HasErrors() {
		*diags = append(*diags, attrErr(a, "Invalid "+a.Name,
			fmt.Sprintf("%s must be a list of references written [%s.NAME, ...].", a.Name, kind)))
		return nil
	}
	var out []Ref
	for _, e := range exprs {
		r, ok := traversalRef(e, kind)
		if !ok {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invalid reference",
				Detail:  fmt.Sprintf("Each element of %s must be a reference written %s.NAME.", a.Name, kind),
				Subject: e.Range().Ptr(), Context: a.Range.Ptr(),
			})
			continue
		}
		out = append(out, r)
	}
	return out
}

func traversalRef(e hcl.Expression, kind string) (Ref, bool) {
	tr, d := hcl.AbsTraversalForExpr(e)
	if d.HasErrors() || len(tr) != 2 || tr.RootName() != kind {
		return Ref{}, false
	}
	at, ok := tr[1].(hcl.TraverseAttr)
	if !ok {
		return Ref{}, false
	}
	return Ref{Name: at.Name, Range: tr.SourceRange()}, true
}

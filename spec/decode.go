package spec

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
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
	if !diags.HasErrors() {
		diags = append(diags, validate(s)...)
	}
	return s, dedupe(diags)
}

// dedupe drops repeated diagnostics: a shared block is decoded and checked
// once per use, and a problem in it is reported once.
func dedupe(diags hcl.Diagnostics) hcl.Diagnostics {
	type key struct {
		sev             hcl.DiagnosticSeverity
		summary, detail string
		subject         hcl.Range
	}
	seen := map[key]bool{}
	out := diags[:0]
	for _, d := range diags {
		k := key{d.Severity, d.Summary, d.Detail, hcl.Range{}}
		if d.Subject != nil {
			k.subject = *d.Subject
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	return out
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
	{Type: "caller", LabelNames: []string{"name"}},
	// The system blocks (see System), written in system.hcl.
	{Type: "replicated", LabelNames: []string{"machine"}},
	{Type: "tie", LabelNames: []string{"machine", "guard"}},
	{Type: "effect", LabelNames: []string{"machine", "action"}},
	{Type: "external", LabelNames: []string{"machine", "event"}},
	{Type: "invariant", LabelNames: []string{"name"}},
	{Type: "parameter", LabelNames: []string{"name"}},
	{Type: "flag", LabelNames: []string{"machine", "name"}},
	{Type: "restored", LabelNames: []string{"name"}},
	{Type: "phase"},
	{Type: "conditions"},
}}

var machineSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "initial", Required: true}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "event", LabelNames: []string{"name"}},
		{Type: "guard", LabelNames: []string{"name"}},
		{Type: "action", LabelNames: []string{"name"}},
		{Type: "duration", LabelNames: []string{"name"}},
		{Type: "state", LabelNames: []string{"name"}},
		{Type: "shared", LabelNames: []string{"name"}},
	},
}

// sharedSchema is the body of a shared block: what several states may use.
var sharedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "entry"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "transition", LabelNames: []string{"event"}},
		{Type: "timeout", LabelNames: []string{"event"}},
	},
}

var docSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}}}

var actionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "cri"}, {Name: "calls"}, {Name: "uncancellable"}}}

var callerSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "handler", LabelNames: []string{"name"}}},
}

var handlerSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "cri"}}}

var durationSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "default"}, {Name: "max"}}}

var stateSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "final"}, {Name: "entry"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "transition", LabelNames: []string{"event"}},
		{Type: "timeout", LabelNames: []string{"event"}},
		{Type: "use", LabelNames: []string{"shared"}},
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
			case "caller":
				c, d := decodeCaller(b)
				diags = append(diags, d...)
				c.File = f.Name
				s.Callers = append(s.Callers, c)
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
	// Shared blocks first: a state may use one declared after it.
	shared := map[string]*sharedBlock{}
	var sharedOrder []*sharedBlock
	for _, blk := range content.Blocks {
		if blk.Type != "shared" {
			continue
		}
		sb := &sharedBlock{Decl: declOf(blk), body: blk.Body}
		if prev := shared[sb.Name]; prev != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Duplicate shared block",
				Detail:  fmt.Sprintf("shared %q is already declared at %s.", sb.Name, prev.NameRange),
				Subject: sb.NameRange.Ptr(),
			})
			continue
		}
		shared[sb.Name] = sb
		sharedOrder = append(sharedOrder, sb)
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
			if at := c.Attributes["uncancellable"]; at != nil {
				a.Uncancellable = uncancellableAttr(at, &diags)
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
			st, dd := decodeState(blk, shared)
			diags = append(diags, dd...)
			m.States = append(m.States, st)
		}
	}
	for _, sb := range sharedOrder {
		if !sb.used {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning, Summary: "Unused shared block",
				Detail:  fmt.Sprintf("shared %q of machine %q is declared but no state uses it.", sb.Name, m.Name),
				Subject: sb.NameRange.Ptr(),
			})
		}
	}
	return m, diags
}

// sharedBlock is a `shared "NAME"` block of a machine, decoded anew at each
// use with that use's parameters.
type sharedBlock struct {
	Decl
	body hcl.Body
	used bool
}

// binding is one use being expanded: the values it gives and which of them
// the shared block read. A nil binding is a state's own block, where no
// parameter can be resolved.
type binding struct {
	use  *Use
	args hcl.Attributes
	read map[string]bool
}

// bind returns a, or, when a's value is written param.NAME, the use's
// attribute NAME under a's name. It returns nil, with an error, for a
// parameter outside a shared block or one the use does not give.
func (b *binding) bind(a *hcl.Attribute, diags *hcl.Diagnostics) *hcl.Attribute {
	if a == nil {
		return nil
	}
	tr, d := hcl.AbsTraversalForExpr(a.Expr)
	if d.HasErrors() || tr.RootName() != "param" {
		return a
	}
	at, ok := tr[len(tr)-1].(hcl.TraverseAttr)
	switch {
	case len(tr) != 2 || !ok:
		*diags = append(*diags, attrErr(a, "Invalid parameter", "A parameter is written param.NAME."))
		return nil
	case b == nil:
		*diags = append(*diags, attrErr(a, "Parameter outside a shared block",
			fmt.Sprintf("%s = param.%s: only the blocks of a shared block may refer to a parameter, whose value each use gives.", a.Name, at.Name)))
		return nil
	}
	arg := b.args[at.Name]
	if arg == nil {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Missing parameter",
			Detail:  fmt.Sprintf("This use of shared %q gives no value for param.%s, which %s refers to at %s.", b.use.Shared.Name, at.Name, a.Name, a.Expr.Range()),
			Subject: b.use.Range.Ptr(),
		})
		return nil
	}
	b.read[at.Name] = true
	return &hcl.Attribute{Name: a.Name, Expr: arg.Expr, Range: arg.Range, NameRange: arg.NameRange}
}

func decodeState(b *hcl.Block, shared map[string]*sharedBlock) (*State, hcl.Diagnostics) {
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
	var own *binding
	if a := own.bind(content.Attributes["entry"], &diags); a != nil {
		st.Entry = refListAttr(a, "action", &diags)
	}
	uses := map[string]*Use{}
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "transition", "timeout":
			st.decodeRow(blk, own, &diags)
		case "use":
			u := &Use{Shared: Ref{Name: blk.Labels[0], Range: blk.LabelRanges[0]}, Range: blk.DefRange}
			if prev := uses[u.Shared.Name]; prev != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Shared block used twice",
					Detail:  fmt.Sprintf("state %q already uses shared %q at %s; its rows would be tried twice.", st.Name, u.Shared.Name, prev.Range),
					Subject: u.Range.Ptr(),
				})
				continue
			}
			uses[u.Shared.Name] = u
			diags = append(diags, st.use(u, blk.Body, shared)...)
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

// use appends the entry, timers and transitions of the shared block u names,
// with the parameters body gives.
func (st *State) use(u *Use, body hcl.Body, shared map[string]*sharedBlock) hcl.Diagnostics {
	args, diags := body.JustAttributes()
	sb := shared[u.Shared.Name]
	if sb == nil {
		names := make([]string, 0, len(shared))
		for n := range shared {
			names = append(names, n)
		}
		sort.Strings(names)
		detail := fmt.Sprintf("state %q uses shared %q, which is not declared.", st.Name, u.Shared.Name)
		if s := suggest(u.Shared.Name, names); s != "" {
			detail += fmt.Sprintf(" Did you mean %q?", s)
		} else if len(names) > 0 {
			detail += " Declared: " + strings.Join(names, ", ") + "."
		}
		return append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown shared block", Detail: detail, Subject: u.Shared.Range.Ptr()})
	}
	sb.used = true
	bnd := &binding{use: u, args: args, read: map[string]bool{}}
	content, d := sb.body.Content(sharedSchema)
	diags = append(diags, d...)
	if a := bnd.bind(content.Attributes["entry"], &diags); a != nil {
		if st.Entry != nil || st.EntryVia != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Entry given twice",
				Detail:  fmt.Sprintf("state %q has an entry list already, and shared %q gives another at %s; a state has one entry list.", st.Name, sb.Name, a.Range),
				Subject: u.Range.Ptr(),
			})
		} else {
			st.Entry, st.EntryVia = refListAttr(a, "action", &diags), u
		}
	}
	for _, blk := range content.Blocks {
		st.decodeRow(blk, bnd, &diags)
	}
	unread := make([]*hcl.Attribute, 0, len(args))
	for _, a := range args {
		if !bnd.read[a.Name] {
			unread = append(unread, a)
		}
	}
	sort.Slice(unread, func(i, j int) bool { return unread[i].Range.Start.Byte < unread[j].Range.Start.Byte })
	for _, a := range unread {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Unused parameter",
			Detail:  fmt.Sprintf("shared %q refers to no param.%s, so this value would be ignored.", sb.Name, a.Name),
			Subject: a.NameRange.Ptr(), Context: a.Range.Ptr(),
		})
	}
	return diags
}

// decodeRow appends the transition or timeout blk to st, its attributes
// bound by bnd (nil for the state's own blocks).
func (st *State) decodeRow(blk *hcl.Block, bnd *binding, diags *hcl.Diagnostics) {
	var via *Use
	if bnd != nil {
		via = bnd.use
	}
	label := Ref{Name: blk.Labels[0], Range: blk.LabelRanges[0]}
	if blk.Type == "timeout" {
		tm := &Timer{Event: label, Range: blk.DefRange, Via: via}
		c, d := blk.Body.Content(timeoutSchema)
		*diags = append(*diags, d...)
		if a := bnd.bind(c.Attributes["after"], diags); a != nil {
			tm.After = refAttr(a, "duration", diags)
		}
		st.Timers = append(st.Timers, tm)
		return
	}
	t := &Transition{Event: label, Range: blk.DefRange, Via: via}
	c, d := blk.Body.Content(transitionSchema)
	*diags = append(*diags, d...)
	t.Doc = stringAttr(bnd.bind(c.Attributes["doc"], diags), diags)
	if a := bnd.bind(c.Attributes["guard"], diags); a != nil {
		t.Guard = refAttr(a, "guard", diags)
	}
	if a := bnd.bind(c.Attributes["to"], diags); a != nil {
		t.To = refAttr(a, "state", diags)
	}
	if a := bnd.bind(c.Attributes["actions"], diags); a != nil {
		t.Actions = refListAttr(a, "action", diags)
	}
	st.Transitions = append(st.Transitions, t)
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

func decodeCaller(b *hcl.Block) (*Caller, hcl.Diagnostics) {
	c := &Caller{Decl: declOf(b)}
	content, diags := b.Body.Content(callerSchema)
	c.Doc = stringAttr(content.Attributes["doc"], &diags)
	for _, blk := range content.Blocks {
		h := &Handler{Decl: declOf(blk)}
		hc, d := blk.Body.Content(handlerSchema)
		diags = append(diags, d...)
		h.Doc = stringAttr(hc.Attributes["doc"], &diags)
		if at := hc.Attributes["cri"]; at != nil {
			h.CRI = stringListAttr(at, &diags)
			h.CRIRange = at.Expr.Range()
		}
		c.Handlers = append(c.Handlers, h)
	}
	return c, diags
}

// uncancellableAttr decodes `uncancellable = { METHOD = "why", ... }`, in
// source order; a key may be written bare or quoted.
func uncancellableAttr(a *hcl.Attribute, diags *hcl.Diagnostics) []*Uncancellable {
	pairs, d := hcl.ExprMap(a.Expr)
	if d.HasErrors() {
		*diags = append(*diags, attrErr(a, "Invalid uncancellable",
			`uncancellable must be written { METHOD = "why", ... }: the CRI methods of cri that a kill lets finish, each with the reason.`))
		return nil
	}
	var out []*Uncancellable
	for _, p := range pairs {
		u := &Uncancellable{Method: hcl.ExprAsKeyword(p.Key), Range: p.Key.Range(), ValueRange: p.Value.Range()}
		if u.Method == "" {
			if v, d := p.Key.Value(nil); !d.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
				u.Method = v.AsString()
			}
		}
		v, d := p.Value.Value(nil)
		if u.Method == "" || d.HasErrors() || v.Type() != cty.String || !v.IsKnown() || v.IsNull() {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invalid uncancellable",
				Detail:  `Each element of uncancellable is written METHOD = "why": a CRI method of cri and the reason a kill must let it finish.`,
				Subject: p.Key.Range().Ptr(), Context: a.Range.Ptr(),
			})
			continue
		}
		u.Why = v.AsString()
		out = append(out, u)
	}
	return out
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

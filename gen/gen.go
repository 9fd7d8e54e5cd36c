package gen

import (
	"bytes"
	_ "embed"
	"fmt"
	"go/format"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/template"

	"github.com/speclet/speclet/spec"
)

//go:embed machine.go.tmpl
var machineTmpl string

//go:embed routes.go.tmpl
var routesTmpl string

//go:embed stale_test.go.tmpl
var staleTmpl string

//go:embed callers.go.tmpl
var callersTmpl string

var funcs = template.FuncMap{
	"comment": comment,
	"join":    strings.Join,
	"lower":   func(s string) string { return strings.ToLower(s[:1]) + s[1:] },
	"goname":  spec.GoName,
}

// The code templates are parsed on first use: of the programs that link this
// package only specgen renders them, and the daemon (which draws graphs with
// DOT, Mermaid and SVG) would otherwise parse and keep them from start-up.
var (
	machineT = parsed("machine", machineTmpl)
	routesT  = parsed("routes", routesTmpl)
	staleT   = parsed("stale", staleTmpl)
	callersT = parsed("callers", callersTmpl)
)

// parsed returns a function that parses text as the template name once and
// returns it; it panics, as template.Must does, when text does not parse
// (the templates are embedded: gen's tests parse every one).
func parsed(name, text string) func() *template.Template {
	return sync.OnceValue(func() *template.Template {
		return template.Must(template.New(name).Funcs(funcs).Parse(text))
	})
}

// comment renders text as // lines wrapped at 80 columns, indented by one
// tab when indent is set by the caller's template position.
func comment(text string) string {
	words := strings.Fields(text)
	var lines []string
	line := "//"
	for _, w := range words {
		if len(line)+1+len(w) > 78 && line != "//" {
			lines = append(lines, line)
			line = "//"
		}
		line += " " + w
	}
	lines = append(lines, line)
	return strings.Join(lines, "\n")
}

// Files renders everything specgen writes for s, keyed by the path relative
// to the repository root: fsm/<machine>_gen.go, fsm/routes_gen.go,
// fsm/callers_gen.go, fsm/spec_gen_test.go and docs/states/<machine>.dot and
// .mmd. s must be valid (Parse returned no error).
func Files(s *spec.Spec) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, m := range s.Machines {
		b, err := Machine(s, m)
		if err != nil {
			return nil, err
		}
		out["fsm/"+m.Name+"_gen.go"] = b
		out["docs/states/"+m.Name+".dot"] = DOT(m)
		out["docs/states/"+m.Name+".mmd"] = Mermaid(m)
	}
	if len(s.Inputs) > 0 {
		b, err := Routes(s)
		if err != nil {
			return nil, err
		}
		out["fsm/routes_gen.go"] = b
	}
	if len(s.Callers) > 0 {
		b, err := Callers(s)
		if err != nil {
			return nil, err
		}
		out["fsm/callers_gen.go"] = b
	}
	b, err := StaleTest(s)
	if err != nil {
		return nil, err
	}
	out["fsm/spec_gen_test.go"] = b
	return out, nil
}

// Machine renders the Go source of machine m of s.
func Machine(s *spec.Spec, m *spec.Machine) ([]byte, error) {
	return render(machineT(), newMachineView(s, m), sourceName(m.File))
}

type routesView struct {
	Source, SHA256 string
	Machines       []routeMachine
	Inputs         []routeInput
}

type routeMachine struct{ Name, Go string }

type routeInput struct {
	Name, Const, Doc string
	Routes           []routeTarget
}

type routeTarget struct{ Machine, Event string }

// Routes renders fsm/routes_gen.go: the Input type and Route.
func Routes(s *spec.Spec) ([]byte, error) {
	file := s.RoutesFile()
	v := routesView{Source: sourceName(file), SHA256: SHA256(s.Files[file])}
	for _, m := range s.Machines {
		v.Machines = append(v.Machines, routeMachine{Name: m.Name, Go: spec.GoName(m.Name)})
	}
	for _, in := range s.Inputs {
		ri := routeInput{Name: in.Name, Const: "Input" + spec.GoName(in.Name), Doc: in.Doc}
		for _, r := range in.Routes {
			p := spec.GoName(r.Machine.Name)
			ri.Routes = append(ri.Routes, routeTarget{Machine: p, Event: p + "Event" + spec.GoName(r.Event.Name)})
		}
		v.Inputs = append(v.Inputs, ri)
	}
	return render(routesT(), v, v.Source)
}

type callersView struct {
	Source, SHA256 string
	Callers        []callerView
	Handlers       []handlerView
}

type callerView struct{ Name, Const, Doc string }

type handlerView struct {
	Caller, Name, Const, Doc string
	CRI                      []string
}

// Callers renders fsm/callers_gen.go: the callers' names, the Handler type,
// its CRI lists and context tags.
func Callers(s *spec.Spec) ([]byte, error) {
	file := s.CallersFile()
	v := callersView{Source: sourceName(file), SHA256: SHA256(s.Files[file])}
	for _, c := range s.Callers {
		v.Callers = append(v.Callers, callerView{Name: c.Name, Const: spec.GoName(c.Name) + "CallerName", Doc: c.Doc})
		for _, h := range c.Handlers {
			v.Handlers = append(v.Handlers, handlerView{Caller: c.Name, Name: h.Name,
				Const: "Handler" + spec.GoName(c.Name) + spec.GoName(h.Name), Doc: h.Doc, CRI: h.CRI})
		}
	}
	return render(callersT(), v, v.Source)
}

type staleView struct {
	Files []staleFile
}

type staleFile struct{ Base, Const, Generated string }

// StaleTest renders fsm/spec_gen_test.go, which fails when a spec file no
// longer hashes to what the generated code was made from.
func StaleTest(s *spec.Spec) ([]byte, error) {
	var v staleView
	for _, m := range s.Machines {
		v.Files = append(v.Files, staleFile{Base: filepath.Base(m.File), Const: spec.GoName(m.Name) + "SpecSHA256", Generated: "fsm/" + m.Name + "_gen.go"})
	}
	if f := s.RoutesFile(); f != "" {
		dup := false
		for _, sf := range v.Files {
			dup = dup || sf.Base == filepath.Base(f)
		}
		if !dup { // routes in a machine's file are covered by its hash
			v.Files = append(v.Files, staleFile{Base: filepath.Base(f), Const: "RoutesSpecSHA256", Generated: "fsm/routes_gen.go"})
		}
	}
	if f := s.CallersFile(); f != "" {
		dup := false
		for _, sf := range v.Files {
			dup = dup || sf.Base == filepath.Base(f)
		}
		if !dup { // callers in a machine's or the routes' file are covered by its hash
			v.Files = append(v.Files, staleFile{Base: filepath.Base(f), Const: "CallersSpecSHA256", Generated: "fsm/callers_gen.go"})
		}
	}
	// Files that declare no machine and no input (system.hcl: the ties,
	// effects and invariants `speclet spec verify` reads) generate no code;
	// their hash is kept in the stale test itself, so that every spec file
	// is accounted for.
	for name, b := range s.Files {
		base := filepath.Base(name)
		known := false
		for _, sf := range v.Files {
			known = known || sf.Base == base
		}
		if !known {
			v.Files = append(v.Files, staleFile{Base: base, Const: fmt.Sprintf("%q", SHA256(b)), Generated: "fsm/spec_gen_test.go"})
		}
	}
	sort.Slice(v.Files, func(i, j int) bool { return v.Files[i].Base < v.Files[j].Base })
	return render(staleT(), v, "spec/*.hcl")
}

func render(t *template.Template, data any, what string) ([]byte, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", what, err)
	}
	src, err := format.Source(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format code generated from %s: %w\n%s", what, err, numbered(buf.Bytes()))
	}
	return src, nil
}

func numbered(b []byte) string {
	var sb strings.Builder
	for i, l := range strings.Split(string(b), "\n") {
		fmt.Fprintf(&sb, "%4d %s\n", i+1, l)
	}
	return sb.String()
}

// CRIMethods renders spec/crimethods_gen.go from the method names of the
// CRI RuntimeService and ImageService.
func CRIMethods(names []string) ([]byte, error) {
	names = append([]string(nil), names...)
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString("// Code generated by specgen from k8s.io/cri-api; DO NOT EDIT.\n\npackage spec\n\n")
	b.WriteString("// criMethods lists the methods of the CRI RuntimeService and ImageService\n// (k8s.io/cri-api runtime/v1), sorted.\nvar criMethods = []string{\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\t%q,\n", n)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

package spec

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

var identRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// GoName converts a spec identifier to the CamelCase used in generated Go
// names: "waiting_to_start" -> "WaitingToStart".
func GoName(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

// IsCRIMethod reports whether name is a method of the CRI RuntimeService or
// ImageService (k8s.io/cri-api runtime/v1).
func IsCRIMethod(name string) bool {
	i := sort.SearchStrings(criMethods, name)
	return i < len(criMethods) && criMethods[i] == name
}

// CRIMethods returns the CRI method names actions may declare, sorted.
func CRIMethods() []string { return append([]string(nil), criMethods...) }

type validator struct {
	diags hcl.Diagnostics
}

func (v *validator) errorf(rng hcl.Range, summary, format string, args ...any) {
	v.diags = append(v.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: rng.Ptr()})
}

func (v *validator) warnf(rng hcl.Range, summary, format string, args ...any) {
	v.diags = append(v.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: rng.Ptr()})
}

func (v *validator) ident(kind string, d Decl) {
	if !identRE.MatchString(d.Name) || strings.HasSuffix(d.Name, "_") || strings.Contains(d.Name, "__") {
		v.errorf(d.NameRange, "Invalid name",
			"%s name %q must match [a-z][a-z0-9_]* with single underscores between words, e.g. \"waiting_to_start\".", kind, d.Name)
	}
}

// names records declared names of one kind for duplicate and reference
// checks.
type names struct {
	kind  string
	decl  map[string]Decl
	goKey map[string]string
	order []string
	used  map[string]bool
}

func newNames(kind string) *names {
	return &names{kind: kind, decl: map[string]Decl{}, goKey: map[string]string{}, used: map[string]bool{}}
}

func (v *validator) declare(n *names, d Decl) {
	v.ident(n.kind, d)
	if prev, dup := n.decl[d.Name]; dup {
		v.errorf(d.NameRange, "Duplicate "+n.kind, "%s %q is already declared at %s.", n.kind, d.Name, prev.NameRange)
		return
	}
	if other, dup := n.goKey[GoName(d.Name)]; dup {
		v.errorf(d.NameRange, "Clashing "+n.kind+" names", "%s %q and %q both become the Go name %s; rename one.", n.kind, d.Name, other, GoName(d.Name))
	}
	n.goKey[GoName(d.Name)] = d.Name
	n.decl[d.Name] = d
	n.order = append(n.order, d.Name)
}

func (v *validator) ref(n *names, r Ref, where string) bool {
	if !r.Set() {
		return false
	}
	if _, ok := n.decl[r.Name]; ok {
		n.used[r.Name] = true
		return true
	}
	detail := fmt.Sprintf("%s refers to %s %q, which is not declared.", where, n.kind, r.Name)
	if s := suggest(r.Name, n.order); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", s)
	} else if len(n.order) > 0 {
		detail += " Declared: " + strings.Join(n.order, ", ") + "."
	}
	v.errorf(r.Range, "Unknown "+n.kind, "%s", detail)
	return false
}

func validate(s *Spec) hcl.Diagnostics {
	v := &validator{}
	if len(s.Machines) == 0 {
		v.diags = append(v.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No machine", Detail: "The spec declares no machine block."})
		return v.diags
	}
	machines := newNames("machine")
	for _, m := range s.Machines {
		v.declare(machines, m.Decl)
		v.machine(m)
	}
	v.inputs(s, machines)
	v.callers(s, machines)
	v.system(s, machines)
	return v.diags
}

// criList reports the methods of list that are no CRI method, at rng.
func (v *validator) criList(who string, list []string, rng hcl.Range) {
	for _, c := range list {
		if !IsCRIMethod(c) {
			detail := fmt.Sprintf("%s names CRI call %q, which is no method of the CRI RuntimeService or ImageService (k8s.io/cri-api runtime/v1).", who, c)
			if sug := suggest(c, criMethods); sug != "" {
				detail += fmt.Sprintf(" Did you mean %q?", sug)
			}
			v.errorf(rng, "Unknown CRI call", "%s", detail)
		}
	}
}

// uncancellable checks that each call an action declares uncancellable is
// a call of its own cri list, named once, with a reason.
func (v *validator) uncancellable(a *Action) {
	seen := map[string]*Uncancellable{}
	for _, u := range a.Uncancellable {
		switch prev := seen[u.Method]; {
		case prev != nil:
			v.errorf(u.Range, "Duplicate uncancellable call", "action %q already declares %s uncancellable at %s.", a.Name, u.Method, prev.Range)
			continue
		case !slices.Contains(a.CRI, u.Method):
			detail := fmt.Sprintf("action %q declares %s uncancellable, but its cri list does not name %s; a kill can spare only a call the action makes.", a.Name, u.Method, u.Method)
			if sug := suggest(u.Method, a.CRI); sug != "" {
				detail += fmt.Sprintf(" Did you mean %q?", sug)
			} else {
				detail += " Add it to cri, or remove it here."
			}
			v.errorf(u.Range, "Uncancellable call not in cri", "%s", detail)
		case strings.TrimSpace(u.Why) == "":
			v.errorf(u.ValueRange, "Uncancellable without reason",
				"action %q declares %s uncancellable without saying why; give the reason a kill must let the call finish (what a cancelled call would leave behind).", a.Name, u.Method)
		}
		seen[u.Method] = u
	}
}

// callers checks the callers of the runtime outside the machines: names
// unique among callers and machines (the CRI audit names a handler's calls
// by its caller in the place of a machine), handlers unique in their
// caller, CRI methods that exist, every caller in one file.
func (v *validator) callers(s *Spec, machines *names) {
	callers := newNames("caller")
	consts := map[string]string{}
	total := 0
	for _, c := range s.Callers {
		v.declare(callers, c.Decl)
		if m, ok := machines.decl[c.Name]; ok {
			v.errorf(c.NameRange, "Caller named like a machine",
				"caller %q has the name of the machine declared at %s; the CRI audit names a call by its machine or caller, so the two must differ.", c.Name, m.NameRange)
		}
		if f := s.CallersFile(); c.File != f {
			v.errorf(c.NameRange, "Callers in two files",
				"caller %q is declared in %s, but the first caller is in %s; declare every caller in one file (it generates fsm/callers_gen.go).", c.Name, c.File, f)
		}
		handlers := newNames("handler")
		for _, h := range c.Handlers {
			v.declare(handlers, h.Decl)
			total++
			k, this := GoName(c.Name)+GoName(h.Name), fmt.Sprintf("handler %q of caller %q", h.Name, c.Name)
			if prev, dup := consts[k]; dup && prev != this {
				v.errorf(h.NameRange, "Clashing handler names", "%s becomes the Go name Handler%s, like %s; rename one.", this, k, prev)
			}
			consts[k] = this
			v.criList(fmt.Sprintf("Handler %q of caller %q", h.Name, c.Name), h.CRI, h.CRIRange)
			if len(h.CRI) == 0 {
				v.warnf(h.NameRange, "Handler without CRI calls",
					"handler %q of caller %q lists no cri; a handler is declared for the CRI calls it makes.", h.Name, c.Name)
			}
		}
	}
	if total > 256 {
		v.errorf(s.Callers[0].NameRange, "Too many handlers", "the callers declare %d handlers; at most 256 fit the generated type.", total)
	}
}

func (v *validator) machine(m *Machine) {
	events, guards, actions, durations, states := newNames("event"), newNames("guard"), newNames("action"), newNames("duration"), newNames("state")
	for _, e := range m.Events {
		v.declare(events, *e)
	}
	// Guards, actions and durations become methods that one engine type may
	// implement together, so their Go names must not clash across kinds.
	methods := map[string]string{}
	method := func(kind string, d Decl) {
		g := GoName(d.Name)
		if prev, dup := methods[g]; dup && prev != kind+" "+d.Name {
			v.errorf(d.NameRange, "Clashing method names", "%s %q becomes the Go method %s, like %s; rename one.", kind, d.Name, g, prev)
		}
		methods[g] = kind + " " + d.Name
	}
	for _, g := range m.Guards {
		v.declare(guards, *g)
		method("guard", *g)
	}
	for _, a := range m.Actions {
		v.declare(actions, a.Decl)
		method("action", a.Decl)
		v.criList(fmt.Sprintf("Action %q", a.Name), a.CRI, a.CRIRange)
		v.uncancellable(a)
	}
	for _, d := range m.Durations {
		v.declare(durations, d.Decl)
		method("duration", d.Decl)
		if d.Max != 0 && d.Default != 0 && d.Max < d.Default {
			v.errorf(d.NameRange, "Invalid duration", "duration %q has max %s below its default %s.", d.Name, d.Max, d.Default)
		}
	}
	for _, st := range m.States {
		v.declare(states, st.Decl)
	}
	if len(m.States) == 0 {
		v.errorf(m.NameRange, "No states", "machine %q declares no state.", m.Name)
		return
	}
	// Generated types are uint8.
	for _, c := range []struct {
		kind string
		n    int
	}{{"states", len(m.States)}, {"events", len(m.Events)}, {"guards", len(m.Guards)}, {"actions", len(m.Actions)}, {"durations", len(m.Durations)}} {
		if c.n > 256 {
			v.errorf(m.NameRange, "Too many "+c.kind, "machine %q declares %d %s; at most 256 fit the generated types.", m.Name, c.n, c.kind)
		}
	}
	if !m.Initial.Set() {
		return // reported by the schema (initial is required) or as an invalid reference
	}
	if !v.ref(states, m.Initial, "initial") {
		return
	}

	for _, a := range m.Actions {
		for _, c := range a.Calls {
			if c.Name == a.Name {
				v.errorf(c.Range, "Action calls itself", "action %q lists itself in calls.", a.Name)
				continue
			}
			v.ref(actions, c, fmt.Sprintf("action %q calls", a.Name))
		}
	}
	for _, st := range m.States {
		where := fmt.Sprintf("state %q", st.Name)
		for _, a := range st.Entry {
			v.ref(actions, a, origin(where, st.EntryVia)+" entry")
		}
		for _, tm := range st.Timers {
			v.ref(durations, tm.After, origin(where, tm.Via)+" timeout")
			if v.ref(events, tm.Event, origin(where, tm.Via)+" timeout") {
				found := false
				for _, t := range st.Transitions {
					found = found || t.Event.Name == tm.Event.Name
				}
				if !found {
					v.errorf(at(tm.Event.Range, tm.Via), "Timer without transition",
						"state %q arms a timer for event %q but has no transition on %q; the timer would fire into nothing.", st.Name, tm.Event.Name, tm.Event.Name)
				}
			}
		}
		// Per event: guarded transitions first, at most one unguarded, last.
		unguarded := map[string]*Transition{}
		seenGuard := map[string]map[string]bool{}
		for _, t := range st.Transitions {
			tw := fmt.Sprintf("%s transition %q", origin(where, t.Via), t.Event.Name)
			v.ref(events, t.Event, origin(where, t.Via)+" transition")
			if t.Guard.Set() {
				v.ref(guards, t.Guard, tw)
			}
			if t.To.Set() {
				v.ref(states, t.To, tw)
			}
			for _, a := range t.Actions {
				v.ref(actions, a, tw)
			}
			if prev := unguarded[t.Event.Name]; prev != nil {
				if t.Guard.Set() {
					v.errorf(at(t.Range, t.Via), "Shadowed transition",
						"state %q already has an unguarded transition on %q at %s, so this guarded one%s is never tried; put guarded transitions first.", st.Name, t.Event.Name, rowAt(prev), from(t))
				} else {
					v.errorf(at(t.Range, t.Via), "Ambiguous transition",
						"state %q has two unguarded transitions on %q (the other at %s)%s; guard one of them.", st.Name, t.Event.Name, rowAt(prev), from(t))
				}
				continue
			}
			if !t.Guard.Set() {
				unguarded[t.Event.Name] = t
				continue
			}
			if seenGuard[t.Event.Name] == nil {
				seenGuard[t.Event.Name] = map[string]bool{}
			}
			if seenGuard[t.Event.Name][t.Guard.Name] {
				v.errorf(at(t.Guard.Range, t.Via), "Shadowed transition",
					"state %q already has a transition on %q guarded by %q, so this one%s is never taken.", st.Name, t.Event.Name, t.Guard.Name, from(t))
			}
			seenGuard[t.Event.Name][t.Guard.Name] = true
		}
		if ch := st.Choice; ch != nil {
			for _, br := range ch.When {
				bw := fmt.Sprintf("%s choice", where)
				v.ref(guards, br.Guard, bw)
				v.ref(states, br.To, bw)
				for _, a := range br.Actions {
					v.ref(actions, a, bw)
				}
			}
			if ch.Otherwise == nil {
				v.errorf(ch.Range, "Choice without otherwise",
					"the choice of state %q has no otherwise branch; when no guard holds the machine would be stuck. Add `otherwise { to = state.NAME }`.", st.Name)
			} else {
				v.ref(states, ch.Otherwise.To, where+" otherwise")
				for _, a := range ch.Otherwise.Actions {
					v.ref(actions, a, where+" otherwise")
				}
			}
			if len(ch.When) == 0 {
				v.errorf(ch.Range, "Choice without when", "the choice of state %q has no when branch; use a transition instead.", st.Name)
			}
			if len(st.Transitions) > 0 || len(st.Timers) > 0 {
				v.errorf(ch.Range, "Choice with transitions",
					"state %q has a choice, so it is left as soon as it is entered; its transitions and timers would never be used.", st.Name)
			}
		}
		external := st.Choice != nil
		for _, t := range st.Transitions {
			external = external || t.To.Set()
		}
		switch {
		case st.Final && (len(st.Transitions) > 0 || len(st.Timers) > 0 || st.Choice != nil):
			v.errorf(st.NameRange, "Final state with exits",
				"state %q is final, so it may have no transitions, timers or choice.", st.Name)
		case !st.Final && !external:
			v.errorf(st.NameRange, "Dead end",
				"state %q is not final but has no transition to another state; add one or mark it `final = true`.", st.Name)
		}
	}
	if v.diags.HasErrors() {
		return
	}
	reach := Reachable(m)
	for _, st := range m.States {
		if !reach[st.Name] {
			v.errorf(st.NameRange, "Unreachable state",
				"state %q cannot be reached from the initial state %q.", st.Name, m.Initial.Name)
		}
	}
	finishing := canFinish(m)
	if len(finishing) > 0 {
		for _, st := range m.States {
			if reach[st.Name] && !finishing[st.Name] {
				v.errorf(st.NameRange, "No way to finish",
					"no path leads from state %q to a final state; a machine that enters it can never finish.", st.Name)
			}
		}
	}
	for _, n := range []*names{guards, actions, durations} {
		for _, name := range n.order {
			if !n.used[name] {
				v.warnf(n.decl[name].NameRange, "Unused "+n.kind, "%s %q of machine %q is declared but never used.", n.kind, name, m.Name)
			}
		}
	}
}

// origin names where a row was written: the state, or the shared block a
// use brought it from (checked once, whichever state uses it).
func origin(state string, via *Use) string {
	if via == nil {
		return state
	}
	return fmt.Sprintf("shared %q", via.Shared.Name)
}

// at is where a problem of a row at rng is reported: rng itself, or for a
// row a use brought, the use, since the problem is in the state using it.
func at(rng hcl.Range, via *Use) hcl.Range {
	if via == nil {
		return rng
	}
	return via.Range
}

// rowAt is where transition t is written, with the use that brought it.
func rowAt(t *Transition) string {
	if t.Via == nil {
		return t.Range.String()
	}
	return fmt.Sprintf("%s, from shared %q used at %s", t.Range, t.Via.Shared.Name, t.Via.Range)
}

// from is ` (from shared "NAME", at POS)` for a transition a use brought, else "".
func from(t *Transition) string {
	if t.Via == nil {
		return ""
	}
	return fmt.Sprintf(" (from shared %q, at %s)", t.Via.Shared.Name, t.Range)
}

// Reachable returns the states reachable from the initial state over
// external transitions and choice branches, ignoring guards.
func Reachable(m *Machine) map[string]bool {
	seen := map[string]bool{m.Initial.Name: true}
	queue := []string{m.Initial.Name}
	for len(queue) > 0 {
		st := m.State(queue[0])
		queue = queue[1:]
		if st == nil {
			continue
		}
		var next []string
		for _, t := range st.Transitions {
			if t.To.Set() {
				next = append(next, t.To.Name)
			}
		}
		if st.Choice != nil {
			for _, br := range st.Choice.When {
				next = append(next, br.To.Name)
			}
			if st.Choice.Otherwise != nil {
				next = append(next, st.Choice.Otherwise.To.Name)
			}
		}
		for _, n := range next {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return seen
}

// canFinish returns the states from which some final state is reachable,
// ignoring guards (empty when the machine has no final state).
func canFinish(m *Machine) map[string]bool {
	into := map[string][]string{}
	var queue []string
	ok := map[string]bool{}
	for _, st := range m.States {
		if st.Final {
			ok[st.Name] = true
			queue = append(queue, st.Name)
		}
		for _, t := range st.Transitions {
			if t.To.Set() {
				into[t.To.Name] = append(into[t.To.Name], st.Name)
			}
		}
		if st.Choice != nil {
			for _, br := range append(append([]*Branch(nil), st.Choice.When...), st.Choice.Otherwise) {
				if br != nil {
					into[br.To.Name] = append(into[br.To.Name], st.Name)
				}
			}
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, from := range into[n] {
			if !ok[from] {
				ok[from] = true
				queue = append(queue, from)
			}
		}
	}
	return ok
}

func (v *validator) inputs(s *Spec, machines *names) {
	if len(s.Inputs) > 256 {
		v.errorf(s.Inputs[256].NameRange, "Too many inputs", "the spec declares %d inputs; at most 256 fit the generated type.", len(s.Inputs))
	}
	inputs := newNames("input")
	for _, in := range s.Inputs {
		v.declare(inputs, in.Decl)
		if len(in.Routes) == 0 {
			v.errorf(in.NameRange, "Input without route", "input %q delivers to no machine; add e.g. `pod = pod.sync`.", in.Name)
		}
		for _, r := range in.Routes {
			if !v.ref(machines, r.Machine, fmt.Sprintf("input %q", in.Name)) {
				continue
			}
			m := s.Machine(r.Machine.Name)
			evs := newNames("event")
			for _, e := range m.Events {
				evs.decl[e.Name] = *e
				evs.order = append(evs.order, e.Name)
			}
			v.ref(evs, r.Event, fmt.Sprintf("input %q", in.Name))
		}
	}
}

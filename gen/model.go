package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/speclet/speclet/spec"
)

// machineView is what the templates see of one machine: names resolved to
// indexes and Go identifiers.
type machineView struct {
	M       *spec.Machine
	Prefix  string // "Pod"
	Source  string // "spec/pod.hcl"
	SHA256  string
	Initial string // Go constant of the initial state

	States    []nameView
	Events    []nameView
	Guards    []nameView
	Actions   []actionView
	Durations []durationView

	Transitions []transitionView
	Choices     []choiceView
	// ByStateEvent[s][e] lists indexes into Transitions, spec order.
	ByStateEvent [][][]int
	// ChoicesByState[s] lists indexes into Choices, spec order.
	ChoicesByState [][]int
	// Paths[s] is the shortest event path to state s (nil when unreachable).
	Paths [][]string
	Reach []bool
}

type nameView struct {
	Name, Go, Const, Doc string
	Final                bool
	Entry                []string // Go constants of entry actions
	Timers               []timerView
}

type actionView struct {
	nameView
	CRI           []string
	Calls         []string
	Uncancellable []*spec.Uncancellable
}

type durationView struct {
	nameView
	Default, Max int64 // nanoseconds
}

type timerView struct{ Event, After string }

type transitionView struct {
	From, Event, Guard, To string // Go constants; Guard "" when unguarded
	Internal               bool
	Actions                []string
	Doc                    string
}

type choiceView struct {
	State, Guard, To string
	Actions          []string
}

// sourceName is the name generated files cite: spec/<base>.
func sourceName(file string) string { return "spec/" + filepath.Base(file) }

// SHA256 returns the hex SHA-256 of b, as recorded in generated files.
func SHA256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func newMachineView(s *spec.Spec, m *spec.Machine) *machineView {
	p := spec.GoName(m.Name)
	v := &machineView{M: m, Prefix: p, Source: sourceName(m.File), SHA256: SHA256(s.Files[m.File])}
	stateIdx, eventIdx := map[string]int{}, map[string]int{}
	c := func(kind, name string) string { return p + kind + spec.GoName(name) }
	for i, e := range m.Events {
		eventIdx[e.Name] = i
		v.Events = append(v.Events, nameView{Name: e.Name, Go: spec.GoName(e.Name), Const: c("Event", e.Name), Doc: e.Doc})
	}
	for _, g := range m.Guards {
		v.Guards = append(v.Guards, nameView{Name: g.Name, Go: spec.GoName(g.Name), Const: c("Guard", g.Name), Doc: g.Doc})
	}
	for _, a := range m.Actions {
		av := actionView{nameView: nameView{Name: a.Name, Go: spec.GoName(a.Name), Const: c("Action", a.Name), Doc: a.Doc}, CRI: a.CRI, Uncancellable: a.Uncancellable}
		for _, r := range a.Calls {
			av.Calls = append(av.Calls, r.Name)
		}
		v.Actions = append(v.Actions, av)
	}
	for _, d := range m.Durations {
		v.Durations = append(v.Durations, durationView{nameView{Name: d.Name, Go: spec.GoName(d.Name), Const: c("Duration", d.Name), Doc: d.Doc}, int64(d.Default), int64(d.Max)})
	}
	refs := func(kind string, rs []spec.Ref) []string {
		var out []string
		for _, r := range rs {
			out = append(out, c(kind, r.Name))
		}
		return out
	}
	for i, st := range m.States {
		stateIdx[st.Name] = i
		sv := nameView{Name: st.Name, Go: spec.GoName(st.Name), Const: c("State", st.Name), Doc: st.Doc, Final: st.Final, Entry: refs("Action", st.Entry)}
		for _, tm := range st.Timers {
			sv.Timers = append(sv.Timers, timerView{Event: c("Event", tm.Event.Name), After: c("Duration", tm.After.Name)})
		}
		v.States = append(v.States, sv)
	}
	v.Initial = c("State", m.Initial.Name)
	v.ByStateEvent = make([][][]int, len(m.States))
	v.ChoicesByState = make([][]int, len(m.States))
	for si, st := range m.States {
		v.ByStateEvent[si] = make([][]int, len(m.Events))
		for _, t := range st.Transitions {
			tv := transitionView{
				From: c("State", st.Name), Event: c("Event", t.Event.Name), Internal: t.Internal(),
				Actions: refs("Action", t.Actions), Doc: t.Doc,
			}
			tv.To = tv.From
			if t.To.Set() {
				tv.To = c("State", t.To.Name)
			}
			if t.Guard.Set() {
				tv.Guard = c("Guard", t.Guard.Name)
			}
			ei := eventIdx[t.Event.Name]
			v.ByStateEvent[si][ei] = append(v.ByStateEvent[si][ei], len(v.Transitions))
			v.Transitions = append(v.Transitions, tv)
		}
		if ch := st.Choice; ch != nil {
			branches := append(append([]*spec.Branch(nil), ch.When...), ch.Otherwise)
			for _, br := range branches {
				cv := choiceView{State: c("State", st.Name), To: c("State", br.To.Name), Actions: refs("Action", br.Actions)}
				if br.Guard.Set() {
					cv.Guard = c("Guard", br.Guard.Name)
				}
				v.ChoicesByState[si] = append(v.ChoicesByState[si], len(v.Choices))
				v.Choices = append(v.Choices, cv)
			}
		}
	}
	v.Paths, v.Reach = shortestPaths(m, stateIdx)
	return v
}

// shortestPaths finds, for each state, a path from the initial state with the
// fewest events over external transitions (each guarded branch counts as
// possible) and choice branches (no event): a 0-1 BFS, deterministic in spec
// order.
func shortestPaths(m *spec.Machine, idx map[string]int) ([][]string, []bool) {
	paths := make([][]string, len(m.States))
	reach := make([]bool, len(m.States))
	start := idx[m.Initial.Name]
	reach[start] = true
	paths[start] = []string{}
	deque := []int{start}
	for len(deque) > 0 {
		si := deque[0]
		deque = deque[1:]
		st := m.States[si]
		relax := func(to string, ev string) {
			ti, ok := idx[to]
			if !ok {
				return
			}
			n := len(paths[si])
			if ev != "" {
				n++
			}
			if reach[ti] && len(paths[ti]) <= n {
				return
			}
			reach[ti] = true
			p := append(make([]string, 0, n), paths[si]...)
			if ev != "" {
				p = append(p, ev)
				deque = append(deque, ti)
			} else {
				deque = append([]int{ti}, deque...)
			}
			paths[ti] = p
		}
		for _, t := range st.Transitions {
			if t.To.Set() {
				relax(t.To.Name, t.Event.Name)
			}
		}
		if st.Choice != nil {
			for _, br := range st.Choice.When {
				relax(br.To.Name, "")
			}
			if st.Choice.Otherwise != nil {
				relax(st.Choice.Otherwise.To.Name, "")
			}
		}
	}
	return paths, reach
}

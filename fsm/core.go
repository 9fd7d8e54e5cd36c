package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/looplab/fsm"
)

// This file is the hand-written core every generated machine delegates to:
// the generated code holds the typed tables and dispatch switches of one
// machine and wraps a machine[...] in its exported Machine type. The
// semantics are those described in doc.go.

// table is the static description of one machine, indexed for Fire. One
// table per machine is built at package initialisation by newTable and never
// changes afterwards.
type table[S, E, A, G Enum, I any] struct {
	name           string
	stateNames     []string // spec name per state
	eventNames     []string // spec name per event
	transitions    []Transition[S, E, A, G]
	choices        []Choice[S, A, G]
	entry          [][]A                  // entry actions per state
	byStateEvent   [][][]uint16           // transitions indexed by [state][event], in spec order
	choicesByState [][]uint16             // choices indexed by state, in spec order
	guard          func(I, G) bool        // evaluates one guard on the machine's guards
	parseState     func(string) (S, bool) // state of a spec name: looplab's Current back to S
}

// newTable builds the table of a machine from its generated tables. The rows
// of transitions and choices are copied; the other slices are kept.
// parseState (the generated Parse<Prefix>State, a switch on the name) maps
// looplab's state names back to states; newTable panics when it does not
// return each state for its name.
//
// The table is the machine's graph, shared by every instance of its kind:
// looplab gets no events (see machine).
func newTable[S, E, A, G Enum, I any](
	name string, stateNames, eventNames []string,
	transitions []Transition[S, E, A, G], choices []Choice[S, A, G],
	entry [][]A, byStateEvent [][][]uint16, choicesByState [][]uint16,
	guard func(I, G) bool, parseState func(string) (S, bool),
) *table[S, E, A, G, I] {
	t := &table[S, E, A, G, I]{
		name:           name,
		stateNames:     stateNames,
		eventNames:     eventNames,
		transitions:    slices.Clone(transitions),
		choices:        slices.Clone(choices),
		entry:          entry,
		byStateEvent:   byStateEvent,
		choicesByState: choicesByState,
		guard:          guard,
		parseState:     parseState,
	}
	for i, n := range stateNames {
		if s, ok := parseState(n); !ok || int(s) != i {
			panic(fmt.Sprintf("%s machine: state name %q parses to %d, %v; want %d", name, n, uint8(s), ok, i))
		}
	}
	return t
}

// machine is one machine instance over looplab/fsm. looplab holds its state:
// state() reads looplab's Current and maps the name back to S through the
// table; the machine keeps no copy of it. It is not safe for concurrent use.
// actions, path and choices are reused by every fire; choices is nil until a
// fire passes a choice (most kinds have none).
//
// looplab is moved with SetState, not Event: looplab builds the graph that
// Event checks into maps of each instance (about 2 KB per machine, a fifth of
// the heap of 10,000 pods), while every move the core makes is a row or a
// choice branch of the table, which all instances of a kind share. For the
// same reason the looplab machine is a zero fsm.FSM inside the machine, not
// one of NewFSM: Current and SetState read and write only its state under
// its lock, while NewFSM adds a separate allocation and three empty maps for
// the events, callbacks and metadata it is never given (144 of its 272
// bytes). TestZeroLooplabHoldsTheState fails should looplab's zero FSM stop
// holding a state.
type machine[S, E, A, G Enum, I any] struct {
	t       *table[S, E, A, G, I]
	fsm     fsm.FSM
	guards  I
	actions []A
	path    []S
	row     int   // index into the transition table of the last fire's transition
	choices []int // indices into the choice table of the branches the last fire passed
}

// init puts m in state s with guards g; no entry action runs. It panics when
// s is not a state of t.
func (m *machine[S, E, A, G, I]) init(t *table[S, E, A, G, I], s S, g I) {
	if int(s) >= len(t.stateNames) {
		panic(fmt.Sprintf("%s machine: no state %d", t.name, uint8(s)))
	}
	m.t, m.guards = t, g
	m.actions, m.path, m.choices = make([]A, 0, 8), make([]S, 0, 4), nil
	m.row = 0
	m.fsm.SetState(t.stateNames[s])
}

// state returns the current state: looplab's, mapped back to S. It panics
// when looplab is in a state the spec does not have (only SetState can put
// it there).
func (m *machine[S, E, A, G, I]) state() S {
	cur := m.fsm.Current()
	s, ok := m.t.parseState(cur)
	if !ok {
		panic(fmt.Sprintf("%s machine: looplab is in %q, no state of the spec", m.t.name, cur))
	}
	return s
}

// pick returns the index of the first transition on ev from state from whose
// guard holds.
func (m *machine[S, E, A, G, I]) pick(from S, ev E) (int, bool) {
	if int(ev) >= len(m.t.eventNames) {
		return 0, false
	}
	for _, i := range m.t.byStateEvent[from][ev] {
		r := &m.t.transitions[i]
		if !r.HasGuard || m.t.guard(m.guards, r.Guard) {
			return int(i), true
		}
	}
	return 0, false
}

// eventName is ev's spec name, or its String for an event not in the spec.
func (m *machine[S, E, A, G, I]) eventName(ev E) string {
	if int(ev) < len(m.t.eventNames) {
		return m.t.eventNames[ev]
	}
	return ev.String()
}

// fire takes the transition on ev (see doc.go) and returns the state it left
// and the state it is in now; afterwards m.actions, m.path, m.row and
// m.choices describe the step. It reads the state from looplab once and
// moves looplab through every state it enters. With no transition it returns
// a *NoTransitionError and changes nothing.
func (m *machine[S, E, A, G, I]) fire(ev E) (from, to S, err error) {
	from = m.state()
	i, ok := m.pick(from, ev)
	if !ok {
		return from, from, &NoTransitionError{Machine: m.t.name, State: m.t.stateNames[from], Event: m.eventName(ev)}
	}
	r := &m.t.transitions[i]
	m.row = i
	m.actions = append(m.actions[:0], r.Actions...)
	m.path = m.path[:0]
	m.choices = m.choices[:0]
	if r.Internal {
		return from, from, nil
	}
	m.enter(from, r.To)
	to = r.To
	for hops := 0; len(m.t.choicesByState[to]) > 0; hops++ {
		if hops > len(m.t.stateNames) {
			return from, to, fmt.Errorf("%s machine: event %s from %s: %w", m.t.name, ev, from, errChoiceLoop)
		}
		cs := m.t.choicesByState[to]
		ci := cs[len(cs)-1]
		for _, k := range cs {
			if c := &m.t.choices[k]; !c.HasGuard || m.t.guard(m.guards, c.Guard) {
				ci = k
				break
			}
		}
		c := &m.t.choices[ci]
		m.choices = append(m.choices, int(ci))
		m.actions = append(m.actions, c.Actions...)
		m.enter(to, c.To)
		to = c.To
	}
	return from, to, nil
}

// enter moves looplab from cur, the state it is in, to s, a move of the
// table, and records s's entry actions. A transition back to the same state
// re-enters it and leaves looplab as it is.
func (m *machine[S, E, A, G, I]) enter(cur, s S) {
	if s != cur {
		m.fsm.SetState(m.t.stateNames[s])
	}
	m.path = append(m.path, s)
	m.actions = append(m.actions, m.t.entry[s]...)
}

// stepString renders a step for logs: "from -> to on event / a, b", or
// "from: internal on event" when no state was entered.
func stepString[S, E, A Enum](from, to S, ev E, actions []A, entered bool) string {
	var b strings.Builder
	if !entered {
		b.WriteString(from.String() + ": internal on " + ev.String())
	} else {
		b.WriteString(from.String() + " -> " + to.String() + " on " + ev.String())
	}
	for i, a := range actions {
		if i == 0 {
			b.WriteString(" / ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	return b.String()
}

// transitionPaths returns, for each transition row, a shortest event path
// from the initial state (sp, per state) that ends with the row's event fired
// in its From state; nil for a row whose From is unreachable.
func transitionPaths[S, E, A, G Enum](sp map[S][]E, rows []Transition[S, E, A, G]) [][]E {
	out := make([][]E, len(rows))
	for i, t := range rows {
		if p, ok := sp[t.From]; ok {
			out[i] = append(append(make([]E, 0, len(p)+1), p...), t.Event)
		}
	}
	return out
}

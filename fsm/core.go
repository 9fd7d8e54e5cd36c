package fsm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/looplab/fsm"
)

// This file is the hand-written core every generated machine delegates to:
// the generated code holds the typed tables and dispatch switches of one
// machine and wraps a machine[...] in its exported Machine type. The
// semantics are those described in doc.go.

// enum is a generated uint8 constant type whose String returns the spec name.
type enum interface {
	~uint8
	String() string
}

// transitionRow is the struct type of a generated <Prefix>Transition: the
// generated row types have it as their underlying type.
type transitionRow[S, E enum, A, G ~uint8] = struct {
	From     S
	Event    E
	Guard    G
	HasGuard bool
	To       S
	Internal bool
	Actions  []A
}

// choiceRow is the struct type of a generated <Prefix>Choice.
type choiceRow[S enum, A, G ~uint8] = struct {
	State    S
	Guard    G
	HasGuard bool
	To       S
	Actions  []A
}

// table is the static description of one machine, indexed for Fire. One
// table per machine is built at package initialisation by newTable and never
// changes afterwards.
type table[S, E enum, A, G ~uint8, I any] struct {
	name           string
	stateNames     []string // spec name per state
	eventNames     []string // spec name per event
	transitions    []transitionRow[S, E, A, G]
	transitionKeys []string // looplab event per transition, "" when internal
	choices        []choiceRow[S, A, G]
	choiceKeys     []string        // looplab event per choice branch
	entry          [][]A           // entry actions per state
	byStateEvent   [][][]uint16    // transitions indexed by [state][event], in spec order
	choicesByState [][]uint16      // choices indexed by state, in spec order
	events         fsm.Events      // looplab events of every external move
	guard          func(I, G) bool // evaluates one guard on the machine's guards
}

// newTable builds the table of a machine from its generated tables. The rows
// of transitions and choices are copied; the other slices are kept.
func newTable[S, E enum, A, G ~uint8, I any,
	T ~transitionRow[S, E, A, G], C ~choiceRow[S, A, G]](
	name string, stateNames, eventNames []string,
	transitions []T, transitionKeys []string,
	choices []C, choiceKeys []string,
	entry [][]A, byStateEvent [][][]uint16, choicesByState [][]uint16,
	events fsm.Events, guard func(I, G) bool,
) *table[S, E, A, G, I] {
	t := &table[S, E, A, G, I]{
		name:           name,
		stateNames:     stateNames,
		eventNames:     eventNames,
		transitions:    make([]transitionRow[S, E, A, G], len(transitions)),
		transitionKeys: transitionKeys,
		choices:        make([]choiceRow[S, A, G], len(choices)),
		choiceKeys:     choiceKeys,
		entry:          entry,
		byStateEvent:   byStateEvent,
		choicesByState: choicesByState,
		events:         events,
		guard:          guard,
	}
	for i, r := range transitions {
		t.transitions[i] = transitionRow[S, E, A, G](r)
	}
	for i, c := range choices {
		t.choices[i] = choiceRow[S, A, G](c)
	}
	return t
}

// machine is the state of one machine instance over looplab/fsm. It is not
// safe for concurrent use. actions, path and choices are reused by every
// fire.
type machine[S, E enum, A, G ~uint8, I any] struct {
	t       *table[S, E, A, G, I]
	fsm     *fsm.FSM
	guards  I
	state   S
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
	*m = machine[S, E, A, G, I]{
		t:       t,
		fsm:     fsm.NewFSM(s.String(), t.events, nil),
		guards:  g,
		state:   s,
		actions: make([]A, 0, 8),
		path:    make([]S, 0, 4),
		choices: make([]int, 0, 4),
	}
}

// pick returns the index of the first transition on ev from the current
// state whose guard holds.
func (m *machine[S, E, A, G, I]) pick(ev E) (int, bool) {
	if int(ev) >= len(m.t.eventNames) {
		return 0, false
	}
	for _, i := range m.t.byStateEvent[m.state][ev] {
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

// fire takes the transition on ev (see doc.go) and returns the state it left;
// afterwards m.state, m.actions, m.path, m.row and m.choices describe the
// step. With no transition it returns a *NoTransitionError and changes
// nothing.
func (m *machine[S, E, A, G, I]) fire(ev E) (S, error) {
	from := m.state
	i, ok := m.pick(ev)
	if !ok {
		return from, &NoTransitionError{Machine: m.t.name, State: m.t.stateNames[m.state], Event: m.eventName(ev)}
	}
	r := &m.t.transitions[i]
	m.row = i
	m.actions = append(m.actions[:0], r.Actions...)
	m.path = m.path[:0]
	m.choices = m.choices[:0]
	if r.Internal {
		return from, nil
	}
	if err := m.enter(m.t.transitionKeys[i], r.To); err != nil {
		return from, err
	}
	for hops := 0; len(m.t.choicesByState[m.state]) > 0; hops++ {
		if hops > len(m.t.stateNames) {
			return from, fmt.Errorf("%s machine: event %s from %s: %w", m.t.name, ev, from, errChoiceLoop)
		}
		cs := m.t.choicesByState[m.state]
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
		if err := m.enter(m.t.choiceKeys[ci], c.To); err != nil {
			return from, err
		}
	}
	return from, nil
}

// enter moves to s through looplab event key and records s's entry actions.
// A transition back to the same state re-enters it without looplab, which
// has no self-transitions.
func (m *machine[S, E, A, G, I]) enter(key string, s S) error {
	if s != m.state {
		if err := m.fsm.Event(context.Background(), key); err != nil {
			var nt fsm.NoTransitionError
			if !errors.As(err, &nt) {
				return fmt.Errorf("%s machine: enter %s from %s: %w", m.t.name, s, m.state, err)
			}
		}
	}
	m.state = s
	m.path = append(m.path, s)
	m.actions = append(m.actions, m.t.entry[s]...)
	return nil
}

// stepString renders a step for logs: "from -> to on event / a, b", or
// "from: internal on event" when no state was entered.
func stepString[S, E, A enum](from, to S, ev E, actions []A, entered bool) string {
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
func transitionPaths[S, E enum, A, G ~uint8](sp map[S][]E, rows []transitionRow[S, E, A, G]) [][]E {
	out := make([][]E, len(rows))
	for i, t := range rows {
		if p, ok := sp[t.From]; ok {
			out[i] = append(append(make([]E, 0, len(p)+1), p...), t.Event)
		}
	}
	return out
}

package fsm

import "context"

// This file is the one view of a machine that every generated machine
// offers: the Machine interface, the Step a Fire returns and the Branch of a
// choice. The engine runs every machine (pod, sandbox, container, probe,
// node) through it with one fire loop.

// Enum is a generated uint8 constant type (a state, event, action or guard)
// whose String returns its spec name.
type Enum interface {
	~uint8
	String() string
}

// Machine is one generated state machine instance as the engine's fire loop
// runs it. S, E, A and G are the machine's State, Event, Action and Guard
// types. Every <Prefix>Machine implements it.
type Machine[S, E, A, G Enum] interface {
	// Name is the machine's name in the spec (<Prefix>MachineName).
	Name() string
	// State is the current state.
	State() S
	// Fire takes the transition on ev (see doc.go) and returns the step;
	// with no transition it returns an error wrapping ErrNoTransition.
	Fire(ev E) (Step[S, E, A, G], error)
	// Run runs action a on the implementation the machine was bound to
	// (Bind<Prefix>Machine), with the context tagged with the action.
	Run(ctx context.Context, a A) error
	// Branch is the choice branch at index i of the machine's ChoiceTable
	// (Step.Choices holds such indices).
	Branch(i int) Branch[S, G]
}

// Exec runs the operations of an action, O being the engine's operation
// type: from first, the one the action returned, on ctx, the action's
// context (tagged with the action), and returns the action's error. A
// machine's Impl has one (its Exec method); Run<Prefix>Action takes one.
type Exec[O any] func(ctx context.Context, first O) error

// Step is the outcome of one Fire: the machine Machine moved From -> To on
// Event through transition row Row (its guard Guard when HasGuard), entering
// the states of Path in order (empty for an internal transition; a
// transition back to the same state lists it). Actions are the transition's
// actions, then the entry actions of each state entered (and choice branch
// actions between them), in the order the engine must run them.
//
// Row is the index in the machine's TransitionTable of the transition taken,
// and Choices the indices in its ChoiceTable of the choice branches passed
// after it, in order (for row coverage).
//
// Actions, Path and Choices alias buffers of the machine: they are valid
// until the next Fire; copy them to keep them longer.
type Step[S, E, A, G Enum] struct {
	Machine  string
	From, To S
	Event    E
	Guard    G
	HasGuard bool
	Actions  []A
	Path     []S
	Row      int
	Choices  []int
}

// Entered reports whether the step entered a state (external transition):
// the engine re-arms the state's timers.
func (s Step[S, E, A, G]) Entered() bool { return len(s.Path) > 0 }

// String renders the step for logs: "from -> to on event / a, b", or
// "from: internal on event" when no state was entered.
func (s Step[S, E, A, G]) String() string {
	return stepString(s.From, s.To, s.Event, s.Actions, len(s.Path) > 0)
}

// Transition is a row of a machine's static transition table
// (<Prefix>Transition is an alias of it). Internal transitions stay in From
// without re-entering it (To == From): no entry action runs and timers keep
// running.
type Transition[S, E, A, G Enum] struct {
	From     S
	Event    E
	Guard    G
	HasGuard bool
	To       S
	Internal bool
	Actions  []A
}

// Choice is a branch of a choice (<Prefix>Choice is an alias of it): on
// entering State, the branches of State are tried in table order and the
// machine moves on to the To of the first whose guard holds; the last
// branch of each state has no guard (otherwise).
type Choice[S, A, G Enum] struct {
	State    S
	Guard    G
	HasGuard bool
	To       S
	Actions  []A
}

// Timer arms Event after the duration After while the machine stays in a
// state (<Prefix>Timer is an alias of it).
type Timer[E, D Enum] struct {
	Event E
	After D
}

// Kind is the static description of one machine kind (<Prefix>Kind): its
// name, its states in spec order, its transition and choice tables and the
// entry actions of each state, for code that walks every machine's spec
// alike (metric labels, row coverage, the actions of a row in a history).
type Kind[S, E, A, G Enum] struct {
	Name        string
	States      []S
	Transitions []Transition[S, E, A, G]
	Choices     []Choice[S, A, G]
	Entry       [][]A // entry actions indexed by state (<Prefix>StateEntry); nil: none known
}

// Branch is one choice branch: to To when Guard holds, or otherwise when
// HasGuard is false.
type Branch[S, G Enum] struct {
	Guard    G
	HasGuard bool
	To       S
}

// String renders the branch as "[guard] -> to" or "[otherwise] -> to".
func (b Branch[S, G]) String() string {
	if !b.HasGuard {
		return "[otherwise] -> " + b.To.String()
	}
	return "[" + b.Guard.String() + "] -> " + b.To.String()
}

// branch is the choice branch at index i.
func (m *machine[S, E, A, G, I]) branch(i int) Branch[S, G] {
	c := &m.t.choices[i]
	return Branch[S, G]{Guard: c.Guard, HasGuard: c.HasGuard, To: c.To}
}

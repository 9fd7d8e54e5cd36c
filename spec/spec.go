package spec

import (
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Spec is a decoded and validated set of lifecycle spec files: the machines
// (one per file) and the routes from channel inputs to machine events.
//
// A Spec returned with no error diagnostics is consistent: every reference
// names a declared item, every state is reachable, and names are valid Go
// identifiers once converted with GoName.
type Spec struct {
	Machines []*Machine
	Inputs   []*Input
	// System couples the machines and declares the invariants
	// `speclet spec verify` checks (system.hcl).
	System System
	// Sources holds the parsed files by the file name given to Parse, for
	// printing diagnostics with source snippets.
	Sources map[string]*hcl.File
	// Files holds the raw bytes of every parsed file, by name.
	Files map[string][]byte
}

// Machine returns the machine called name, or nil.
func (s *Spec) Machine(name string) *Machine {
	for _, m := range s.Machines {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// RoutesFile returns the name of the file that declared the inputs ("" when
// there are none).
func (s *Spec) RoutesFile() string {
	if len(s.Inputs) == 0 {
		return ""
	}
	return s.Inputs[0].Range.Filename
}

// Decl is a named declaration: an event, a guard or a state's name.
type Decl struct {
	Name string
	Doc  string
	// Range covers the block header; NameRange the label.
	Range     hcl.Range
	NameRange hcl.Range
}

// Ref is a reference to a declared name (state.x, guard.x, action.x,
// duration.x, or a block label naming an event or guard).
type Ref struct {
	Name  string
	Range hcl.Range
}

// Set reports whether the reference was written.
func (r Ref) Set() bool { return r.Name != "" }

// Machine is one state machine, declared by `machine "name" { ... }`.
type Machine struct {
	Decl
	// File is the name of the file that declares the machine.
	File      string
	Initial   Ref
	Events    []*Decl
	Guards    []*Decl
	Actions   []*Action
	Durations []*Duration
	States    []*State
}

// State returns the state called name, or nil.
func (m *Machine) State(name string) *State {
	for _, s := range m.States {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Action is a side effect the engine runs after a transition. CRI lists the
// CRI methods (RuntimeService or ImageService) the action may call.
//
// Calls lists actions this action runs itself as steps (sync_pod runs
// run_sandbox); they are not run again by the machine.
type Action struct {
	Decl
	CRI      []string
	CRIRange hcl.Range
	Calls    []Ref
}

// Duration is a named span of time a timer waits. The engine supplies the
// current value (backoff state, jitter, grace period); Default and Max are
// documentation of the intended values (zero when not given).
type Duration struct {
	Decl
	Default time.Duration
	Max     time.Duration
}

// State is a node of a machine.
//
// Semantics: entering a state (by an external transition, including one back
// to the same state) runs its Entry actions after the transition's actions and
// arms its Timers; leaving it cancels them. A state with a Choice is left at
// once through the first branch whose guard holds (else Otherwise): its entry
// actions run but its timers are never armed. A transition without `to` is
// internal: the state is not left, no entry action runs, timers keep running.
//
// A state's `use` blocks are expanded when the spec is decoded: Entry, Timers
// and Transitions hold the rows of the shared blocks it uses at the place of
// each use, so that readers of a State need not know about sharing.
type State struct {
	Decl
	Final bool
	Entry []Ref
	// EntryVia is the use that gave Entry (nil when the state wrote it).
	EntryVia    *Use
	Timers      []*Timer
	Transitions []*Transition
	Choice      *Choice
}

// Use is a `use "SHARED" { PARAM = value ... }` block of a state: the entry,
// timeouts and transitions of the machine's shared block SHARED, as if
// written at the place of the use, each attribute whose value is
// param.PARAM taking the value given here instead.
type Use struct {
	Shared Ref
	Range  hcl.Range
}

// Timer arms Event after Duration while the machine stays in the state.
type Timer struct {
	Event Ref
	After Ref
	Range hcl.Range
	// Via is the use that brought the timer from a shared block, whose
	// timeout Range is (nil when the state wrote it).
	Via *Use
}

// Transition moves the machine on Event when Guard (if set) holds. Transitions
// of one state for one event are tried in spec order; at most one of them
// may be unguarded and it must come last.
type Transition struct {
	Event   Ref
	Guard   Ref
	To      Ref // unset: internal transition
	Actions []Ref
	Doc     string
	Range   hcl.Range
	// Via is the use that brought the transition from a shared block, whose
	// transition Range is (nil when the state wrote it).
	Via *Use
}

// Internal reports whether the transition stays in its state without
// re-entering it.
func (t *Transition) Internal() bool { return !t.To.Set() }

// Choice is an eventless branch taken on entering a state.
type Choice struct {
	When      []*Branch
	Otherwise *Branch
	Range     hcl.Range
}

// Branch is one arm of a choice; Guard is unset for `otherwise`.
type Branch struct {
	Guard   Ref
	To      Ref
	Actions []Ref
	Doc     string
	Range   hcl.Range
}

// Input is a channel input (a config op, a runtime event, a tick, a probe
// result) and the machine events it is delivered as.
type Input struct {
	Decl
	Routes []*Route
}

// Route delivers an input to Machine as Event.
type Route struct {
	Machine Ref
	Event   Ref
	Range   hcl.Range
}

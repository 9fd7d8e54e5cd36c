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
	// Callers are the users of the runtime outside the machines (the
	// kubelet API, log rotation: callers.hcl), whose CRI calls the audit
	// checks as it checks the actions'.
	Callers []*Caller
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

// CallersFile returns the name of the file that declared the callers (""
// when there are none).
func (s *Spec) CallersFile() string {
	if len(s.Callers) == 0 {
		return ""
	}
	return s.Callers[0].File
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
//
// A kill cancels the running action: every CRI call it makes ends early,
// except those Uncancellable names, which run to their end (bounded by the
// client's per-call timeout, and still ended when the engine stops).
type Action struct {
	Decl
	CRI           []string
	CRIRange      hcl.Range
	Calls         []Ref
	Uncancellable []*Uncancellable
}

// Uncancellable is a CRI method of an action's cri list that a kill lets
// finish, written `uncancellable = { METHOD = "why" }`: Why says what a
// cancelled call would leave behind (a create or start cancelled at the
// client may still complete in the runtime).
type Uncancellable struct {
	Method string
	Why    string
	// Range covers the method's name, ValueRange the reason.
	Range      hcl.Range
	ValueRange hcl.Range
}

// Caller is a user of the runtime outside the machines, declared by
// `caller "NAME" { handler "NAME" { cri = [...] } }`: not a lifecycle effect
// (a user's exec or port-forward, log rotation), but its CRI calls are
// audited like an action's. The CRI audit names a handler's calls by the
// caller (in the place of a machine) and the handler (of an action).
type Caller struct {
	Decl
	// File is the name of the file that declares the caller.
	File     string
	Handlers []*Handler
}

// Handler is an entry point of a Caller (an HTTP route, a periodic pass)
// and the CRI methods the calls made under it may use.
type Handler struct {
	Decl
	CRI      []string
	CRIRange hcl.Range
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

// Package fsm holds the lifecycle state machines generated from spec/*.hcl
// (pod_gen.go, container_gen.go, routes_gen.go, callers_gen.go) and the
// hand-written core they share (core.go: the table-driven machine every
// generated Machine wraps, one copy of Fire, Can and the choice walk) with
// its errors (errors.go). Never edit the generated files; change the spec
// or gen/*.tmpl and run `go generate ./fsm` (make generate).
//
// Per machine (prefix Pod, Container): typed State, Event, Guard, Action and
// Duration constants whose String returns the spec name; the Guards, Actions
// and Durations interfaces the engine implements (one method per name in the
// spec, so a missing one fails to compile); the static TransitionTable,
// ChoiceTable, StateEntry and StateTimers tables; and the Machine over
// looplab/fsm with Fire, Can, State and Timers. Route maps the engine's
// channel Inputs to machine events.
//
// Every <Machine>Machine implements Machine[S, E, A, G] (machine.go): Name,
// State, Fire returning the generic Step (<Machine>Step is an alias of it),
// Run and Branch. Bind<Machine>Machine binds a machine to the engine's
// implementation of its guards, its actions and their executor
// (<Machine>Impl[O]), so that one loop over the interface runs every
// machine: Fire, then Run each action of the step. An action does no I/O
// itself: it returns the first of its operations, an O (the engine's is
// engine/op's Op), and Run hands it to the Impl's Exec. The static side is generic too: <Machine>Transition and
// <Machine>Choice are aliases of Transition and Choice, and <Machine>Kind
// (a Kind) gives a machine kind's name, states and tables to code that walks
// every kind alike.
//
// Semantics. Fire(ev) tries the transitions of the current state on ev in
// spec order and takes the first whose guard holds. An internal transition
// (no `to` in the spec) stays in the state: no entry action, timers keep
// running, Step.Path is empty. An external transition (also one back to the
// same state) enters its target: Step.Path lists it, its entry actions are
// appended to Step.Actions and its timers are armed. A state with a choice is
// passed through at once via the first branch whose guard holds. Fire never
// runs an action and never calls back into the engine except for guards: the
// engine runs Step.Actions in order afterwards, outside any lock of the
// machine (looplab callbacks are not used, so nothing re-enters looplab).
//
// State. The looplab/fsm machine inside each Machine holds its state; the
// core keeps no copy. State, Timers, Can and Fire read looplab's Current and
// map the name back to the typed state with the generated Parse<Machine>State
// (once per Fire). Fire moves looplab (SetState) to each state it enters,
// only along the rows and choice branches of the tables; an internal
// transition leaves it alone. looplab is given no events: it would copy the
// graph into maps of every instance (about 2 KB per machine), while the
// tables are the graph, shared by all instances of a kind.
// New<Machine>MachineAt builds the looplab machine in the given state.
//
// Usage:
//
//	m := fsm.BindPodMachine(fsm.PodInitialState, worker) // worker implements fsm.PodImpl[op.Op]
//	step, err := m.Fire(fsm.PodEventUpdate)
//	if errors.Is(err, fsm.ErrNoTransition) { /* ignore or log */ }
//	if step.Entered() { cancel timers of step.From; arm m.Timers() }
//	for _, a := range step.Actions {
//		err := m.Run(ctx, a) // fsm.RunPodAction(ctx, worker, worker.Exec, a)
//		...
//	}
//
// Step.Row is the index in <Machine>TransitionTable of the transition taken
// (Step.Guard its guard when Step.HasGuard) and Step.Choices the indices in
// <Machine>ChoiceTable of the choice branches passed, in order (Branch(i)
// tells one; the engine tests count them for row coverage).
//
// Run<Machine>Action tags the context it passes to the Exec with the
// machine and action names (actionctx.go: WithAction, ActionFrom), so a CRI
// wrapper can check each call against the action's `cri` list
// (<Machine>ActionCRI) and those of the actions it runs itself
// (<Machine>ActionCalls); see engine/criaudit. The tag also carries the
// calls the action declares `uncancellable` (<Machine>ActionUncancellable):
// Uncancellable(ctx, method) tells the engine which calls a kill must let
// finish. <Machine>Action.Tag tags a context as Run<Machine>Action does.
//
// callers_gen.go (from spec/callers.hcl) gives the callers of the runtime
// outside the machines their Handler constants: Handler.Tag tags a
// context with the caller and handler names, which ActionFrom returns, and
// HandlerCRI lists the methods each handler may call.
//
// A Machine is not safe for concurrent use; Step.Actions, Step.Path and
// Step.Choices are valid until the next Fire.
package fsm

//go:generate go run ../cmd/specgen -spec ../spec -root ..

package worker

import (
	"context"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// Check follows every step of every pod's machines, after the worker's own
// observers, as engine/fire's Observer with the machine's kind left out:
// the engine's tests check each action's effects against spec/system.hcl
// with it (the engine's effects_test.go). Each hook may be nil.
type Check struct {
	// Scope returns the context the observers of a step taken (i < 0) or
	// its action i run under.
	Scope func(ctx context.Context, st CheckStep, i int) context.Context
	// Ran: the step's actions returned.
	Ran func(ctx context.Context, st CheckStep)
	// Refused: the machine took no transition for the event.
	Refused func(ctx context.Context, st CheckStep)
}

// CheckStep is a step as a Check sees it.
type CheckStep struct {
	Owner   Owner
	Step    any // the step (an *engine/fire.Step): one per step taken
	Machine string
	Event   string
	Actions []string
	// LastErr is the error of the last action that ran, "" for none.
	LastErr string
	// Queued is the events the machine's actions raised that it has not
	// taken yet, in order.
	Queued []string
}

// Owner is the owner of one machine of a pod as a Check sees it.
type Owner interface {
	observe.Owner
	// Host is the host of the owner's worker: one per engine.
	Host() *Host
	// PodMachines is where the pod's pod and sandbox machines are now.
	PodMachines() (fsm.PodState, fsm.SandboxState)
}

// AddCheck adds c after the observers of every machine kind of a pod. It
// must be called before any worker runs; nothing calls it in production.
func AddCheck(c Check) {
	podObservers = append(podObservers, checkObserver[fsm.PodState, fsm.PodEvent, fsm.PodAction, fsm.PodGuard](c,
		func(s *podState) []fsm.PodEvent { return s.run.Pending() }))
	sandboxObservers = append(sandboxObservers, checkObserver[fsm.SandboxState, fsm.SandboxEvent, fsm.SandboxAction, fsm.SandboxGuard](c,
		func(sb *sandboxState) []fsm.SandboxEvent { return sb.run.Pending() }))
	ctrObservers = append(ctrObservers, checkObserver[fsm.ContainerState, fsm.ContainerEvent, fsm.ContainerAction, fsm.ContainerGuard](c,
		func(c *ctrState) []fsm.ContainerEvent { return c.run.Pending() }))
	probeObservers = append(probeObservers, checkObserver[fsm.ProbeState, fsm.ProbeEvent, fsm.ProbeAction, fsm.ProbeGuard](c,
		func(ps *probeState) []fsm.ProbeEvent { return ps.run.Pending() }))
}

// checkObserver is c for the machines of one kind, whose owners' queues
// queued reads.
func checkObserver[S, E, A, G fsm.Enum, B Owner](c Check, queued func(B) []E) fire.Observer[S, E, A, G, B] {
	view := func(st *fire.Step[S, E, A, G, B]) CheckStep {
		v := CheckStep{Owner: st.Owner, Step: st, Machine: st.Machine, Event: st.Event.String()}
		for _, a := range st.Actions {
			v.Actions = append(v.Actions, a.String())
		}
		if n := len(st.Results); n > 0 {
			v.LastErr = st.Results[n-1].Error
		}
		for _, e := range queued(st.Owner) {
			v.Queued = append(v.Queued, e.String())
		}
		return v
	}
	var o fire.Observer[S, E, A, G, B]
	if c.Scope != nil {
		o.Scope = func(ctx context.Context, st *fire.Step[S, E, A, G, B], i int) context.Context {
			return c.Scope(ctx, view(st), i)
		}
	}
	if c.Ran != nil {
		o.Ran = func(ctx context.Context, st *fire.Step[S, E, A, G, B]) { c.Ran(ctx, view(st)) }
	}
	if c.Refused != nil {
		o.Refused = func(ctx context.Context, st *fire.Step[S, E, A, G, B]) { c.Refused(ctx, view(st)) }
	}
	return o
}

// Each owner is a Check's Owner.
func (s *podState) Host() *Host                                   { return s.h }
func (s *podState) PodMachines() (fsm.PodState, fsm.SandboxState) { return s.machineStates() }
func (sb *sandboxState) Host() *Host                              { return sb.p.h }
func (sb *sandboxState) PodMachines() (fsm.PodState, fsm.SandboxState) {
	return sb.p.machineStates()
}
func (c *ctrState) Host() *Host                                   { return c.p.h }
func (c *ctrState) PodMachines() (fsm.PodState, fsm.SandboxState) { return c.p.machineStates() }
func (ps *probeState) Host() *Host                                { return ps.c.p.h }
func (ps *probeState) PodMachines() (fsm.PodState, fsm.SandboxState) {
	return ps.c.p.machineStates()
}

// machineStates is where the pod machine and the sandbox machine are now.
func (s *podState) machineStates() (fsm.PodState, fsm.SandboxState) {
	return s.machine.State(), s.sandbox.machine.State()
}

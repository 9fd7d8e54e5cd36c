package worker

import (
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// Owner is the owner of one machine of a pod as a check sees it
// (observe.CheckStep.Owner).
type Owner interface {
	observe.Owner
	// Host is the host of the owner's worker: one per engine.
	Host() *Host
	// PodMachines is where the pod's pod and sandbox machines are now.
	PodMachines() (fsm.PodState, fsm.SandboxState)
}

// AddCheck adds c after the observers of every machine kind of a pod. It
// must be called before any worker runs; nothing calls it in production.
func AddCheck(c observe.Check) {
	podObservers = append(podObservers, observe.CheckObserver[fsm.PodState, fsm.PodEvent, fsm.PodAction, fsm.PodGuard](c,
		func(s *podState) []fsm.PodEvent { return s.run.Pending() }))
	sandboxObservers = append(sandboxObservers, observe.CheckObserver[fsm.SandboxState, fsm.SandboxEvent, fsm.SandboxAction, fsm.SandboxGuard](c,
		func(sb *sandboxState) []fsm.SandboxEvent { return sb.run.Pending() }))
	ctrObservers = append(ctrObservers, observe.CheckObserver[fsm.ContainerState, fsm.ContainerEvent, fsm.ContainerAction, fsm.ContainerGuard](c,
		func(c *ctrState) []fsm.ContainerEvent { return c.run.Pending() }))
	probeObservers = append(probeObservers, observe.CheckObserver[fsm.ProbeState, fsm.ProbeEvent, fsm.ProbeAction, fsm.ProbeGuard](c,
		func(ps *probeState) []fsm.ProbeEvent { return ps.run.Pending() }))
}

// Each owner is a check's Owner.
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

package worker

import (
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/fsm"
)

// adopt rebuilds the machine from the runtime's instances of this container
// (newest first): a running instance in a ready sandbox keeps running; a dead
// one goes through died so the spec decides about its restart.
//
// A newest instance that was created and never started (speclet died
// between CreateContainer and StartContainer) never ran: as under kubelet
// it has no start time and no exit (its status is waiting, not a
// ContainerStatusUnknown termination), and the next sync starts a new
// instance at once whatever the restart policy (kubelet's
// ShouldContainerBeRestarted restarts a created container; doBackOff finds
// no exited instance), counted one restart more than the created one
// (kubelet's startContainer). The machine resumes in waiting with the
// created instance current, so create_container counts that restart; the
// created instance is an older dead one for container GC.
func (c *ctrState) adopt(cs []*runtimeapi.Container, sandboxOK bool) {
	st := c.Adopt(cs)
	c.machine = fsm.BindContainerMachine(st, c)
	if st != fsm.ContainerStateRunning {
		return
	}
	switch newest := cs[0]; {
	case newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING && sandboxOK:
	case newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		// Its sandbox is gone: the instance must die.
		c.p.adoptEvents = append(c.p.adoptEvents, adoptEvent{c, fsm.ContainerEventSandboxDied})
	default:
		c.p.adoptEvents = append(c.p.adoptEvents, adoptEvent{c, fsm.ContainerEventDied})
	}
}

// adopt takes over what the runtime holds of the pod from a previous run.
//
// A pod with a ready sandbox was synced before the restart: its machine
// resumes in synced (a later kill goes through terminating and honours the
// grace period; a later update syncs it).
func (s *podState) adopt(a *Adopted) {
	s.firstSeen = time.Time{} // it started before the restart: no start to observe
	sb := s.sandbox.adopt(a)
	if sb != nil {
		s.SetStartTime(time.Unix(0, sb.CreatedAt))
		s.machine = fsm.BindPodMachine(fsm.PodStateSynced, s)
		s.w.setPodState(fsm.PodStateSynced)
		s.w.setTimers(podOwner, s.timers(s.h.Clock.Now()))
	}
	ready := s.sandbox.machine.State() == fsm.SandboxStateReady
	for name, cs := range a.Containers {
		c := s.byName(name)
		if c == nil {
			// A container the spec no longer has: keep a machine so it is
			// stopped and removed with the pod.
			c = newCtrState(s, &v1.Container{Name: name}, false, false)
			c.setSpec(nil)
			s.containers = append(s.containers, c)
		}
		c.adopt(cs, cs[0].PodSandboxId == s.sandbox.ID() && ready)
	}
}

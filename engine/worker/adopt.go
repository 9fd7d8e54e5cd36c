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
//
// Except when the pod has no ready sandbox and restartPolicy Never
// (noRerun): kubelet's computePodActions runs no new sandbox for such a pod
// once it has container statuses, and a created instance is one. Whether
// its StartContainer was sent before speclet died, and the pod completed,
// is lost with speclet's memory (a start that failed before it reached the
// runtime leaves the instance created): the machine resumes in running
// and goes through died, as for an exited instance, and record_exit finds
// no exit (ContainerStatusUnknown, 137), so a run-once pod is never run
// twice, and it ends Failed rather than Pending for good.
func (c *ctrState) adopt(cs []*runtimeapi.Container, sandboxOK, noRerun bool) {
	st := c.Adopt(cs, noRerun)
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
	noRerun := !ready && s.pod.Spec.RestartPolicy == v1.RestartPolicyNever
	for name, cs := range a.Containers {
		c := s.byName(name)
		if c == nil {
			// A container the spec no longer has: keep a machine so it is
			// stopped and removed with the pod.
			c = newCtrState(s, &v1.Container{Name: name}, false, false)
			c.setSpec(nil)
			s.containers = append(s.containers, c)
		}
		c.adopt(cs, cs[0].PodSandboxId == s.sandbox.ID() && ready, noRerun)
	}
}

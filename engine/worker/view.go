package worker

import (
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/fsm"
	"github.com/speclet/speclet/spec/podphase"
)

// view collects what the status needs from the machines.
func (s *podState) view() *podView {
	ready := s.sandbox.ready()
	rro := s.runtimeHandler().RecursiveReadOnlyMounts
	v := &podView{
		Pod: s.pod, SandboxReady: ready, PodIP: s.sandbox.PodIP(), HostIP: s.h.NodeIP, StartTime: s.StartTime(),
		Terminating: s.terminating(), RuntimeName: s.h.RuntimeName, Static: config.IsStatic(s.pod),
	}
	if s.pod.Spec.HostNetwork && ready {
		v.PodIP = s.h.NodeIP // a hostNetwork pod has the node's address
	}
	if r := s.w.refusal; r != nil {
		v.Refused = r
	}
	if s.evicted != nil {
		v.Evicted = s.evicted.Message
	}
	v.DeadlineExceeded = s.DeadlineExceeded()
	v.Terminated = s.terminated()
	for _, c := range s.inits {
		if c.spec != nil {
			v.Inits = append(v.Inits, c.view(rro))
		}
	}
	for _, c := range s.containers {
		if c.spec == nil {
			continue
		}
		cv := c.view(rro)
		v.Containers = append(v.Containers, cv)
	}
	for _, c := range s.ephemerals {
		if c.spec != nil {
			v.Ephemerals = append(v.Ephemerals, c.view(rro))
		}
	}
	return v
}

// view is the container's part of the status; rro: the pod's runtime
// handler supports recursive read-only mounts (its volumeMounts'
// recursiveReadOnly).
func (c *ctrState) view(rro bool) containerView {
	cv := containerView{
		Name: c.name, Image: c.spec.Image, ImageID: c.ImageRef(), Init: c.init, Sidecar: c.sidecar,
		ContainerID: c.ID(), StartedAt: c.StartedAt(), RestartCount: c.RestartCount(),
		VolumeMounts: podspec.VolumeMountStatuses(c.spec, rro), User: podstatus.UserOf(c.User()),
	}
	cv.WaitingReason, cv.WaitingMessage = c.Waiting()
	current := c.Current()
	// kubelet's default waiting reason of a container that has no instance
	// yet: PodInitializing in a pod with init containers (for every
	// container, init or regular, before and after initialization),
	// ContainerCreating otherwise.
	creating := podstatus.ReasonContainerCreating
	if len(c.p.pod.Spec.InitContainers) > 0 {
		creating = ReasonPodInitializing
	}
	terminated := func() {
		cv.Phase = phaseTerminated
		cv.Current, cv.Last = current, c.Last()
		if c.final() && c.InstanceCount() < 2 {
			// kubelet builds lastState from the instance before the
			// newest in the runtime: once container GC removed it, a
			// container that runs no more has none.
			cv.Last = nil
		}
		// kubelet's prober manager: an init container (not a sidecar)
		// that completed with exit code 0 is ready.
		cv.Ready = c.init && !c.sidecar && current.ExitCode == 0
	}
	switch c.machine.State() {
	case fsm.ContainerStateRunning, fsm.ContainerStateStopping:
		cv.Phase = phaseRunning
		// A sidecar stays ready while it runs, also while the pod
		// terminates (kubelet: readiness without a probe follows the
		// running state; observed in scenario sidecar-ignores-term).
		// podphase.ContainerReady is the rule the model evaluates too
		// (spec/system.hcl's conditions block).
		cv.Ready = !c.ephemeral && podphase.ContainerReady(podstatus.Kind(c.init, c.sidecar),
			c.machine.State() == fsm.ContainerStateRunning && c.probe.ready(), c.p.terminating())
		cv.Started = c.probe.started()
		if current != nil && current.ContainerID != c.ID() {
			cv.Last = current
		}
	case fsm.ContainerStateExited, fsm.ContainerStateTerminated, fsm.ContainerStateRemoved:
		switch {
		case current != nil:
			terminated()
		case c.machine.State() == fsm.ContainerStateRemoved && c.ID() != "":
			// Removed while it was being stopped, before any exit was
			// recorded (spec/container.hcl: stopping --removed-->
			// removed): kubelet's ContainerStatusUnknown, an unknown exit,
			// so that the phase does not fall back to Pending
			// (spec/system.hcl's phase block: it entered running or stopping,
			// so it ran, or may have).
			// As record_exit would have recorded it.
			cv.Phase = phaseTerminated
			cv.Current = c.UnknownExit(true)
		case cv.WaitingReason == "":
			cv.WaitingReason = creating
		}
	default:
		if current != nil && cv.WaitingReason == "" {
			// Between a death and the next instance (no backoff, no pull
			// error to report) kubelet shows the dead instance: its status
			// is built from the newest container in the runtime.
			terminated()
			break
		}
		cv.Last = current
		if cv.WaitingReason == "" || c.machine.State() == fsm.ContainerStateWaiting && current == nil && cv.WaitingReason != images.ReasonInvalidImageName {
			cv.WaitingReason = creating
		}
	}
	return cv
}

// publishStatus recomputes the status from the machines and publishes a
// copy of the pod carrying it. Phase never goes backwards. A status equal
// to the last one published for the same pod object is not published again:
// the published pod stays (and PublishedPod is not called), only the pod
// machine's state and the machines' history are updated.
func (w *Worker) publishStatus() {
	s := w.st
	if s == nil {
		return
	}
	st := podstatus.Compute(s.lastStatus, s.view(), w.h.Clock.Now())
	var buf [8]history.MachineState // a pod of up to three containers lists them without allocating
	ms := buf[:0]
	ms = append(ms,
		history.MachineState{Machine: fsm.PodMachineName, State: s.machine.State().String(), Since: s.run.Since()},
		history.MachineState{Machine: fsm.SandboxMachineName, State: s.sandbox.machine.State().String(), Since: s.sandbox.run.Since()})
	for _, group := range [...][]*ctrState{s.inits, s.containers, s.ephemerals} {
		for _, c := range group {
			ms = append(ms,
				history.MachineState{Machine: fsm.ContainerMachineName, Instance: c.name, State: c.machine.State().String(), Since: c.run.Since()},
				history.MachineState{Machine: fsm.ProbeMachineName, Instance: c.name, State: c.probe.machine.State().String(), Since: c.probe.run.Since()})
		}
	}
	s.noteRunning()
	w.hist.SetMachines(ms) // copies ms
	if s.pubFrom == s.pod && s.lastStatus != nil && podstatus.Equal(&st, s.lastStatus) {
		w.mu.Lock()
		w.pubState = s.machine.State()
		w.mu.Unlock()
		return
	}
	s.lastStatus, s.pubFrom = &st, s.pod // the published status is read-only
	w.publish(s.pod, &st, s.machine.State())
}

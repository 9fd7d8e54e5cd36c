package engine

import (
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/fsm"
)

// view collects what the status needs from the machines.
func (s *podState) view() *podView {
	ready := s.sandbox.ready()
	v := &podView{
		Pod: s.pod, SandboxReady: ready, PodIP: s.sandbox.podIP, HostIP: s.e.cfg.NodeIP, StartTime: s.startTime,
		Terminating: s.terminating(), RuntimeName: s.e.runtimeName,
	}
	if s.pod.Spec.HostNetwork && ready {
		v.PodIP = s.e.cfg.NodeIP // a hostNetwork pod has the node's address
	}
	st := s.machine.State()
	v.Terminated = st == fsm.PodStateTerminated || st == fsm.PodStateFinished
	initsDone := s.initialized()
	for _, c := range s.inits {
		if c.spec != nil {
			v.Inits = append(v.Inits, c.view(true))
		}
	}
	for _, c := range s.containers {
		if c.spec == nil {
			continue
		}
		cv := c.view(initsDone)
		v.Containers = append(v.Containers, cv)
	}
	return v
}

func (c *ctrState) view(initsDone bool) containerView {
	cv := containerView{
		Name: c.name, Image: c.spec.Image, ImageID: c.imageRef, Init: c.init, Sidecar: c.sidecar,
		ContainerID: c.id, StartedAt: c.startedAt, RestartCount: c.restartCount,
		WaitingReason: c.waitingReason, WaitingMessage: c.waitingMessage,
	}
	switch c.machine.State() {
	case fsm.ContainerStateRunning, fsm.ContainerStateStopping:
		cv.Phase = phaseRunning
		cv.Ready = c.machine.State() == fsm.ContainerStateRunning && !c.p.terminating() && (!c.init || c.sidecar) &&
			c.probe.ready()
		cv.Started = c.probe.started()
		if c.current != nil && c.current.ContainerID != c.id {
			cv.Last = c.current
		}
	case fsm.ContainerStateExited, fsm.ContainerStateTerminated, fsm.ContainerStateRemoved:
		if c.current != nil {
			cv.Phase = phaseTerminated
			cv.Current, cv.Last = c.current, c.last
		} else if cv.WaitingReason == "" {
			cv.WaitingReason = ReasonContainerCreating
			if !initsDone && !c.init {
				cv.WaitingReason = ReasonPodInitializing
			}
		}
	default:
		cv.Last = c.current
		if cv.WaitingReason == "" || c.machine.State() == fsm.ContainerStateWaiting && c.current == nil {
			switch {
			case !initsDone && !c.init:
				cv.WaitingReason = ReasonPodInitializing
			case cv.WaitingReason == "":
				cv.WaitingReason = ReasonContainerCreating
			}
		}
	}
	return cv
}

// publishStatus recomputes the status from the machines and publishes a
// copy of the pod carrying it. Phase never goes backwards.
func (w *podWorker) publishStatus() {
	s := w.st
	if s == nil {
		return
	}
	st := computeStatus(s.lastStatus, s.view(), w.e.clock.Now())
	s.lastStatus = &st
	p := &v1.Pod{TypeMeta: s.pod.TypeMeta, ObjectMeta: s.pod.ObjectMeta, Spec: s.pod.Spec, Status: st}
	p.Spec.NodeName = w.e.cfg.NodeName
	w.publish(p)
}

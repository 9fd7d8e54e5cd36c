package worker

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/containers"
	"github.com/speclet/speclet/fsm"
)

// Event types.
const (
	eventNormal  = v1.EventTypeNormal
	eventWarning = v1.EventTypeWarning
)

// Every event is recorded from a spec action (the action that met the
// outcome: check_image, refuse_never_pull, refuse_image, pull_image,
// show_backoff, create_container, start_container, stop_container's
// preStop, run_sandbox, the probe result routing) or from a transition
// (the observers below, registered in observe.go); never from a side path.

// event records an event about the pod.
func (p *podState) event(eventType, reason, format string, args ...any) {
	if r := p.h.Events; r != nil {
		r.Event(p.pod, "", eventType, reason, fmt.Sprintf(format, args...))
	}
}

// event records an event about the container.
func (c *ctrState) event(eventType, reason, format string, args ...any) {
	r := c.p.h.Events
	if r == nil {
		return
	}
	field := "spec.containers{" + c.name + "}"
	if c.init {
		field = "spec.initContainers{" + c.name + "}"
	}
	r.Event(c.p.pod, field, eventType, reason, fmt.Sprintf(format, args...))
}

// recordContainerEvent records the event a container step itself means:
// the container is being stopped, or waits in CrashLoopBackOff. (The
// image pull backoff's BackOff is show_backoff's: kubelet records it when
// a sync finds the pull backing off, with the status ImagePullBackOff.)
func recordContainerEvent(_ context.Context, st *ctrStep) {
	c := st.Owner
	if c.p.h.Events == nil || c.spec == nil || st.From == st.To {
		return
	}
	switch st.To {
	case fsm.ContainerStateStopping:
		c.event(eventNormal, "Killing", "Stopping container %s", c.name)
	case fsm.ContainerStateCrashloopBackoff:
		if reason, _ := c.Waiting(); c.Crashloop() <= 0 || reason == containers.ReasonCreateContainerConfig {
			// The first restart is immediate: no back-off. A config
			// that cannot be built shows its own reason (kubelet backs
			// off only after an exit).
			return
		}
		c.event(eventWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)", c.name, c.p.pod.Name, c.p.pod.Namespace, c.p.pod.UID)
	}
}

// recordSandboxEvent records that the sandbox is recreated after it died.
func recordSandboxEvent(_ context.Context, st *sandboxStep) {
	if st.From == fsm.SandboxStateDead && st.To == fsm.SandboxStateCreating {
		st.Owner.p.event(eventNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
	}
}

// recordPodEvent records an admission refusal: pending -update
// [admission_refused]-> terminated is kubelet's rejectPod, a Warning event
// of the pod with the refusal's reason.
func recordPodEvent(_ context.Context, st *podStep) {
	s := st.Owner
	if r := s.w.refusal; r != nil && st.From == fsm.PodStatePending && st.To == fsm.PodStateTerminated {
		s.event(eventWarning, r.Reason, "%s", r.Message)
	}
}

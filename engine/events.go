package engine

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/fsm"
)

// EventRecorder receives the pod events kubelet records, with kubelet's
// reasons (Pulling, Pulled, Failed, BackOff, Created, Started, Killing,
// Unhealthy, FailedPostStartHook, FailedPreStopHook, FailedCreatePodSandBox,
// SandboxChanged, ErrImageNeverPull, ProbeWarning, and an admission
// refusal's reason: OutOfcpu, NodePorts, ...). fieldPath names the
// container (spec.containers{name}, spec.initContainers{name}) or is "" for
// the pod. It must not block: the API recorder queues and rate-limits.
type EventRecorder interface {
	Event(pod *v1.Pod, fieldPath, eventType, reason, message string)
}

// NodeEventRecorder receives the events kubelet records about the node
// itself (involvedObject the Node, as kubelet's nodeRef: kind Node, name
// and uid the node name): the eviction manager's EvictionThresholdMet,
// the node status's condition transitions (NodeHasSufficientMemory, ...)
// and SystemOOM. It must not block.
type NodeEventRecorder interface {
	NodeEvent(eventType, reason, message string)
}

// Event types.
const (
	eventNormal  = v1.EventTypeNormal
	eventWarning = v1.EventTypeWarning
)

// Every event is recorded from a spec action (the action that met the
// outcome: pull_image, create_container, start_container, stop_container's
// preStop, run_sandbox, the probe result routing) or from a transition
// (recordLifecycle below); never from a side path.

// nodeEvent records an event about the node.
func (e *Engine) nodeEvent(eventType, reason, format string, args ...any) {
	if r := e.cfg.NodeEvents; r != nil {
		r.NodeEvent(eventType, reason, fmt.Sprintf(format, args...))
	}
}

// event records an event about the pod.
func (p *podState) event(eventType, reason, format string, args ...any) {
	if r := p.e.cfg.Events; r != nil {
		r.Event(p.pod, "", eventType, reason, fmt.Sprintf(format, args...))
	}
}

// event records an event about the container.
func (c *ctrState) event(eventType, reason, format string, args ...any) {
	r := c.p.e.cfg.Events
	if r == nil {
		return
	}
	field := "spec.containers{" + c.name + "}"
	if c.init {
		field = "spec.initContainers{" + c.name + "}"
	}
	r.Event(c.p.pod, field, eventType, reason, fmt.Sprintf(format, args...))
}

// recordLifecycle is fire.go's hook beside logLifecycle: the events a
// transition itself means (the container is being stopped, waits in a
// backoff; the sandbox is recreated).
func (w *podWorker) recordLifecycle(machine, from, event, to string, who []any) {
	if w.e.cfg.Events == nil || w.st == nil || from == to {
		return
	}
	switch machine {
	case fsm.ContainerMachineName:
		c := w.container(who)
		if c == nil || c.spec == nil {
			return
		}
		switch to {
		case fsm.ContainerStateStopping.String():
			c.event(eventNormal, "Killing", "Stopping container %s", c.name)
		case fsm.ContainerStateCrashloopBackoff.String():
			if c.Crashloop() <= 0 || c.waitingReason == ReasonCreateContainerConfig {
				// The first restart is immediate: no back-off. A
				// config that cannot be built shows its own reason
				// (kubelet backs off only after an exit).
				return
			}
			c.event(eventWarning, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)", c.name, c.p.pod.Name, c.p.pod.Namespace, c.p.pod.UID)
		case fsm.ContainerStatePullBackoff.String():
			c.event(eventNormal, "BackOff", "Back-off pulling image %q", c.spec.Image)
		}
	case fsm.SandboxMachineName:
		if from == fsm.SandboxStateDead.String() && to == fsm.SandboxStateCreating.String() {
			w.st.event(eventNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		}
	case fsm.PodMachineName:
		// pending -update [admission_refused]-> terminated: kubelet's
		// rejectPod records the refusal as a Warning event of the pod.
		if r := w.refusal; r != nil && from == fsm.PodStatePending.String() && to == fsm.PodStateTerminated.String() {
			w.st.event(eventWarning, r.Reason, "%s", r.Message)
		}
	}
}

package worker

import (
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/admission"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

// Adopted is what the runtime still holds of a pod speclet started
// before it restarted (engine/runtimepods groups it from the labels).
type Adopted = runtimepods.Pod

// Refusal is why a pod was refused admission (engine/admission).
type Refusal = admission.Refusal

// The owners of a pod's machines: a podState, sandboxState
// (engine/sandbox), ctrState (engine/containers, and engine/images for the
// image actions) or probeState (engine/probes). Each implements its
// machine's guards and actions (fsm.<Machine>Impl), itself or through the
// packages it embeds, and is a Check's Owner. Every machine goes through
// engine/fire's one fire loop; observe.go registers the observers of each
// kind.
var _ = [...]Owner{(*podState)(nil), (*sandboxState)(nil), (*ctrState)(nil), (*probeState)(nil)}

// The status the worker publishes is engine/podstatus's, computed from
// the views view.go reads from the machines.
type (
	termination   = podstatus.Termination
	containerView = podstatus.Container
	podView       = podstatus.View
)

const (
	phaseWaiting    = podstatus.Waiting
	phaseRunning    = podstatus.Running
	phaseTerminated = podstatus.Terminated
)

// FullName is kubelet's pod full name, the key of static pod exclusivity.
func FullName(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace
}

// Stopped: the pod machine's state s is terminated or finished (nothing
// of the pod runs, and it will not run again).
func Stopped(s fsm.PodState) bool {
	return s == fsm.PodStateTerminated || s == fsm.PodStateFinished
}

// ReasonPodInitializing is the waiting reason of a regular container while
// the pod's init containers run, kubelet's word.
const ReasonPodInitializing = "PodInitializing"

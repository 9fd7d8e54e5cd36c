package engine

import (
	"github.com/speclet/speclet/engine/containers"
	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/engine/pods"
	"github.com/speclet/speclet/engine/podstatus"
)

// Image pull and container creation reasons, kubelet's words (they appear in
// container statuses as waiting reasons).
const (
	ReasonErrImagePull      = images.ReasonErrImagePull
	ReasonImagePullBackOff  = containers.ReasonImagePullBackOff
	ReasonErrImageNeverPull = images.ReasonErrImageNeverPull
	ReasonInvalidImageName  = images.ReasonInvalidImageName
	ReasonCreateContainer   = containers.ReasonCreateContainer
	ReasonRunContainer      = containers.ReasonRunContainer
	ReasonCrashLoopBackOff  = containers.ReasonCrashLoopBackOff
	ReasonContainerCreating = podstatus.ReasonContainerCreating

	// ReasonCreateContainerConfig: the container's config could not be
	// built (runAsNonRoot with a root user, a missing configMap, secret or
	// key of its environment); no runtime call was made.
	ReasonCreateContainerConfig = containers.ReasonCreateContainerConfig
	// ReasonPostStartHookError: the container's postStart hook failed.
	ReasonPostStartHookError = containers.ReasonPostStartHookError
	// ReasonEvicted is the reason of a pod the eviction manager evicted.
	ReasonEvicted = podstatus.ReasonEvicted
	// ReasonFailedMount: a volume of the pod could not be set up.
	ReasonFailedMount     = pods.ReasonFailedMount
	ReasonPodInitializing = "PodInitializing"
	ReasonCompleted       = podstatus.ReasonCompleted
	ReasonError           = podstatus.ReasonError
	// ReasonContainerStatusUnknown: the exit of an instance that ran is
	// unknown (exit code 137).
	ReasonContainerStatusUnknown = containers.ReasonContainerStatusUnknown
)

// The status the engine publishes is engine/podstatus's, computed from
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

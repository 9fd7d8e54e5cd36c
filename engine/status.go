package engine

import (
	"github.com/speclet/speclet/engine/containers"
	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/engine/pods"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/engine/worker"
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
	ReasonPodInitializing = worker.ReasonPodInitializing
	ReasonCompleted       = podstatus.ReasonCompleted
	ReasonError           = podstatus.ReasonError
	// ReasonContainerStatusUnknown: the exit of an instance that ran is
	// unknown (exit code 137).
	ReasonContainerStatusUnknown = containers.ReasonContainerStatusUnknown
)

// ReasonImageInspectError is kubelet's waiting reason when ImageStatus
// failed (images.ErrImageInspect).
const ReasonImageInspectError = images.ReasonImageInspectError

// Reason and message of a pod that ran past its activeDeadlineSeconds
// (kubelet's active deadline handler).
const (
	ReasonDeadlineExceeded  = podstatus.ReasonDeadlineExceeded
	MessageDeadlineExceeded = podstatus.MessageDeadlineExceeded
)

// Bounds on what speclet writes to the runtime (engine/worker's requests):
// every CRI list reply fits the 16 MiB gRPC message limit.
const (
	MaxRuntimeAnnotationBytes = worker.MaxRuntimeAnnotationBytes
	MaxSandboxRecordBytes     = worker.MaxSandboxRecordBytes
	MaxContainerRecordBytes   = worker.MaxContainerRecordBytes
)

// Package images is the container machine's image guards and actions
// (spec/container.hcl: checking_image, pulling, pull_backoff): kubelet's
// EnsureImageExists (pkg/kubelet/images/image_manager.go, v1.34) with its
// decisions on the graph. The pull policy is the guards pull_always and
// pull_never; the actions only call the runtime and report what it
// answered, with kubelet's events, waiting reasons and messages. The
// engine owns the container machine and binds it to a Puller for these,
// with the container as its Container.
//
// Contracts:
//   - Only the pod's worker goroutine calls a Puller, while the container
//     has a spec; a Puller keeps nothing but its Container.
//   - Each action reports its outcome as the event it raises through
//     Container.Raise, and shows a failure as the container's waiting
//     reason and message (Container.SetWaiting).
package images

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/fsm"
)

// kubelet's waiting reasons of a container whose image is not there
// (they appear in container statuses).
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonInvalidImageName  = "InvalidImageName"
	// ReasonImageInspectError: ImageStatus failed
	// (images.ErrImageInspect).
	ReasonImageInspectError = "ImageInspectError"
)

// Container is what a Puller reads of its container and pod, and how it
// reports.
type Container interface {
	// Name is the container's name.
	Name() string
	// Spec is the container's current spec.
	Spec() *v1.Container
	// Pod is the container's pod (its namespace and imagePullSecrets).
	Pod() *v1.Pod
	// Key is the pod's namespace/name, for logs.
	Key() string
	// Runtime runs the actions' CRI calls.
	Runtime() cri.Runtime
	// Now is the engine's clock.
	Now() time.Time
	// Logger is where failures are logged.
	Logger() *slog.Logger
	// Secrets reads the pod's pull secrets, or is nil without an API
	// server.
	Secrets() Secrets
	// SandboxConfig is the pod's sandbox config, which a pull takes.
	SandboxConfig() *runtimeapi.PodSandboxConfig
	// Waiting is the container's waiting reason and message;
	// SetWaiting shows a failure as them.
	Waiting() (reason, message string)
	SetWaiting(reason, message string)
	// SetImageRef records the image's ID, the container's image
	// reference.
	SetImageRef(ref string)
	// Event records a Kubernetes event about the container, PodEvent one
	// about its pod, with the message format formats with args; neither
	// formats it when no one records events.
	Event(eventType, reason, format string, args ...any)
	PodEvent(eventType, reason, format string, args ...any)
	// Raise reports an action's outcome to the container machine.
	Raise(ev fsm.ContainerEvent)
	// Pulled counts a pull that took d (the metrics, the pod's pull time).
	Pulled(d time.Duration)
	// PullBackoff advances the container's image pull backoff, or
	// resets it after a pull.
	PullBackoff(reset bool)
}

// Secrets reads secrets from the API server.
type Secrets interface {
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// Puller is the container machine's image guards and actions for one
// container (fsm.ContainerGuards and fsm.ContainerActions in part). The
// zero value has no container; Bind gives it one.
type Puller struct {
	c Container
}

// Bind gives p its container.
func (p *Puller) Bind(c Container) { p.c = c }

// PullAlways: the container's effective imagePullPolicy is Always
// (podspec.PullPolicy: declared, or defaulted from the image's tag); the
// image is pulled without ImageStatus first.
func (p *Puller) PullAlways() bool {
	spec := p.c.Spec()
	return spec != nil && podspec.PullPolicy(spec) == v1.PullAlways
}

// PullNever: the container's imagePullPolicy is Never; a missing image is
// ErrImageNeverPull, never pulled.
func (p *Puller) PullNever() bool {
	spec := p.c.Spec()
	return spec != nil && podspec.PullPolicy(spec) == v1.PullNever
}

// The container machine's image actions (spec/container.hcl:
// checking_image, pulling, pull_backoff): kubelet's EnsureImageExists
// (pkg/kubelet/images/image_manager.go, v1.34) with its decisions on the
// graph. The pull policy is the guards pull_always and pull_never; the
// actions only call the runtime and report what it answered, with
// kubelet's events, waiting reasons and messages.

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/fsm"
)

// ReasonImageInspectError is kubelet's waiting reason when ImageStatus
// failed (images.ErrImageInspect).
const ReasonImageInspectError = "ImageInspectError"

// PullAlways: the container's effective imagePullPolicy is Always
// (podspec.PullPolicy: declared, or defaulted from the image's tag); the
// image is pulled without ImageStatus first.
func (c *ctrState) PullAlways() bool {
	return c.spec != nil && podspec.PullPolicy(c.spec) == v1.PullAlways
}

// PullNever: the container's imagePullPolicy is Never; a missing image is
// ErrImageNeverPull, never pulled.
func (c *ctrState) PullNever() bool {
	return c.spec != nil && podspec.PullPolicy(c.spec) == v1.PullNever
}

// CheckImage asks the runtime for the container's image (ImageStatus) and
// raises image_present, image_missing or image_check_failed. A present
// image's ID becomes the container's image reference, with kubelet's
// Pulled event "already present on machine". A failed ImageStatus is
// kubelet's ImageInspectError with its warning events InspectFailed and
// Failed "Error: ImageInspectError" (kubelet's message quotes the image
// reference it did not get, ""; this one quotes the image asked for).
func (c *ctrState) CheckImage(ctx context.Context) error {
	return op.Exec(ctx, c.p.e.rt, c.checkImage())
}

func (c *ctrState) checkImage() op.Op {
	return op.ImageStatus(&runtimeapi.ImageSpec{Image: c.spec.Image}, func(img *runtimeapi.Image, err error) op.Op {
		switch {
		case err != nil:
			c.waitingReason = ReasonImageInspectError
			c.waitingMessage = fmt.Sprintf("Failed to inspect image %q: %s", c.spec.Image, cri.RuntimeMessage(err))
			c.event(eventWarning, "InspectFailed", "%s", c.waitingMessage)
			c.failedEvent()
			c.raise(fsm.ContainerEventImageCheckFailed)
			return op.Done(fmt.Errorf("container %q: image status %q: %w", c.name, c.spec.Image, err))
		case img == nil || img.Id == "":
			c.raise(fsm.ContainerEventImageMissing)
		default:
			c.imageRef = img.Id
			c.event(eventNormal, "Pulled", "Container image %q already present on machine", c.spec.Image)
			c.raise(fsm.ContainerEventImagePresent)
		}
		return op.Done(nil)
	})
}

// RefuseNeverPull reports ErrImageNeverPull with kubelet's message and
// warning events ErrImageNeverPull and Failed "Error: ErrImageNeverPull":
// the image is missing and the pull policy is Never.
func (c *ctrState) RefuseNeverPull(context.Context) error {
	c.waitingReason = ReasonErrImageNeverPull
	c.waitingMessage = fmt.Sprintf("Container image %q is not present with pull policy of Never", c.spec.Image)
	c.event(eventWarning, ReasonErrImageNeverPull, "%s", c.waitingMessage)
	c.failedEvent()
	return nil
}

// PullImage pulls the container's image with the pod's pull credentials
// (Pulling, then kubelet's Pulled "Successfully pulled image ... in D (D
// including waiting). Image size: N bytes." or pullFailed's events) and
// records its ID; raises pull_ok or pull_failed (ErrImagePull). speclet
// has no queue of pulls (kubelet's serial puller, its default, waits for
// the pulls before; the second D counts that wait): D is the pull's time,
// the size's ImageStatus included, twice.
func (c *ctrState) PullImage(ctx context.Context) error {
	return op.Exec(ctx, c.p.e.rt, c.pullImage())
}

// pullImage reads the pull's inputs, then pulls without credentials when
// the pod has none, else with each in turn until one succeeds (kubelet's
// order); the error lists every attempt's. The pulled image's size is read
// after (ImageStatus), best effort: 0 when that fails.
func (c *ctrState) pullImage() op.Op {
	t0 := c.p.e.clock.Now()
	c.event(eventNormal, "Pulling", "Pulling image %q", c.spec.Image)
	image := &runtimeapi.ImageSpec{Image: c.spec.Image}
	return op.Host("PullInputs", c.spec.Image, func(ctx context.Context) (pullInputs, error) {
		return pullInputs{c.pullCredentials(ctx), c.p.sandbox.Config()}, nil
	}, func(in pullInputs, _ error) op.Op {
		auths := in.auths
		if len(auths) == 0 {
			auths = []*runtimeapi.AuthConfig{nil}
		}
		var errs []error
		var try func(i int) op.Op
		try = func(i int) op.Op {
			return op.PullImage(image, auths[i], in.sandbox, func(ref string, err error) op.Op {
				if err == nil {
					return c.pulled(t0, ref)
				}
				if errs = append(errs, err); i+1 < len(auths) {
					return try(i + 1)
				}
				err = fmt.Errorf("pull image %q: %w", c.spec.Image, errors.Join(errs...))
				c.pullFailed(err)
				c.raise(fsm.ContainerEventPullFailed)
				return op.Done(err)
			})
		}
		return try(0)
	})
}

// pullInputs are what a pull reads first: the pod's pull credentials and
// its sandbox's config.
type pullInputs struct {
	auths   []*runtimeapi.AuthConfig
	sandbox *runtimeapi.PodSandboxConfig
}

// pulled records the image pulled as ref (a pull begun at t0), reads its
// size and raises pull_ok.
func (c *ctrState) pulled(t0 time.Time, ref string) op.Op {
	d := c.p.e.clock.Since(t0)
	c.p.e.metrics.ImagePulled(d)
	c.p.w.mu.Lock()
	c.p.pullTime += d
	c.p.w.mu.Unlock()
	c.imageRef = ref
	return op.ImageStatus(&runtimeapi.ImageSpec{Image: c.spec.Image}, func(img *runtimeapi.Image, err error) op.Op {
		var size uint64
		if err == nil && img != nil {
			size = img.Size
		}
		total := c.p.e.clock.Since(t0).Truncate(time.Millisecond)
		c.event(eventNormal, "Pulled", "Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.", c.spec.Image, total, total, size)
		c.p.e.pullBackoff.Reset(c.backoffKey())
		c.raise(fsm.ContainerEventPullOk)
		return op.Done(nil)
	})
}

// pullFailed shows a failed pull as kubelet's EnsureImageExists and
// startContainer do (v1.34 images.pullImage, evalCRIPullErr): the waiting
// reason ErrImagePull with the runtime's message as kubelet's CRI client
// gives it (cri.RuntimeMessage), the warning events Failed "Failed to pull
// image ..." and Failed "Error: ErrImagePull"; the ImagePullBackOff
// message appends this reason and message (show_backoff).
func (c *ctrState) pullFailed(err error) {
	msg := cri.RuntimeMessage(err)
	c.waitingReason, c.waitingMessage = ReasonErrImagePull, msg
	c.event(eventWarning, "Failed", "Failed to pull image %q: %s", c.spec.Image, msg)
	c.failedEvent()
}

// failedEvent is kubelet's startContainer warning Failed "Error: REASON"
// for a start that ended before CreateContainer with the waiting reason
// set (ErrImagePull, ImagePullBackOff, ErrImageNeverPull,
// InvalidImageName, ImageInspectError).
func (c *ctrState) failedEvent() {
	c.event(eventWarning, "Failed", "Error: %s", c.waitingReason)
}

// pullCredentials are the credentials of the pod's imagePullSecrets for
// its image (engine/podspec.PullCredentials). A secret that cannot be read
// is left out with kubelet's FailedToRetrieveImagePullSecret event, and
// the pull goes on with the others (or none), as under kubelet.
func (c *ctrState) pullCredentials(ctx context.Context) []*runtimeapi.AuthConfig {
	refs := c.p.pod.Spec.ImagePullSecrets
	if len(refs) == 0 {
		return nil
	}
	var secrets []*v1.Secret
	var failed []string
	for _, ref := range refs {
		if ref.Name == "" {
			continue
		}
		api := c.p.e.cfg.VolumeAPI
		if api == nil {
			failed = append(failed, ref.Name)
			continue
		}
		s, err := api.GetSecret(ctx, c.p.pod.Namespace, ref.Name)
		if err != nil {
			c.p.e.log.Info("Unable to retrieve pull secret, the image pull may not succeed", "pod", c.p.key(), "secret", ref.Name, "err", err)
			failed = append(failed, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	if len(failed) > 0 {
		c.p.event(eventWarning, "FailedToRetrieveImagePullSecret", "Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(failed, ", "))
	}
	auths, err := podspec.PullCredentials(c.spec.Image, secrets)
	if err != nil {
		c.p.e.log.Warn("image pull secrets", "pod", c.p.key(), "err", err)
		c.p.event(eventWarning, "FailedToRetrieveImagePullSecret", "%v", err)
		return nil
	}
	return auths
}

// RefuseImage reports InvalidImageName with kubelet's message, and its
// warning events InspectFailed and Failed "Error: InvalidImageName" when
// the reason is new (kubelet records both at each sync; the event recorder
// folds the repeats).
func (c *ctrState) RefuseImage(context.Context) error {
	err := podspec.ImageNameError(c.spec.Image)
	if err == nil {
		return nil
	}
	if c.waitingReason == ReasonInvalidImageName && c.waitingMessage == err.Error() {
		return nil
	}
	c.waitingReason, c.waitingMessage = ReasonInvalidImageName, err.Error()
	c.event(eventWarning, "InspectFailed", "%s", c.waitingMessage)
	c.failedEvent()
	return nil
}

// CountPullFailure advances the image pull backoff.
func (c *ctrState) CountPullFailure(context.Context) error {
	c.p.e.pullBackoff.Next(c.backoffKey())
	return nil
}

package images

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

// CheckImage asks the runtime for the container's image (ImageStatus) and
// raises image_present, image_missing or image_check_failed. A present
// image's ID becomes the container's image reference, with kubelet's
// Pulled event "already present on machine". A failed ImageStatus is
// kubelet's ImageInspectError with its warning events InspectFailed and
// Failed "Error: ImageInspectError" (kubelet's message quotes the image
// reference it did not get, ""; this one quotes the image asked for).
func (p *Puller) CheckImage() op.Op {
	c, image := p.c, p.c.Spec().Image
	return op.ImageStatus(&runtimeapi.ImageSpec{Image: image}, func(img *runtimeapi.Image, err error) op.Op {
		switch {
		case err != nil:
			msg := fmt.Sprintf("Failed to inspect image %q: %s", image, cri.RuntimeMessage(err))
			c.SetWaiting(ReasonImageInspectError, msg)
			c.Event(v1.EventTypeWarning, "InspectFailed", "%s", msg)
			p.failedEvent()
			c.Raise(fsm.ContainerEventImageCheckFailed)
			return op.Done(fmt.Errorf("container %q: image status %q: %w", c.Name(), image, err))
		case img == nil || img.Id == "":
			c.Raise(fsm.ContainerEventImageMissing)
		default:
			c.SetImageRef(img.Id)
			c.Event(v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
			c.Raise(fsm.ContainerEventImagePresent)
		}
		return op.Done(nil)
	})
}

// RefuseNeverPull reports ErrImageNeverPull with kubelet's message and
// warning events ErrImageNeverPull and Failed "Error: ErrImageNeverPull":
// the image is missing and the pull policy is Never.
func (p *Puller) RefuseNeverPull() op.Op {
	msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", p.c.Spec().Image)
	p.c.SetWaiting(ReasonErrImageNeverPull, msg)
	p.c.Event(v1.EventTypeWarning, ReasonErrImageNeverPull, "%s", msg)
	p.failedEvent()
	return op.Done(nil)
}

// PullImage pulls the container's image with the pod's pull credentials
// (Pulling, then kubelet's Pulled "Successfully pulled image ... in D (D
// including waiting). Image size: N bytes." or pullFailed's events) and
// records its ID; raises pull_ok or pull_failed (ErrImagePull). speclet
// has no queue of pulls (kubelet's serial puller, its default, waits for
// the pulls before; the second D counts that wait): D is the pull's time,
// the size's ImageStatus included, twice.
//
// It reads the pull's inputs, then pulls without credentials when the pod
// has none, else with each in turn until one succeeds (kubelet's order);
// the error lists every attempt's. The pulled image's size is read after
// (ImageStatus), best effort: 0 when that fails.
func (p *Puller) PullImage() op.Op {
	c := p.c
	t0, ref := c.Now(), c.Spec().Image
	c.Event(v1.EventTypeNormal, "Pulling", "Pulling image %q", ref)
	image := &runtimeapi.ImageSpec{Image: ref}
	return op.Host("PullInputs", ref, func(ctx context.Context) (PullInputs, error) {
		return PullInputs{p.credentials(ctx, ref), c.SandboxConfig()}, nil
	}, func(in PullInputs, _ error) op.Op {
		auths := in.Auths
		if len(auths) == 0 {
			auths = []*runtimeapi.AuthConfig{nil}
		}
		var errs []error
		var try func(i int) op.Op
		try = func(i int) op.Op {
			return op.PullImage(image, auths[i], in.Sandbox, func(id string, err error) op.Op {
				if err == nil {
					return p.pulled(t0, ref, id)
				}
				if errs = append(errs, err); i+1 < len(auths) {
					return try(i + 1)
				}
				err = fmt.Errorf("pull image %q: %w", ref, errors.Join(errs...))
				p.pullFailed(ref, err)
				c.Raise(fsm.ContainerEventPullFailed)
				return op.Done(err)
			})
		}
		return try(0)
	})
}

// PullInputs are what a pull reads first (the host step PullInputs): the
// pod's pull credentials for the image and its sandbox's config.
type PullInputs struct {
	Auths   []*runtimeapi.AuthConfig
	Sandbox *runtimeapi.PodSandboxConfig
}

// pulled records the image ref pulled as id (a pull begun at t0), reads
// its size and raises pull_ok.
func (p *Puller) pulled(t0 time.Time, ref, id string) op.Op {
	c := p.c
	c.Pulled(c.Now().Sub(t0))
	c.SetImageRef(id)
	return op.ImageStatus(&runtimeapi.ImageSpec{Image: ref}, func(img *runtimeapi.Image, err error) op.Op {
		var size uint64
		if err == nil && img != nil {
			size = img.Size
		}
		total := c.Now().Sub(t0).Truncate(time.Millisecond)
		c.Event(v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.", ref, total, total, size)
		c.PullBackoff(true)
		c.Raise(fsm.ContainerEventPullOk)
		return op.Done(nil)
	})
}

// pullFailed shows a failed pull of ref as kubelet's EnsureImageExists and
// startContainer do (v1.34 images.pullImage, evalCRIPullErr): the waiting
// reason ErrImagePull with the runtime's message as kubelet's CRI client
// gives it (cri.RuntimeMessage), the warning events Failed "Failed to pull
// image ..." and Failed "Error: ErrImagePull"; the ImagePullBackOff
// message appends this reason and message (show_backoff).
func (p *Puller) pullFailed(ref string, err error) {
	msg := cri.RuntimeMessage(err)
	p.c.SetWaiting(ReasonErrImagePull, msg)
	p.c.Event(v1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", ref, msg)
	p.failedEvent()
}

// failedEvent is kubelet's startContainer warning Failed "Error: REASON"
// for a start that ended before CreateContainer with the waiting reason
// set (ErrImagePull, ImagePullBackOff, ErrImageNeverPull,
// InvalidImageName, ImageInspectError).
func (p *Puller) failedEvent() {
	reason, _ := p.c.Waiting()
	p.c.Event(v1.EventTypeWarning, "Failed", "Error: %s", reason)
}

// credentials are the credentials of the pod's imagePullSecrets for
// image (engine/podspec.PullCredentials). A secret that cannot be read is
// left out with kubelet's FailedToRetrieveImagePullSecret event, and the
// pull goes on with the others (or none), as under kubelet.
func (p *Puller) credentials(ctx context.Context, image string) []*runtimeapi.AuthConfig {
	c := p.c
	pod := c.Pod()
	refs := pod.Spec.ImagePullSecrets
	if len(refs) == 0 {
		return nil
	}
	var secrets []*v1.Secret
	var failed []string
	api := c.Secrets()
	for _, ref := range refs {
		if ref.Name == "" {
			continue
		}
		if api == nil {
			failed = append(failed, ref.Name)
			continue
		}
		s, err := api.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			c.Logger().Info("Unable to retrieve pull secret, the image pull may not succeed", "pod", c.Key(), "secret", ref.Name, "err", err)
			failed = append(failed, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	if len(failed) > 0 {
		c.PodEvent(v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(failed, ", "))
	}
	auths, err := podspec.PullCredentials(image, secrets)
	if err != nil {
		c.Logger().Warn("image pull secrets", "pod", c.Key(), "err", err)
		c.PodEvent(v1.EventTypeWarning, "FailedToRetrieveImagePullSecret", "%v", err)
		return nil
	}
	return auths
}

// RefuseImage reports InvalidImageName with kubelet's message, and its
// warning events InspectFailed and Failed "Error: InvalidImageName" when
// the reason is new (kubelet records both at each sync; the event recorder
// folds the repeats).
func (p *Puller) RefuseImage() op.Op {
	err := podspec.ImageNameError(p.c.Spec().Image)
	if err == nil {
		return op.Done(nil)
	}
	if reason, msg := p.c.Waiting(); reason == ReasonInvalidImageName && msg == err.Error() {
		return op.Done(nil)
	}
	p.c.SetWaiting(ReasonInvalidImageName, err.Error())
	p.c.Event(v1.EventTypeWarning, "InspectFailed", "%s", err)
	p.failedEvent()
	return op.Done(nil)
}

// CountPullFailure advances the image pull backoff.
func (p *Puller) CountPullFailure() op.Op {
	p.c.PullBackoff(false)
	return op.Done(nil)
}

package engine

import (
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/fsm"
)

// The container machine's image guards and actions (pull_always,
// pull_never, check_image, refuse_never_pull, pull_image, refuse_image,
// count_pull_failure) are engine/images' Puller, which ctrState embeds;
// this file is what the Puller reads of the container and tells it
// (images.Container).

// ReasonImageInspectError is kubelet's waiting reason when ImageStatus
// failed (images.ErrImageInspect).
const ReasonImageInspectError = images.ReasonImageInspectError

var _ images.Container = (*ctrState)(nil)

func (c *ctrState) Name() string                                { return c.name }
func (c *ctrState) Spec() *v1.Container                         { return c.spec }
func (c *ctrState) Pod() *v1.Pod                                { return c.p.pod }
func (c *ctrState) Key() string                                 { return c.p.key() }
func (c *ctrState) Runtime() cri.Runtime                        { return c.p.e.rt }
func (c *ctrState) Waiting() (string, string)                   { return c.waitingReason, c.waitingMessage }
func (c *ctrState) SetWaiting(reason, msg string)               { c.waitingReason, c.waitingMessage = reason, msg }
func (c *ctrState) SetImageRef(ref string)                      { c.imageRef = ref }
func (c *ctrState) Raise(ev fsm.ContainerEvent)                 { c.raise(ev) }
func (c *ctrState) SandboxConfig() *runtimeapi.PodSandboxConfig { return c.p.sandbox.Config() }

// Secrets is the API server's (Config.VolumeAPI), or nil.
func (c *ctrState) Secrets() images.Secrets {
	if api := c.p.e.cfg.VolumeAPI; api != nil {
		return api
	}
	return nil
}

// Event records an event about the container, PodEvent about its pod.
func (c *ctrState) Event(eventType, reason, format string, args ...any) {
	c.event(eventType, reason, format, args...)
}
func (c *ctrState) PodEvent(eventType, reason, format string, args ...any) {
	c.p.event(eventType, reason, format, args...)
}

// Pulled counts a pull in the metrics and the pod's pull time (the
// PodStarted metric's).
func (c *ctrState) Pulled(d time.Duration) {
	c.p.e.metrics.ImagePulled(d)
	c.p.w.mu.Lock()
	c.p.pullTime += d
	c.p.w.mu.Unlock()
}

// PullBackoff advances the container's image pull backoff, or resets it.
func (c *ctrState) PullBackoff(reset bool) {
	if reset {
		c.p.e.pullBackoff.Reset(c.backoffKey())
		return
	}
	c.p.e.pullBackoff.Next(c.backoffKey())
}

// failedEvent is kubelet's startContainer warning Failed "Error: REASON"
// for a start that ended before CreateContainer with the waiting reason
// set (here ImagePullBackOff, shown by show_backoff; engine/images records
// its own).
func (c *ctrState) failedEvent() {
	c.event(eventWarning, "Failed", "Error: %s", c.waitingReason)
}

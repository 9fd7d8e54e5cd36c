package worker

import (
	"time"

	"github.com/speclet/speclet/engine/images"
)

// The container machine's image guards and actions (pull_always,
// pull_never, check_image, refuse_never_pull, pull_image, refuse_image,
// count_pull_failure) are engine/images' Puller, which ctrState embeds;
// this file is what only the Puller reads of the container and tells it
// (images.Container; the rest is container_owner.go's, and the waiting
// reason and image reference are the embedded containers.Container's).

var _ images.Container = (*ctrState)(nil)

// Secrets is the API server's (Host.VolumeAPI), or nil.
func (c *ctrState) Secrets() images.Secrets {
	if api := c.p.h.VolumeAPI; api != nil {
		return api
	}
	return nil
}

// PodEvent records an event about the container's pod.
func (c *ctrState) PodEvent(eventType, reason, format string, args ...any) {
	c.p.event(eventType, reason, format, args...)
}

// Pulled counts a pull in the metrics and the pod's pull time (the
// PodStarted metric's).
func (c *ctrState) Pulled(d time.Duration) {
	c.p.h.Metrics.ImagePulled(d)
	c.p.w.mu.Lock()
	c.p.pullTime += d
	c.p.w.mu.Unlock()
}

// PullBackoff advances the container's image pull backoff, or resets it.
func (c *ctrState) PullBackoff(reset bool) {
	if reset {
		c.p.h.PullBackoff.Reset(c.backoffKey())
		return
	}
	c.p.h.PullBackoff.Next(c.backoffKey())
}

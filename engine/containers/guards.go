package containers

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/podspec"
)

// PodTerminating: the pod machine has seen termination, or the pod spec no
// longer has this container.
func (c *Container) PodTerminating() bool { return c.o.Terminating() || c.o.Spec() == nil }

// StartBlocked: not this container's turn. Init containers start one at a
// time in spec order (a sidecar counts as done once it runs); regular
// containers start once the pod is initialized.
func (c *Container) StartBlocked() bool {
	if c.o.Spec() == nil {
		return true
	}
	if c.o.Ephemeral() {
		return false
	}
	if !c.o.Init() {
		return !c.o.Initialized()
	}
	return !c.o.InitsBeforeDone()
}

// ImageInvalid: the image reference does not parse (InvalidImageName).
func (c *Container) ImageInvalid() bool {
	return c.o.Spec() != nil && podspec.ImageNameError(c.o.Spec().Image) != nil
}

// SpecChanged: the current instance was created from an older spec of this
// container; it is restarted at once (kubelet's hash check).
func (c *Container) SpecChanged() bool {
	return c.o.Spec() != nil && !c.o.Ephemeral() && c.runHash != "" && c.runHash != c.o.Hash()
}

// FirstProbeKill: the probe machine remembers that a failed probe killed
// the instance (killed), and it is the container's first (no earlier exit).
// kubelet's doBackOff advances the backoff only when it finds an exited
// instance, and the sync that kills an instance for a failed probe restarts
// it from a status in which that instance still runs, so the first kill
// finds none (conformance scenario probe-liveness-exec: kubelet restarts at
// once after the first and the second kill, and backs off from the third).
func (c *Container) FirstProbeKill() bool { return c.o.ProbeKilled() && c.last == nil }

// RestartAllowed: restartPolicy Always, or OnFailure with a non-zero exit
// code; a sidecar always restarts; an init container restarts only after a
// failure and never under restartPolicy Never.
func (c *Container) RestartAllowed() bool {
	failed := c.current == nil || c.current.ExitCode != 0
	switch {
	case c.o.Ephemeral():
		return false
	case c.o.Sidecar():
		return true
	case c.o.Init():
		return failed && c.restartPolicy() != v1.RestartPolicyNever
	}
	switch c.restartPolicy() {
	case v1.RestartPolicyAlways:
		return true
	case v1.RestartPolicyOnFailure:
		return failed
	}
	return false
}

// Crashloop is the wait before the next restart: 0 for the first one, then
// the delay the last count_restart handed out (kubelet's doBackOff).
//
// After a kill for a failed liveness or startup probe (the probe machine
// rests in killed) kubelet restarts at once when the container lived the
// current delay since its previous exit (doBackOff measures from the newest
// exited instance, and the killed one is still running in the status that
// sync read); otherwise the full delay.
func (c *Container) Crashloop() time.Duration {
	d := c.o.CrashLoopDelay()
	if c.o.ProbeKilled() && d > 0 && c.last != nil && c.o.Clock().Since(c.last.FinishedAt) >= d {
		return 0
	}
	return d
}

// ImagePullBackoff is the wait before the next pull: the delay that
// count_pull_failure is about to hand out.
func (c *Container) ImagePullBackoff() time.Duration { return c.o.PullDelay() }

// GracePeriod is the remaining grace period of the pod plus a margin for the
// runtime to report the kill; when it runs out the stop is forced.
func (c *Container) GracePeriod() time.Duration {
	return time.Duration(c.stopGrace()+2) * time.Second
}

// stopGrace is the grace period of a stop now: what is left of the failed
// probe's own grace period after a kill for it, else the pod's remaining
// grace period. (When it has run out in the stopping state, the grace timer
// forces the stop: force_stop_container.)
func (c *Container) stopGrace() int64 {
	if c.probeKill && !c.o.Terminating() {
		left := int64(c.probeDeadline.Sub(c.o.Clock().Now()).Round(time.Second) / time.Second)
		return min(c.probeGrace, max(left, 1))
	}
	return c.o.RemainingGrace()
}

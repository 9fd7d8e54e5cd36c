// The container machine's actions (spec/container.hcl): the CRI calls of
// one container's life.

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
	"github.com/speclet/speclet/engine/containerlogs"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/fsm"
)

// PullImage makes sure the image is present: ImageStatus, then PullImage
// when it is missing or the policy is Always (never under Never); raises
// pull_ok or pull_failed.
func (c *ctrState) PullImage(ctx context.Context) error {
	policy := podspec.PullPolicy(c.spec)
	if policy != v1.PullAlways {
		ref, err := imagePresent(ctx, c.p.e.rt, c.spec.Image)
		if err == nil && ref != "" {
			c.imageRef = ref
			c.event(eventNormal, "Pulled", "Container image %q already present on machine", c.spec.Image)
			c.raise(fsm.ContainerEventPullOk)
			return nil
		}
		if policy == v1.PullNever {
			c.waitingReason = ReasonErrImageNeverPull
			c.waitingMessage = fmt.Sprintf("Container image %q is not present with pull policy of Never", c.spec.Image)
			c.event(eventWarning, ReasonErrImageNeverPull, "%s", c.waitingMessage)
			c.raise(fsm.ContainerEventPullFailed)
			return nil
		}
	}
	t0 := c.p.e.clock.Now()
	c.event(eventNormal, "Pulling", "Pulling image %q", c.spec.Image)
	ref, err := pullImage(ctx, c.p.e.rt, c.spec.Image, c.pullCredentials(ctx), c.p.sandbox.cfg)
	if err == nil {
		d := c.p.e.clock.Since(t0)
		c.p.e.metrics.imagePulled(d)
		c.p.w.mu.Lock()
		c.p.pullTime += d
		c.p.w.mu.Unlock()
	}
	if err != nil {
		c.waitingReason, c.waitingMessage = ReasonErrImagePull, err.Error()
		c.pullFailedAt = c.p.e.clock.Now()
		c.event(eventWarning, "Failed", "Failed to pull image %q: %v", c.spec.Image, err)
		c.raise(fsm.ContainerEventPullFailed)
		return err
	}
	c.imageRef = ref
	c.event(eventNormal, "Pulled", "Successfully pulled image %q in %s", c.spec.Image, c.p.e.clock.Since(t0).Round(time.Millisecond))
	c.p.e.pullBackoff.Reset(c.backoffKey())
	c.raise(fsm.ContainerEventPullOk)
	return nil
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
// InspectFailed warning event when the reason is new (kubelet records one
// at each sync; the event recorder folds the repeats).
func (c *ctrState) RefuseImage(context.Context) error {
	err := podspec.ImageNameError(c.spec.Image)
	if err == nil {
		return nil
	}
	if c.waitingReason != ReasonInvalidImageName || c.waitingMessage != err.Error() {
		c.event(eventWarning, "InspectFailed", "%v", err)
	}
	c.waitingReason, c.waitingMessage = ReasonInvalidImageName, err.Error()
	return nil
}

// CountPullFailure advances the image pull backoff.
func (c *ctrState) CountPullFailure(context.Context) error {
	c.p.e.pullBackoff.Next(c.backoffKey())
	return nil
}

// CountRestart advances the CrashLoopBackOff. The restarting choice skips
// it after a probe kill of a container's first instance (FirstProbeKill).
func (c *ctrState) CountRestart(context.Context) error {
	c.p.e.crashBackoff.Next(c.backoffKey())
	return nil
}

// CreateContainer creates the next instance in the current sandbox; raises
// created or create_failed.
func (c *ctrState) CreateContainer(ctx context.Context) error {
	rc := c.restartCount
	if c.id != "" {
		rc++ // an instance existed before: this one is a restart
	}
	sb := c.p.sandbox
	inputs, err := c.p.requestInputs(ctx)
	var cfg *runtimeapi.ContainerConfig
	if err == nil {
		cfg, err = c.createConfig(ctx, rc, inputs)
	}
	if err != nil {
		// kubelet's CreateContainerConfigError (a config that cannot be
		// built), with its message where it has one.
		msg := err.Error()
		if cerr := (*podspec.ConfigError)(nil); errors.As(err, &cerr) {
			msg = cerr.Message()
		}
		c.p.e.metrics.containerStarted(err)
		c.waitingReason, c.waitingMessage = ReasonCreateContainerConfig, msg
		c.p.e.log.Warn("CreateContainerConfigError", "pod", c.p.key(), "container", c.name, "err", err)
		c.event(eventWarning, "Failed", "Error: %s", msg)
		c.raise(fsm.ContainerEventCreateFailed)
		return fmt.Errorf("create container %q: %w", c.name, err)
	}
	id, err := c.p.e.rt.CreateContainer(ctx, sb.id, cfg, sb.cfg)
	if err == nil {
		c.id, c.ids, c.restartCount = id, append(c.ids, id), rc
		c.setCreated(id, c.p.e.clock.Now())
		c.runHash = cfg.Annotations[AnnotationContainerHash]
		c.exitStatus = nil
		c.event(eventNormal, "Created", "Created container: %s", c.name)
		c.raise(fsm.ContainerEventCreated)
		return nil
	}
	err = fmt.Errorf("create container %q: %w", c.name, err)
	c.p.e.metrics.containerStarted(err)
	c.waitingReason, c.waitingMessage = ReasonCreateContainer, err.Error()
	c.event(eventWarning, "Failed", "Error: %v", err)
	c.raise(fsm.ContainerEventCreateFailed)
	return err
}

// imageUser is the image's user when the container must run as non-root
// and names no user (kubelet's getImageUser), so that podspec can check
// it; else the zero ImageUser.
func (c *ctrState) imageUser(ctx context.Context) (podspec.ImageUser, error) {
	if !podspec.NeedsImageUser(c.p.pod, c.spec) {
		return podspec.ImageUser{}, nil
	}
	image := c.imageRef
	if image == "" {
		image = c.spec.Image
	}
	img, err := c.p.e.rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image})
	if err != nil {
		return podspec.ImageUser{}, fmt.Errorf("create container %q: image status %q: %w", c.name, image, err)
	}
	return podspec.ImageUserOf(img), nil
}

// StartContainer starts the created instance, then runs its postStart hook;
// raises started, start_failed or post_start_failed.
func (c *ctrState) StartContainer(ctx context.Context) error {
	err := c.p.e.rt.StartContainer(ctx, c.id)
	c.p.e.metrics.containerStarted(err)
	if err != nil {
		c.waitingReason, c.waitingMessage = ReasonRunContainer, err.Error()
		c.event(eventWarning, "Failed", "Error: %v", err)
		c.raise(fsm.ContainerEventStartFailed)
		return fmt.Errorf("start container %q: %w", c.name, err)
	}
	c.startedAt = c.p.e.clock.Now()
	c.event(eventNormal, "Started", "Started container %s", c.name)
	if h := c.postStartHook(); h != nil {
		if err := c.hookTarget().runHook(ctx, "PostStart", h, 0); err != nil {
			// kubelet: FailedPostStartHook; the machine stops the
			// container and the restart policy decides
			// (PostStartHookError).
			c.p.e.log.Warn("FailedPostStartHook", "pod", c.p.key(), "container", c.name, "err", err)
			c.event(eventWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
			c.waitingReason, c.waitingMessage = ReasonPostStartHookError, err.Error()
			c.raise(fsm.ContainerEventPostStartFailed)
			return fmt.Errorf("start container %q: %w", c.name, err)
		}
	}
	c.raise(fsm.ContainerEventStarted)
	return nil
}

// StopContainer runs the preStop hook of the current instance (once), then
// stops it with the grace period that is left; raises stopped.
func (c *ctrState) StopContainer(ctx context.Context) error {
	if c.id == "" {
		c.raise(fsm.ContainerEventStopped)
		return nil
	}
	return c.stop(ctx, c.runPreStop(ctx, c.stopGrace()))
}

// ForceStopContainer stops the current instance with timeout 0: the grace
// period ran out while stopping (grace_expired). The preStop hook ran with
// the first stop. Raises stopped.
func (c *ctrState) ForceStopContainer(ctx context.Context) error { return c.stop(ctx, 0) }

// stop is StopContainer of the current instance with grace seconds (the
// call may take them and 10 s more); it raises stopped when the instance is
// stopped or there is none.
func (c *ctrState) stop(ctx context.Context, grace int64) error {
	if c.id == "" {
		c.raise(fsm.ContainerEventStopped)
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, time.Duration(grace+10)*time.Second)
	defer cancel()
	if err := stopContainer(sctx, c.p.e.rt, c.name, c.id, grace); err != nil {
		return err
	}
	c.raise(fsm.ContainerEventStopped)
	return nil
}

// RecordExit records the exit of the current instance for the status and
// restart_allowed: from the runtime event when it carried the status, else
// from ContainerStatus; an instance the runtime cannot describe exited
// 137 (ContainerStatusUnknown). Raises exit_recorded.
func (c *ctrState) RecordExit(ctx context.Context) error {
	err := c.recordExit(ctx)
	c.raise(fsm.ContainerEventExitRecorded)
	return err
}

func (c *ctrState) recordExit(ctx context.Context) error {
	st := c.exitStatus
	var err error
	if (st == nil || st.State != runtimeapi.ContainerState_CONTAINER_EXITED) && c.id != "" {
		st, err = c.p.e.rt.ContainerStatus(ctx, c.id)
		if err != nil {
			err = fmt.Errorf("status of container %q: %w", c.name, err)
		}
	}
	var t *termination
	switch {
	case st != nil && st.State == runtimeapi.ContainerState_CONTAINER_EXITED:
		t = &termination{ContainerID: c.id, StartedAt: c.startedAt, FinishedAt: c.p.e.clock.Now()}
		t.ExitCode, t.Reason, t.Message = st.ExitCode, st.Reason, st.Message
		if st.StartedAt > 0 {
			t.StartedAt = time.Unix(0, st.StartedAt)
		}
		if st.FinishedAt > 0 {
			t.FinishedAt = time.Unix(0, st.FinishedAt)
		}
		if m := c.terminationMessage(ctx, st); m != "" {
			if t.Message != "" {
				t.Message += ": "
			}
			t.Message += m
		}
	default:
		t = c.unknownExit(cri.IsNotFound(err))
		t.FinishedAt = c.p.e.clock.Now()
	}
	if c.current != nil && c.current.ContainerID != t.ContainerID {
		c.last = c.current
	}
	c.current = t
	return err
}

// unknownExit is the exit of the current instance when the runtime has
// none to tell: kubelet's ContainerCannotRun (128) for an instance that
// never ran, else ContainerStatusUnknown (137), "could not be located"
// when the runtime no longer has it (gone).
func (c *ctrState) unknownExit(gone bool) *termination {
	t := &termination{ContainerID: c.id, StartedAt: c.startedAt}
	if c.id == "" || c.waitingReason == ReasonRunContainer {
		t.ExitCode, t.Reason, t.Message = 128, "ContainerCannotRun", c.waitingMessage
		return t
	}
	t.ExitCode, t.Reason = 137, ReasonContainerStatusUnknown
	if gone {
		t.Message = "The container could not be located when the pod was terminated"
	}
	return t
}

// terminationMessage is what the exited instance st wrote to its
// terminationMessagePath, or under FallbackToLogsOnError after a failure
// with no message the tail of its log (kubelet's limits: the last
// podspec.MaxTerminationLogBytes of the last MaxTerminationLogLines lines).
func (c *ctrState) terminationMessage(ctx context.Context, st *runtimeapi.ContainerStatus) string {
	if c.spec == nil {
		return ""
	}
	if len(st.Mounts) == 0 && c.spec.TerminationMessagePath != "" && st.Id != "" {
		// A status without mounts (from an event): ask the runtime.
		if full, err := c.p.e.rt.ContainerStatus(ctx, st.Id); err == nil && full != nil {
			st = full
		}
	}
	msg, logs := podspec.TerminationMessage(c.spec, st.Mounts, st.ExitCode, st.Reason)
	if !logs || st.LogPath == "" {
		return msg
	}
	tail := &lastBytes{max: podspec.MaxTerminationLogBytes}
	if err := containerlogs.Tail(ctx, st.LogPath, podspec.MaxTerminationLogLines, tail); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return string(tail.b)
}

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	b   []byte
	max int
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if over := len(l.b) - l.max; over > 0 {
		l.b = append(l.b[:0], l.b[over:]...)
	}
	return len(p), nil
}

// RemoveContainer is the container GC of one container (kubelet's
// containerGC per pod and container name): it removes the dead instances
// beyond the newest ContainerGC.MaxPerContainer, oldest first, except those
// created less than ContainerGC.MinAge ago. The newest instance always
// stays, for its status (lastState) and its log until the pod is removed.
func (c *ctrState) RemoveContainer(ctx context.Context) error {
	gc := c.p.e.cfg.ContainerGC
	now := c.p.e.clock.Now()
	excess := len(c.ids) - max(gc.MaxPerContainer, 1)
	var keep []string
	var errs []error
	for _, id := range c.ids { // oldest first
		born, known := c.created[id]
		young := gc.MinAge > 0 && known && now.Sub(born) < gc.MinAge
		if excess <= 0 || id == c.id || young {
			keep = append(keep, id)
			continue
		}
		if err := removeContainer(ctx, c.p.e.rt, c.name, id); err != nil {
			keep = append(keep, id)
			errs = append(errs, err)
			continue
		}
		excess--
		delete(c.created, id)
		c.p.e.pleg.Forget(id)
	}
	c.ids = keep
	return errors.Join(errs...)
}

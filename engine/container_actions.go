// The container machine's actions (spec/container.hcl): the CRI calls of
// one container's life.

package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/containerlogs"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/fsm"
)

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
		c.p.e.metrics.ContainerStarted(err)
		c.waitingReason, c.waitingMessage = ReasonCreateContainerConfig, msg
		c.p.e.log.Warn("CreateContainerConfigError", "pod", c.p.key(), "container", c.name, "err", err)
		c.event(eventWarning, "Failed", "Error: %s", msg)
		c.raise(fsm.ContainerEventCreateFailed)
		return fmt.Errorf("create container %q: %w", c.name, err)
	}
	id, err := c.p.e.rt.CreateContainer(ctx, sb.id, cfg, sb.config())
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
	c.p.e.metrics.ContainerStarted(err)
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
	c.p.e.metrics.ContainerStarted(err)
	if err != nil {
		c.waitingReason, c.waitingMessage = ReasonRunContainer, err.Error()
		c.event(eventWarning, "Failed", "Error: %v", err)
		c.raise(fsm.ContainerEventStartFailed)
		return fmt.Errorf("start container %q: %w", c.name, err)
	}
	c.startedAt = c.p.e.clock.Now()
	c.event(eventNormal, "Started", "Started container %s", c.name)
	if h := c.postStartHook(); h != nil {
		if err := c.hookTarget().Hook(ctx, "PostStart", h, 0); err != nil {
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
		born, known := c.createdAt(id)
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
		c.forgetCreated(id)
		c.p.e.pleg.Forget(id)
	}
	c.ids = keep
	return errors.Join(errs...)
}

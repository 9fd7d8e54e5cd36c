// The container machine's actions (spec/container.hcl): the CRI calls of
// one container's life.

package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/containerlogs"
	"github.com/speclet/speclet/engine/op"
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
// created or create_failed. Its operations are createContainer's.
func (c *ctrState) CreateContainer(ctx context.Context) error {
	return op.Exec(ctx, c.p.e.rt, c.createContainer())
}

// createContainer reads the pod's inputs (requestInputs), the image's
// user where a runAsNonRoot check needs it, builds the config of the next
// instance and creates it.
func (c *ctrState) createContainer() op.Op {
	rc := c.restartCount
	if c.id != "" {
		rc++ // an instance existed before: this one is a restart
	}
	return op.Host("RequestInputs", c.name, c.p.requestInputs, func(inputs func(*podspec.ContainerRequest), err error) op.Op {
		if err != nil {
			return c.configFailed(err)
		}
		return c.imageUser(func(user podspec.ImageUser, err error) op.Op {
			if err != nil {
				return c.configFailed(err)
			}
			return op.Host("ContainerConfig", c.name, func(context.Context) (createConfigs, error) {
				cfg, err := c.createConfig(rc, inputs, user)
				return createConfigs{cfg, c.p.sandbox.Config()}, err
			}, func(cs createConfigs, err error) op.Op {
				if err != nil {
					return c.configFailed(err)
				}
				return op.CreateContainer(c.p.sandbox.ID(), cs.container, cs.sandbox, func(id string, err error) op.Op {
					return c.madeInstance(rc, cs.container, id, err)
				})
			})
		})
	})
}

// createConfigs are the configs CreateContainer takes: the instance's and
// its sandbox's.
type createConfigs struct {
	container *runtimeapi.ContainerConfig
	sandbox   *runtimeapi.PodSandboxConfig
}

// configFailed is kubelet's CreateContainerConfigError (a config that
// cannot be built), with its message where it has one.
func (c *ctrState) configFailed(err error) op.Op {
	msg := err.Error()
	if cerr := (*podspec.ConfigError)(nil); errors.As(err, &cerr) {
		msg = cerr.Message()
	}
	c.p.e.metrics.ContainerStarted(err)
	c.waitingReason, c.waitingMessage = ReasonCreateContainerConfig, msg
	c.p.e.log.Warn("CreateContainerConfigError", "pod", c.p.key(), "container", c.name, "err", err)
	c.event(eventWarning, "Failed", "Error: %s", msg)
	c.raise(fsm.ContainerEventCreateFailed)
	return op.Done(fmt.Errorf("create container %q: %w", c.name, err))
}

// madeInstance reads CreateContainer's reply for instance restartCount made
// from cfg.
func (c *ctrState) madeInstance(restartCount int32, cfg *runtimeapi.ContainerConfig, id string, err error) op.Op {
	if err == nil {
		c.id, c.ids, c.restartCount = id, append(c.ids, id), restartCount
		c.setCreated(id, c.p.e.clock.Now())
		c.runHash = cfg.Annotations[AnnotationContainerHash]
		c.exitStatus = nil
		c.event(eventNormal, "Created", "Created container: %s", c.name)
		c.raise(fsm.ContainerEventCreated)
		return op.Done(nil)
	}
	err = fmt.Errorf("create container %q: %w", c.name, err)
	c.p.e.metrics.ContainerStarted(err)
	c.waitingReason, c.waitingMessage = ReasonCreateContainer, err.Error()
	c.event(eventWarning, "Failed", "Error: %v", err)
	c.raise(fsm.ContainerEventCreateFailed)
	return op.Done(err)
}

// imageUser hands then the image's user when the container must run as
// non-root and names no user (kubelet's getImageUser), so that podspec can
// check it; else the zero ImageUser.
func (c *ctrState) imageUser(then func(podspec.ImageUser, error) op.Op) op.Op {
	if !podspec.NeedsImageUser(c.p.pod, c.spec) {
		return then(podspec.ImageUser{}, nil)
	}
	image := c.imageRef
	if image == "" {
		image = c.spec.Image
	}
	return op.ImageStatus(&runtimeapi.ImageSpec{Image: image}, func(img *runtimeapi.Image, err error) op.Op {
		if err != nil {
			return then(podspec.ImageUser{}, fmt.Errorf("create container %q: image status %q: %w", c.name, image, err))
		}
		return then(podspec.ImageUserOf(img), nil)
	})
}

// StartContainer starts the created instance, then runs its postStart hook;
// raises started, start_failed or post_start_failed.
func (c *ctrState) StartContainer(ctx context.Context) error {
	return op.Exec(ctx, c.p.e.rt, c.startContainer())
}

func (c *ctrState) startContainer() op.Op {
	return op.StartContainer(c.id, func(err error) op.Op {
		c.p.e.metrics.ContainerStarted(err)
		if err != nil {
			c.waitingReason, c.waitingMessage = ReasonRunContainer, err.Error()
			c.event(eventWarning, "Failed", "Error: %v", err)
			c.raise(fsm.ContainerEventStartFailed)
			return op.Done(fmt.Errorf("start container %q: %w", c.name, err))
		}
		c.startedAt = c.p.e.clock.Now()
		c.event(eventNormal, "Started", "Started container %s", c.name)
		h := c.postStartHook()
		if h == nil {
			c.raise(fsm.ContainerEventStarted)
			return op.Done(nil)
		}
		target := c.hookTarget()
		return op.Do("PostStartHook", c.name, func(ctx context.Context) error { return target.Hook(ctx, "PostStart", h, 0) }, func(err error) op.Op {
			if err != nil {
				// kubelet: FailedPostStartHook; the machine stops the
				// container and the restart policy decides
				// (PostStartHookError).
				c.p.e.log.Warn("FailedPostStartHook", "pod", c.p.key(), "container", c.name, "err", err)
				c.event(eventWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
				c.waitingReason, c.waitingMessage = ReasonPostStartHookError, err.Error()
				c.raise(fsm.ContainerEventPostStartFailed)
				return op.Done(fmt.Errorf("start container %q: %w", c.name, err))
			}
			c.raise(fsm.ContainerEventStarted)
			return op.Done(nil)
		})
	})
}

// StopContainer runs the preStop hook of the current instance (once), then
// stops it with the grace period that is left; raises stopped.
func (c *ctrState) StopContainer(ctx context.Context) error {
	return op.Exec(ctx, c.p.e.rt, c.stopContainer())
}

func (c *ctrState) stopContainer() op.Op {
	grace := c.stopGrace()
	h := c.preStopHook()
	if c.id == "" || h == nil || c.preStopDone == c.id || grace <= 0 {
		return c.stop(grace)
	}
	c.preStopDone = c.id
	target := c.hookTarget()
	return op.Host("PreStopHook", c.name, func(ctx context.Context) (int64, error) {
		return c.runPreStop(ctx, target, h, grace), nil
	}, func(left int64, _ error) op.Op { return c.stop(left) })
}

// ForceStopContainer stops the current instance with timeout 0: the grace
// period ran out while stopping (grace_expired). The preStop hook ran with
// the first stop. Raises stopped.
func (c *ctrState) ForceStopContainer(ctx context.Context) error {
	return op.Exec(ctx, c.p.e.rt, c.stop(0))
}

// stop is StopContainer of the current instance with grace seconds; it
// raises stopped when the instance is stopped (or gone) or there is none.
func (c *ctrState) stop(grace int64) op.Op {
	if c.id == "" {
		c.raise(fsm.ContainerEventStopped)
		return op.Done(nil)
	}
	return op.StopContainer(c.id, grace, func(err error) op.Op {
		if err := cri.UnlessGone(err, fmt.Sprintf("stop container %q", c.name)); err != nil {
			return op.Done(err)
		}
		c.raise(fsm.ContainerEventStopped)
		return op.Done(nil)
	})
}

// RecordExit records the exit of the current instance for the status and
// restart_allowed: from the runtime event when it carried the status, else
// from ContainerStatus; an instance the runtime cannot describe exited
// 137 (ContainerStatusUnknown). Raises exit_recorded.
func (c *ctrState) RecordExit(ctx context.Context) error {
	return op.Exec(ctx, c.p.e.rt, c.recordExit())
}

func (c *ctrState) recordExit() op.Op {
	st := c.exitStatus
	if (st == nil || st.State != runtimeapi.ContainerState_CONTAINER_EXITED) && c.id != "" {
		return op.ContainerStatus(c.id, func(st *runtimeapi.ContainerStatus, err error) op.Op {
			if err != nil {
				err = fmt.Errorf("status of container %q: %w", c.name, err)
			}
			return c.exited(st, err)
		})
	}
	return c.exited(st, nil)
}

// exited records the exit that status st (nil when err, the error of
// reading it) tells, with its termination message.
func (c *ctrState) exited(st *runtimeapi.ContainerStatus, err error) op.Op {
	if st == nil || st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t := c.unknownExit(cri.IsNotFound(err))
		t.FinishedAt = c.p.e.clock.Now()
		return c.setExit(t, err)
	}
	t := &termination{ContainerID: c.id, StartedAt: c.startedAt, FinishedAt: c.p.e.clock.Now()}
	t.ExitCode, t.Reason, t.Message = st.ExitCode, st.Reason, st.Message
	if st.StartedAt > 0 {
		t.StartedAt = time.Unix(0, st.StartedAt)
	}
	if st.FinishedAt > 0 {
		t.FinishedAt = time.Unix(0, st.FinishedAt)
	}
	return c.terminationMessage(st, func(m string) op.Op {
		if m != "" {
			if t.Message != "" {
				t.Message += ": "
			}
			t.Message += m
		}
		return c.setExit(t, err)
	})
}

// setExit makes t the current instance's exit and raises exit_recorded;
// err is the action's error.
func (c *ctrState) setExit(t *termination, err error) op.Op {
	if c.current != nil && c.current.ContainerID != t.ContainerID {
		c.last = c.current
	}
	c.current = t
	c.raise(fsm.ContainerEventExitRecorded)
	return op.Done(err)
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

// terminationMessage hands then what the exited instance st wrote to its
// terminationMessagePath, or under FallbackToLogsOnError after a failure
// with no message the tail of its log (kubelet's limits: the last
// podspec.MaxTerminationLogBytes of the last MaxTerminationLogLines lines).
// A status without mounts (from an event) is read again from the runtime.
func (c *ctrState) terminationMessage(st *runtimeapi.ContainerStatus, then func(string) op.Op) op.Op {
	if c.spec == nil {
		return then("")
	}
	read := func(st *runtimeapi.ContainerStatus) op.Op {
		return op.Host("TerminationMessage", st.Id, func(ctx context.Context) (string, error) {
			return readTerminationMessage(ctx, c.spec, st), nil
		}, func(m string, _ error) op.Op { return then(m) })
	}
	if len(st.Mounts) == 0 && c.spec.TerminationMessagePath != "" && st.Id != "" {
		return op.ContainerStatus(st.Id, func(full *runtimeapi.ContainerStatus, err error) op.Op {
			if err == nil && full != nil {
				return read(full)
			}
			return read(st)
		})
	}
	return read(st)
}

// readTerminationMessage reads the termination message of spec's exited
// instance st from the host: its file, or its log's tail.
func readTerminationMessage(ctx context.Context, spec *v1.Container, st *runtimeapi.ContainerStatus) string {
	msg, logs := podspec.TerminationMessage(spec, st.Mounts, st.ExitCode, st.Reason)
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
	return op.Exec(ctx, c.p.e.rt, c.removeContainers())
}

func (c *ctrState) removeContainers() op.Op {
	excess := len(c.ids) - max(c.p.e.cfg.ContainerGC.MaxPerContainer, 1)
	return c.removeFrom(&gcPass{now: c.p.e.clock.Now(), excess: excess}, 0)
}

// gcPass is where RemoveContainer's pass stands: when it began, how many
// instances are still to go, those kept and the failures so far.
type gcPass struct {
	now    time.Time
	excess int
	keep   []string
	errs   []error
}

// removeFrom goes on with pass from the i-th instance, oldest first.
func (c *ctrState) removeFrom(pass *gcPass, i int) op.Op {
	gc := c.p.e.cfg.ContainerGC
	for ; i < len(c.ids); i++ {
		id := c.ids[i]
		born, known := c.createdAt(id)
		young := gc.MinAge > 0 && known && pass.now.Sub(born) < gc.MinAge
		if pass.excess <= 0 || id == c.id || young {
			pass.keep = append(pass.keep, id)
			continue
		}
		return op.RemoveContainer(id, func(err error) op.Op {
			if err := cri.UnlessGone(err, fmt.Sprintf("remove container %q", c.name)); err != nil {
				pass.keep, pass.errs = append(pass.keep, id), append(pass.errs, err)
			} else {
				pass.excess--
				c.forgetCreated(id)
				c.p.e.pleg.Forget(id)
			}
			return c.removeFrom(pass, i+1)
		})
	}
	c.ids = pass.keep
	return op.Done(errors.Join(pass.errs...))
}

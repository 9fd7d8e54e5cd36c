package containers

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
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/fsm"
)

// SetExit makes t the current instance's exit (nil: none is known) without
// raising exit_recorded, as if record_exit had decided it. It is for a
// caller that places a container in a state without running its machine
// there: the engine's tests of the status and of the guards against the
// model's ties.
func (c *Container) SetExit(t *podstatus.Termination) { c.current = t }

// NoteStatus keeps the runtime's status of the current instance that came
// with a PLEG event, for record_exit: only an exited one is kept.
func (c *Container) NoteStatus(st *runtimeapi.ContainerStatus) {
	c.exitStatus = nil
	if st != nil && st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		c.exitStatus = st
	}
}

// RecordExit records the exit of the current instance for the status and
// restart_allowed: from the runtime event when it carried the status, else
// from ContainerStatus; an instance the runtime cannot describe exited
// 137 (ContainerStatusUnknown). Raises exit_recorded.
func (c *Container) RecordExit() op.Op {
	st := c.exitStatus
	if (st == nil || st.State != runtimeapi.ContainerState_CONTAINER_EXITED) && c.id != "" {
		return op.ContainerStatus(c.id, func(st *runtimeapi.ContainerStatus, err error) op.Op {
			if err != nil {
				err = fmt.Errorf("status of container %q: %w", c.o.Name(), err)
			}
			return c.exited(st, err)
		})
	}
	return c.exited(st, nil)
}

// exited records the exit that status st (nil when err, the error of
// reading it) tells, with its termination message.
func (c *Container) exited(st *runtimeapi.ContainerStatus, err error) op.Op {
	if st == nil || st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t := c.UnknownExit(cri.IsNotFound(err))
		if st != nil && st.State == runtimeapi.ContainerState_CONTAINER_CREATED && t.Message == "" {
			t.Message = "The container was created and never started"
		}
		t.FinishedAt = c.o.Clock().Now()
		return c.setExit(t, err)
	}
	t := &podstatus.Termination{ContainerID: c.id, StartedAt: c.startedAt, FinishedAt: c.o.Clock().Now()}
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
func (c *Container) setExit(t *podstatus.Termination, err error) op.Op {
	if c.current != nil && c.current.ContainerID != t.ContainerID {
		c.last = c.current
	}
	c.current = t
	c.o.Raise(fsm.ContainerEventExitRecorded)
	return op.Done(err)
}

// UnknownExit is the exit of the current instance when the runtime has
// none to tell: kubelet's ContainerCannotRun (128) for an instance that
// never ran, else ContainerStatusUnknown (137), "could not be located"
// when the runtime no longer has it (gone).
func (c *Container) UnknownExit(gone bool) *podstatus.Termination {
	t := &podstatus.Termination{ContainerID: c.id, StartedAt: c.startedAt}
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
func (c *Container) terminationMessage(st *runtimeapi.ContainerStatus, then func(string) op.Op) op.Op {
	if c.o.Spec() == nil {
		return then("")
	}
	read := func(st *runtimeapi.ContainerStatus) op.Op {
		return op.Host("TerminationMessage", st.Id, func(ctx context.Context) (string, error) {
			return readTerminationMessage(ctx, c.o.Spec(), st), nil
		}, func(m string, _ error) op.Op { return then(m) })
	}
	if len(st.Mounts) == 0 && c.o.Spec().TerminationMessagePath != "" && st.Id != "" {
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
func (c *Container) RemoveContainer() op.Op {
	keep, minAge := c.o.GCPolicy()
	excess := len(c.ids) - max(keep, 1)
	return c.removeFrom(&gcPass{now: c.o.Clock().Now(), excess: excess, minAge: minAge}, 0)
}

// unlinkLog removes the link to removed instance id's log file (kubelet's
// removeContainerLog), then goes on with then. A failure is logged; the
// log maintenance removes the link once it points at nothing
// (containerlogs.SweepLinks).
func (c *Container) unlinkLog(id string, then func() op.Op) op.Op {
	link := c.o.LogLink(id)
	if link == "" {
		return then()
	}
	return op.Do("RemoveLogLink", link, func(context.Context) error { return containerlogs.Unlink(link) }, func(err error) op.Op {
		if err != nil {
			c.o.Logger().Warn("Failed to remove log link", "pod", c.o.Key(), "container", c.o.Name(), "link", link, "err", err)
		}
		return then()
	})
}

// gcPass is where RemoveContainer's pass stands: when it began, how many
// instances are still to go, those kept and the failures so far.
type gcPass struct {
	now    time.Time
	minAge time.Duration
	excess int
	keep   []string
	errs   []error
}

// removeFrom goes on with pass from the i-th instance, oldest first.
func (c *Container) removeFrom(pass *gcPass, i int) op.Op {
	for ; i < len(c.ids); i++ {
		id := c.ids[i]
		born, known := c.createdAt(id)
		young := pass.minAge > 0 && known && pass.now.Sub(born) < pass.minAge
		if pass.excess <= 0 || id == c.id || young {
			pass.keep = append(pass.keep, id)
			continue
		}
		return op.RemoveContainer(id, func(err error) op.Op {
			if err := cri.UnlessGone(err, fmt.Sprintf("remove container %q", c.o.Name())); err != nil {
				pass.keep, pass.errs = append(pass.keep, id), append(pass.errs, err)
				return c.removeFrom(pass, i+1)
			}
			pass.excess--
			c.forgetCreated(id)
			c.o.Removed(id)
			return c.unlinkLog(id, func() op.Op { return c.removeFrom(pass, i+1) })
		})
	}
	c.ids = pass.keep
	return op.Done(errors.Join(pass.errs...))
}

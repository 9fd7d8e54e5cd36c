package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/fsm"
)

// ctrState is one container of a pod: its machine and what the runtime told
// about its instances. It implements fsm.ContainerGuards, ContainerActions
// and ContainerDurations. Only one goroutine at a time fires a container's
// machine (the pod worker, or one goroutine per container that the worker
// waits for).
type ctrState struct {
	p       *podState
	name    string
	spec    *v1.Container // nil: a container adopted from the runtime that the spec no longer has
	hash    string        // containerHash(spec), "" without spec; set with spec by setSpec
	init    bool
	sidecar bool
	machine *fsm.ContainerMachine

	id           string            // the current (newest) runtime instance
	ids          []string          // every instance still in the runtime, oldest first
	sandboxOf    map[string]string // instance id -> its sandbox id
	imageRef     string
	runHash      string // spec hash the current instance was created from
	imagePresent bool
	restartCount int32
	created      bool // an instance was created at least once (the next one is a restart)
	startedAt    time.Time
	current      *termination // the exit of the current instance
	last         *termination // the exit of the instance before
	exitStatus   *runtimeapi.ContainerStatus
	forceStop    bool
	started      bool   // the current instance was started (StartContainer returned or it was adopted running)
	preStopDone  string // the instance whose preStop hook ran

	waitingReason, waitingMessage string
	pullFailedAt                  time.Time
	events                        []fsm.ContainerEvent
}

var _ fsm.ContainerGuards = (*ctrState)(nil)
var _ fsm.ContainerActions = (*ctrState)(nil)
var _ fsm.ContainerDurations = (*ctrState)(nil)

func newCtrState(p *podState, c *v1.Container, init, sidecar bool) *ctrState {
	cs := &ctrState{p: p, name: c.Name, init: init, sidecar: sidecar}
	cs.setSpec(c)
	cs.machine = fsm.NewContainerMachine(cs)
	return cs
}

func (c *ctrState) key() string {
	return string(c.p.pod.UID) + "/" + c.name
}

// fire delivers ev to the container machine and carries out the steps, like
// podState.fire. Before a start it asks the runtime whether the image is
// present (guard image_present).
func (c *ctrState) fire(ctx context.Context, ev fsm.ContainerEvent) {
	if ev == fsm.ContainerEventStart && c.machine.State() == fsm.ContainerStateWaiting && c.spec != nil && !c.p.killed {
		ref, err := imagePresent(ctx, c.p.e.rt, c.spec.Image)
		c.imagePresent = err == nil && ref != ""
		if c.imagePresent {
			c.imageRef = ref
		}
	}
	c.events = append(c.events, ev)
	for len(c.events) > 0 {
		ev := c.events[0]
		c.events = c.events[1:]
		if c.exitEvent(ev) && c.machine.Can(ev) {
			// The spec's choice in exited asks restart_allowed at once:
			// the exit must be known before the event is fired.
			if err := c.recordExit(ctx); err != nil {
				c.p.e.log.Warn("record exit", "pod", c.p.key(), "container", c.name, "err", err)
			}
		}
		step, err := c.machine.Fire(ev)
		if err != nil {
			if !errors.Is(err, fsm.ErrNoTransition) {
				c.p.e.log.Error("container machine", "pod", c.p.key(), "container", c.name, "err", err)
			}
			continue
		}
		c.p.e.metrics.transition(fsm.ContainerMachineName, step.From.String(), step.To.String(), step.Event.String())
		if c.p.e.log.Enabled(ctx, slog.LevelDebug) {
			c.p.e.log.Debug("container transition", "pod", c.p.key(), "container", c.name, "from", step.From.String(),
				"event", step.Event.String(), "to", step.To.String(), "actions", fmt.Sprint(step.Actions), "row", step.Row, "choices", step.Choices)
		}
		c.p.e.progress.Add(1)
		if len(step.Path) > 0 {
			c.armTimers()
			c.enterHook(step.To)
		}
		actions := append([]fsm.ContainerAction(nil), step.Actions...)
		for _, a := range actions {
			if err := fsm.RunContainerAction(ctx, c, a); err != nil {
				c.p.e.log.Warn("container action failed", "pod", c.p.key(), "container", c.name, "action", a.String(), "err", err)
			}
		}
	}
}

func (c *ctrState) raise(ev fsm.ContainerEvent) { c.events = append(c.events, ev) }

// exitEvent: events after which the container's live instance is dead (a
// removal counts while the instance was starting, running or stopping).
func (c *ctrState) exitEvent(ev fsm.ContainerEvent) bool {
	switch ev {
	case fsm.ContainerEventDied, fsm.ContainerEventStopped, fsm.ContainerEventStartFailed:
		return true
	case fsm.ContainerEventRemoved:
		switch c.machine.State() {
		case fsm.ContainerStateStarting, fsm.ContainerStateRunning, fsm.ContainerStateStopping:
			return true
		}
	}
	return false
}

func (c *ctrState) armTimers() {
	c.p.w.clearTimers(c.name)
	now := c.p.e.clock.Now()
	for i, t := range c.machine.Timers() {
		c.p.w.armTimer(c.name, i, uint8(t.Event), now.Add(fsm.ContainerDurationOf(c, t.After)))
	}
}

// enterHook keeps the waiting reason in step with the state entered.
func (c *ctrState) enterHook(s fsm.ContainerState) {
	switch s {
	case fsm.ContainerStatePulling, fsm.ContainerStateCreating, fsm.ContainerStateStarting, fsm.ContainerStateRunning:
		c.waitingReason, c.waitingMessage = "", ""
	case fsm.ContainerStatePullBackoff:
		if c.PullPolicyNever() {
			c.waitingReason = ReasonErrImageNeverPull
			c.waitingMessage = fmt.Sprintf("Container image %q is not present with pull policy of Never", c.spec.Image)
		} else {
			// ErrImagePull for the failed attempt; the next sync tick
			// shows ImagePullBackOff while the backoff runs.
			c.p.w.refreshAfter(c.p.e.clock.Now().Add(time.Second))
		}
	case fsm.ContainerStateCrashloopBackoff:
		// A failed create or postStart hook keeps its own reason
		// through the backoff, as kubelet's reason cache shows it.
		if c.waitingReason != ReasonCreateContainer && c.waitingReason != ReasonPostStartHookError {
			c.waitingReason = ReasonCrashLoopBackOff
			c.waitingMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
				c.p.e.crashBackoff.Current(c.backoffKey()), c.name, c.p.pod.Name, c.p.pod.Namespace, c.p.pod.UID)
		}
	}
}

// noteSync: a sync that finds the container still in pull backoff reports
// ImagePullBackOff, as kubelet does after the first ErrImagePull.
func (c *ctrState) noteSync() {
	if c.machine.State() == fsm.ContainerStatePullBackoff && c.waitingReason == ReasonErrImagePull &&
		c.p.e.clock.Since(c.pullFailedAt) >= time.Second {
		c.waitingReason = ReasonImagePullBackOff
		c.waitingMessage = fmt.Sprintf("Back-off pulling image %q", c.spec.Image)
	}
}

// initDone: an init container completed successfully, or a sidecar runs.
func (c *ctrState) initDone() bool {
	if c.sidecar {
		return c.machine.State() == fsm.ContainerStateRunning
	}
	return c.machine.State() == fsm.ContainerStateTerminated && c.current != nil && c.current.ExitCode == 0 ||
		c.machine.State() == fsm.ContainerStateRemoved && c.current != nil && c.current.ExitCode == 0
}

// stopped: nothing of this container runs.
func (c *ctrState) stopped() bool {
	switch c.machine.State() {
	case fsm.ContainerStateWaiting, fsm.ContainerStatePullBackoff, fsm.ContainerStateCrashloopBackoff,
		fsm.ContainerStateExited, fsm.ContainerStateTerminated, fsm.ContainerStateRemoved:
		return true
	}
	return false
}

// instances returns the ids of every instance still in the runtime.
func (c *ctrState) instances() []string { return append([]string(nil), c.ids...) }

// setSpec installs the container's spec (nil: the spec no longer has it)
// and its hash, computed once per spec rather than at every sync.
func (c *ctrState) setSpec(spec *v1.Container) {
	c.spec, c.hash = spec, ""
	if spec != nil {
		c.hash = containerHash(spec)
	}
}

func (c *ctrState) backoffKey() string {
	return c.key() + "/" + c.hash
}

func (c *ctrState) restartPolicy() v1.RestartPolicy {
	if c.sidecar {
		return v1.RestartPolicyAlways
	}
	if p := c.p.pod.Spec.RestartPolicy; p != "" {
		return p
	}
	return v1.RestartPolicyAlways
}

// --- guards ---

func (c *ctrState) PodTerminating() bool { return c.p.killed || c.spec == nil }
func (c *ctrState) ImagePresent() bool   { return c.imagePresent }
func (c *ctrState) PullPolicyAlways() bool {
	return c.spec != nil && pullPolicy(c.spec) == v1.PullAlways
}
func (c *ctrState) PullPolicyNever() bool {
	return c.spec != nil && pullPolicy(c.spec) == v1.PullNever
}

// SpecChanged: the current instance was created from an older spec of this
// container; it is restarted at once (kubelet's hash check).
func (c *ctrState) SpecChanged() bool {
	return c.spec != nil && c.runHash != "" && c.runHash != c.hash
}

// RestartAllowed: restartPolicy Always, or OnFailure with a non-zero exit
// code; a sidecar always restarts; an init container restarts only after a
// failure and never under restartPolicy Never.
func (c *ctrState) RestartAllowed() bool {
	failed := c.current == nil || c.current.ExitCode != 0
	switch {
	case c.sidecar:
		return true
	case c.init:
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

// --- durations ---

// Crashloop hands out the next CrashLoopBackOff delay of this container.
func (c *ctrState) Crashloop() time.Duration { return c.p.e.crashBackoff.Next(c.backoffKey()) }

// ImagePullBackoff hands out the next image pull backoff delay.
func (c *ctrState) ImagePullBackoff() time.Duration { return c.p.e.pullBackoff.Next(c.backoffKey()) }

// GracePeriod is the remaining grace period of the pod plus a margin for the
// runtime to report the kill; when it runs out the stop is forced.
func (c *ctrState) GracePeriod() time.Duration {
	return time.Duration(c.stopGrace()+2) * time.Second
}

func (c *ctrState) stopGrace() int64 {
	if c.forceStop {
		return 0
	}
	if c.p.killed {
		return c.p.remainingGrace(c.p.e.clock.Now())
	}
	return max(podGrace(c.p.pod), 1)
}

// --- actions ---

// PullImage pulls the container's image; raises pull_ok or pull_failed.
func (c *ctrState) PullImage(ctx context.Context) error {
	ref, err := pullImage(ctx, c.p.e.rt, c.spec.Image, c.p.sandboxCfg)
	if err != nil {
		c.waitingReason, c.waitingMessage = ReasonErrImagePull, err.Error()
		c.pullFailedAt = c.p.e.clock.Now()
		c.raise(fsm.ContainerEventPullFailed)
		return err
	}
	c.imageRef = ref
	c.p.e.pullBackoff.Reset(c.backoffKey())
	c.raise(fsm.ContainerEventPullOk)
	return nil
}

// CreateContainer creates the next instance; raises created or
// create_failed.
func (c *ctrState) CreateContainer(ctx context.Context) error {
	rc := c.restartCount
	if c.created {
		rc++
	}
	cfg, err := containerConfig(c.p.e.cfg.RootDir, c.p.pod, c.spec, rc, c.imageRef, c.init)
	if err == nil {
		var id string
		id, err = c.p.e.rt.CreateContainer(ctx, c.p.sandboxID, cfg, c.p.sandboxCfg)
		if err == nil {
			c.id, c.ids, c.restartCount, c.created = id, append(c.ids, id), rc, true
			c.started = false
			c.runHash = cfg.Annotations[AnnotationContainerHash]
			c.noteSandbox(id, c.p.sandboxID)
			c.exitStatus = nil
			c.raise(fsm.ContainerEventCreated)
			return nil
		}
		err = fmt.Errorf("create container %q: %w", c.name, err)
	}
	c.waitingReason, c.waitingMessage = ReasonCreateContainer, err.Error()
	c.raise(fsm.ContainerEventCreateFailed)
	return err
}

// StartContainer starts the created instance; raises started or
// start_failed.
func (c *ctrState) StartContainer(ctx context.Context) error {
	if err := c.p.e.rt.StartContainer(ctx, c.id); err != nil {
		c.waitingReason, c.waitingMessage = ReasonRunContainer, err.Error()
		c.raise(fsm.ContainerEventStartFailed)
		return fmt.Errorf("start container %q: %w", c.name, err)
	}
	c.startedAt = c.p.e.clock.Now()
	c.started = true
	if h := c.postStartHook(); h != nil {
		if err := c.hookTarget().runHook(ctx, "PostStart", h, 0); err != nil {
			// kubelet: FailedPostStartHook, the container is killed and
			// the start fails with PostStartHookError.
			c.p.e.log.Warn("FailedPostStartHook", "pod", c.p.key(), "container", c.name, "err", err)
			if kerr := c.stopInstance(ctx); kerr != nil {
				c.p.e.log.Warn("kill container after its postStart hook failed", "pod", c.p.key(), "container", c.name, "err", kerr)
			}
			c.waitingReason, c.waitingMessage = ReasonPostStartHookError, err.Error()
			c.raise(fsm.ContainerEventStartFailed)
			return fmt.Errorf("start container %q: %w", c.name, err)
		}
	}
	c.raise(fsm.ContainerEventStarted)
	return nil
}

// StopContainer stops the current instance with the remaining grace period
// (0 once the grace timer expired); raises stopped.
func (c *ctrState) StopContainer(ctx context.Context) error {
	if c.machine.State() == fsm.ContainerStateStopping && c.forceStopDue() {
		c.forceStop = true
	}
	if c.id == "" {
		c.raise(fsm.ContainerEventStopped)
		return nil
	}
	if err := c.stopInstance(ctx); err != nil {
		return err
	}
	c.raise(fsm.ContainerEventStopped)
	return nil
}

// stopInstance runs the preStop hook of the current instance (once) and
// stops it with the grace period that is left.
func (c *ctrState) stopInstance(ctx context.Context) error {
	g := c.runPreStop(ctx, c.stopGrace())
	sctx, cancel := context.WithTimeout(ctx, time.Duration(g+10)*time.Second)
	defer cancel()
	return stopContainer(sctx, c.p.e.rt, c.name, c.id, g)
}

// forceStopDue: the pod's grace period has run out (its remaining grace is
// then at most 1 s), so the grace timer of the stopping state fired for good.
func (c *ctrState) forceStopDue() bool {
	return c.p.killed && c.p.e.clock.Now().After(c.p.graceDeadline)
}

// RecordExit reads the exit of the current instance for the status and
// restart_allowed. The engine records it before it fires the exit event, so
// this action finds it done unless the runtime did not answer then.
func (c *ctrState) RecordExit(ctx context.Context) error { return c.recordExit(ctx) }

func (c *ctrState) recordExit(ctx context.Context) error {
	if c.current != nil && c.current.ContainerID == c.id && c.id != "" {
		return nil // already recorded
	}
	st := c.exitStatus
	var err error
	if (st == nil || st.State != runtimeapi.ContainerState_CONTAINER_EXITED) && c.id != "" {
		st, err = c.p.e.rt.ContainerStatus(ctx, c.id)
		if err != nil {
			err = fmt.Errorf("status of container %q: %w", c.name, err)
		}
	}
	t := &termination{ContainerID: c.id, StartedAt: c.startedAt, FinishedAt: c.p.e.clock.Now()}
	switch {
	case st != nil && st.State == runtimeapi.ContainerState_CONTAINER_EXITED:
		t.ExitCode, t.Reason, t.Message = st.ExitCode, st.Reason, st.Message
		if st.StartedAt > 0 {
			t.StartedAt = time.Unix(0, st.StartedAt)
		}
		if st.FinishedAt > 0 {
			t.FinishedAt = time.Unix(0, st.FinishedAt)
		}
	case c.id == "" || c.waitingReason == ReasonRunContainer:
		t.ExitCode, t.Reason, t.Message = 128, "ContainerCannotRun", c.waitingMessage
	default:
		t.ExitCode, t.Reason = 137, "ContainerStatusUnknown"
		if cri.IsNotFound(err) {
			t.Message = "The container could not be located when the pod was terminated"
		}
	}
	if c.current != nil && c.current.ContainerID != t.ContainerID {
		c.last = c.current
	}
	c.current = t
	return err
}

// RemoveContainer removes the dead instances before the last one (the last
// stays for its logs and status until the pod is removed).
func (c *ctrState) RemoveContainer(ctx context.Context) error {
	var keep []string
	var errs []error
	for _, id := range c.ids {
		if id == c.id {
			keep = append(keep, id)
			continue
		}
		if err := removeContainer(ctx, c.p.e.rt, c.name, id); err != nil {
			keep = append(keep, id)
			errs = append(errs, err)
			continue
		}
		delete(c.sandboxOf, id)
		c.p.e.pleg.Forget(id)
	}
	c.ids = keep
	return errors.Join(errs...)
}

func (c *ctrState) noteSandbox(id, sandbox string) {
	if c.sandboxOf == nil {
		c.sandboxOf = map[string]string{}
	}
	c.sandboxOf[id] = sandbox
}

// adopt rebuilds the machine from the runtime's instances of this container
// (newest first): a running instance in a ready sandbox keeps running; a dead
// one goes through died so the spec decides about its restart.
func (c *ctrState) adopt(cs []*runtimeapi.Container, sandboxOK bool) {
	for i := len(cs) - 1; i >= 0; i-- {
		c.ids = append(c.ids, cs[i].Id)
		c.noteSandbox(cs[i].Id, cs[i].PodSandboxId)
	}
	newest := cs[0]
	c.id, c.created = newest.Id, true
	c.started = newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	c.restartCount = restartCountOf(newest.Annotations)
	c.runHash = newest.Annotations[AnnotationContainerHash]
	c.imageRef = newest.ImageRef
	c.startedAt = time.Unix(0, newest.CreatedAt)
	switch {
	case newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING && sandboxOK:
		c.machine = fsm.NewContainerMachineAt(fsm.ContainerStateRunning, c)
	case newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		// Its sandbox is gone: the instance must die.
		c.machine = fsm.NewContainerMachineAt(fsm.ContainerStateRunning, c)
		c.p.adoptEvents = append(c.p.adoptEvents, adoptEvent{c, fsm.ContainerEventKill})
	default:
		c.machine = fsm.NewContainerMachineAt(fsm.ContainerStateStarting, c)
		c.p.adoptEvents = append(c.p.adoptEvents, adoptEvent{c, fsm.ContainerEventDied})
	}
}

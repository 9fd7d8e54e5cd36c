package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// ctrState is one container of a pod: its machine and what the runtime told
// about its instances. It implements fsm.ContainerGuards, ContainerActions
// and ContainerDurations. Only one goroutine at a time fires a container's
// machine (the pod worker, or one goroutine per container that the worker
// waits for).
type ctrState struct {
	images.Puller // the image guards and actions
	p             *podState
	name          string
	spec          *v1.Container // nil: a container adopted from the runtime that the spec no longer has
	hash          string        // runtimepods.ContainerHash(spec), "" without spec; set with spec by setSpec
	init          bool
	sidecar       bool
	// ephemeral: an ephemeral container (engine/ephemeral.go); never
	// restarted, never ready, started whether or not the pod is initialized.
	ephemeral bool
	machine   *fsm.ContainerMachine

	id           string         // the current (newest) runtime instance; "" before the first create
	ids          []string       // every instance still in the runtime, oldest first
	created      []instanceTime // when instances of ids were created (container GC's minimum age), one entry per id at most
	imageRef     string
	runHash      string // spec hash the current instance was created from
	restartCount int32
	startedAt    time.Time
	current      *termination // the exit of the current instance
	last         *termination // the exit of the instance before
	exitStatus   *runtimeapi.ContainerStatus
	preStopDone  string // the instance whose preStop hook ran

	waitingReason, waitingMessage string

	// probe is the probe machine of the container; probeGrace is the grace
	// period of a kill for a failed probe (-1: none, the pod's applies).
	probe         *probeState
	probeGrace    int64
	probeDeadline time.Time // when probeGrace runs out

	run fire.Run[fsm.ContainerState, fsm.ContainerEvent, fsm.ContainerAction, fsm.ContainerGuard, *ctrState] // the container machine in the fire loop
}

// ctrStep is a step of a container machine as its observers see it
// (observe.go).
type ctrStep = fire.Step[fsm.ContainerState, fsm.ContainerEvent, fsm.ContainerAction, fsm.ContainerGuard, *ctrState]

var _ fsm.ContainerGuards = (*ctrState)(nil)
var _ fsm.ContainerActions = (*ctrState)(nil)
var _ fsm.ContainerDurations = (*ctrState)(nil)

func newCtrState(p *podState, c *v1.Container, init, sidecar bool) *ctrState {
	cs := &ctrState{p: p, name: c.Name, init: init, sidecar: sidecar, probeGrace: -1}
	cs.Bind(cs)
	cs.probe = newProbeState(cs)
	cs.setSpec(c)
	cs.machine = fsm.BindContainerMachine(fsm.ContainerInitialState, cs)
	cs.run = fire.NewRun(cs, ctrObservers)
	return cs
}

func (c *ctrState) key() string {
	return string(c.p.pod.UID) + "/" + c.name
}

// fire delivers ev to the container machine and carries out the steps
// (engine/fire).
func (c *ctrState) fire(ctx context.Context, ev fsm.ContainerEvent) {
	fire.Fire(ctx, c.machine, &c.run, ev)
}

// containerOwner prefixes the timer owner of a container machine.
const containerOwner = "container/"

func (c *ctrState) raise(ev fsm.ContainerEvent) { c.run.Raise(ev) }

func (c *ctrState) engine() *Engine       { return c.p.e }
func (c *ctrState) Sinks() *observe.Sinks { return &c.p.e.sinks }
func (c *ctrState) Now() time.Time        { return c.p.e.clock.Now() }
func (c *ctrState) Logger() *slog.Logger  { return c.p.e.log }
func (c *ctrState) LogAttrs() []any       { return []any{"pod", c.p.key(), "container", c.name} }
func (c *ctrState) Record() *history.Log  { return &c.p.w.hist }
func (c *ctrState) Instance() string      { return c.name }
func (c *ctrState) PodUID() types.UID     { return c.p.pod.UID }

// containerEntered re-arms the timers of the state the container machine
// entered (a timer that fires lets the pod sync through the sync tick's
// route: the container may start again) and runs enterHook.
func containerEntered(ctx context.Context, st *ctrStep) {
	if !st.Entered() {
		return
	}
	c := st.Owner
	ts := schedule.Of(c.machine.Timers(), c.p.e.clock.Now(),
		func(d fsm.ContainerDuration) time.Duration { return fsm.ContainerDurationOf(c, d) },
		func(ctx context.Context, ev fsm.ContainerEvent, _ fsm.ContainerDuration) {
			c.fire(ctx, ev)
			c.p.fire(ctx, fsm.Route(fsm.InputSyncTick).Pod)
		})
	c.p.w.setTimers(containerOwner+c.name, ts)
	c.enterHook(ctx, st.To)
}

// enterHook keeps the waiting reason in step with the state entered.
// The probe machine learns that the container runs or stopped running.
func (c *ctrState) enterHook(ctx context.Context, s fsm.ContainerState) {
	if s != fsm.ContainerStateStopping {
		c.probeGrace = -1
	}
	c.probe.containerEntered(ctx, s)
	switch s {
	case fsm.ContainerStateCheckingImage, fsm.ContainerStatePulling, fsm.ContainerStateCreating, fsm.ContainerStateStarting, fsm.ContainerStateRunning:
		c.waitingReason, c.waitingMessage = "", ""
	case fsm.ContainerStateCrashloopBackoff:
		// The first restart waits 0 s and shows no back-off. A failed
		// create or postStart hook shows its own reason for the attempt
		// (kubelet: the sync where the start failed), CrashLoopBackOff
		// from the next sync (show_backoff); kubelet keeps
		// CreateContainerConfigError (no instance exited, so its sync
		// shows no CrashLoopBackOff). An exit shows CrashLoopBackOff at once.
		if c.Crashloop() > 0 && !c.showsAttempt() && c.waitingReason != ReasonCreateContainerConfig {
			c.setCrashLoopBackOff()
		}
	}
}

// showsAttempt: the waiting reason is a failed attempt's error that the
// backoff's reason replaces at the next sync (show_backoff).
func (c *ctrState) showsAttempt() bool {
	switch c.machine.State() {
	case fsm.ContainerStatePullBackoff:
		return c.waitingReason == ReasonErrImagePull
	case fsm.ContainerStateCrashloopBackoff:
		return c.waitingReason == ReasonCreateContainer || c.waitingReason == ReasonPostStartHookError
	}
	return false
}

// BackoffShown is the duration backoff_shown: 1 s (the next sync tick)
// while the reason is a failed attempt's the backoff replaces, except for
// the first restart (0 s, no back-off shown); negative (no timer) otherwise.
func (c *ctrState) BackoffShown() time.Duration {
	if !c.showsAttempt() || c.machine.State() == fsm.ContainerStateCrashloopBackoff && c.Crashloop() <= 0 {
		return -1
	}
	return time.Second
}

// ShowBackoff (show_backoff): the next sync after the failed attempt shows
// the backoff, ImagePullBackOff (with its events) or CrashLoopBackOff, as
// kubelet's does.
func (c *ctrState) ShowBackoff(context.Context) error {
	if !c.showsAttempt() {
		return nil
	}
	if c.machine.State() == fsm.ContainerStatePullBackoff {
		c.showPullBackoff()
		return nil
	}
	c.setCrashLoopBackOff()
	return nil
}

// showPullBackoff shows ImagePullBackOff as kubelet's sync that finds the
// pull backing off does (v1.34 images.pullImage, startContainer): the
// message "Back-off pulling image ...: " with the previous pull's error,
// the event BackOff and the warning event Failed "Error: ImagePullBackOff".
func (c *ctrState) showPullBackoff() {
	msg := fmt.Sprintf("Back-off pulling image %q", c.spec.Image)
	c.event(eventNormal, "BackOff", "%s", msg)
	// The failed pull's reason and message are still shown (showsAttempt):
	// they are kubelet's prevPullErrMsg.
	msg += ": " + c.waitingReason + ": " + c.waitingMessage
	c.waitingReason, c.waitingMessage = ReasonImagePullBackOff, msg
	c.failedEvent()
}

// setCrashLoopBackOff sets the waiting reason of a container in backoff.
func (c *ctrState) setCrashLoopBackOff() {
	c.waitingReason = ReasonCrashLoopBackOff
	c.waitingMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
		c.p.e.crashBackoff.Current(c.backoffKey()), c.name, c.p.pod.Name, c.p.pod.Namespace, c.p.pod.UID)
}

// initDone: an init container completed successfully, or a sidecar runs.
func (c *ctrState) initDone() bool {
	if c.sidecar {
		return c.machine.State() == fsm.ContainerStateRunning
	}
	return c.final() && c.current != nil && c.current.ExitCode == 0
}

// final: the machine is terminated or removed; it never runs again.
func (c *ctrState) final() bool {
	st := c.machine.State()
	return st == fsm.ContainerStateTerminated || st == fsm.ContainerStateRemoved
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
		c.hash = runtimepods.ContainerHash(spec)
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

// PodTerminating: the pod machine has seen termination, or the pod spec no
// longer has this container.
func (c *ctrState) PodTerminating() bool { return c.p.terminating() || c.spec == nil }

// StartBlocked: not this container's turn. Init containers start one at a
// time in spec order (a sidecar counts as done once it runs); regular
// containers start once the pod is initialized.
func (c *ctrState) StartBlocked() bool {
	if c.spec == nil {
		return true
	}
	if c.ephemeral {
		return false
	}
	if !c.init {
		return !c.p.initialized()
	}
	for _, before := range c.p.inits {
		if before == c {
			return false
		}
		if !before.initDone() {
			return true
		}
	}
	return false
}

// ImageInvalid: the image reference does not parse (InvalidImageName).
func (c *ctrState) ImageInvalid() bool {
	return c.spec != nil && podspec.ImageNameError(c.spec.Image) != nil
}

// SpecChanged: the current instance was created from an older spec of this
// container; it is restarted at once (kubelet's hash check).
func (c *ctrState) SpecChanged() bool {
	return c.spec != nil && !c.ephemeral && c.runHash != "" && c.runHash != c.hash
}

// FirstProbeKill: the probe machine remembers that a failed probe killed
// the instance (killed), and it is the container's first (no earlier exit).
// kubelet's doBackOff advances the backoff only when it finds an exited
// instance, and the sync that kills an instance for a failed probe restarts
// it from a status in which that instance still runs, so the first kill
// finds none (conformance scenario probe-liveness-exec: kubelet restarts at
// once after the first and the second kill, and backs off from the third).
func (c *ctrState) FirstProbeKill() bool { return c.probe.killed() && c.last == nil }

// RestartAllowed: restartPolicy Always, or OnFailure with a non-zero exit
// code; a sidecar always restarts; an init container restarts only after a
// failure and never under restartPolicy Never.
func (c *ctrState) RestartAllowed() bool {
	failed := c.current == nil || c.current.ExitCode != 0
	switch {
	case c.ephemeral:
		return false
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

// --- durations (pure: the count_* actions advance the backoffs) ---

// Crashloop is the wait before the next restart: 0 for the first one, then
// the delay the last count_restart handed out (kubelet's doBackOff).
//
// After a kill for a failed liveness or startup probe (the probe machine
// rests in killed) kubelet restarts at once when the container lived the
// current delay since its previous exit (doBackOff measures from the newest
// exited instance, and the killed one is still running in the status that
// sync read); otherwise the full delay.
func (c *ctrState) Crashloop() time.Duration {
	d := c.p.e.crashBackoff.Current(c.backoffKey())
	if c.probe.killed() && d > 0 && c.last != nil && c.p.e.clock.Since(c.last.FinishedAt) >= d {
		return 0
	}
	return d
}

// ImagePullBackoff is the wait before the next pull: the delay that
// count_pull_failure is about to hand out.
func (c *ctrState) ImagePullBackoff() time.Duration { return c.p.e.pullBackoff.Peek(c.backoffKey()) }

// GracePeriod is the remaining grace period of the pod plus a margin for the
// runtime to report the kill; when it runs out the stop is forced.
func (c *ctrState) GracePeriod() time.Duration {
	return time.Duration(c.stopGrace()+2) * time.Second
}

// stopGrace is the grace period of a stop now: what is left of the failed
// probe's own grace period after a kill for it, else the pod's remaining
// grace period. (When it has run out in the stopping state, the grace timer
// forces the stop: force_stop_container.)
func (c *ctrState) stopGrace() int64 {
	if c.probeGrace >= 0 && !c.p.terminating() {
		left := int64(c.probeDeadline.Sub(c.p.e.clock.Now()).Round(time.Second) / time.Second)
		return min(c.probeGrace, max(left, 1))
	}
	return c.p.remainingGrace(c.p.e.clock.Now())
}

// --- instances ---

// forget drops an older instance that is gone from the runtime.
func (c *ctrState) forget(id string) {
	c.ids = slices.DeleteFunc(c.ids, func(x string) bool { return x == id })
	c.forgetCreated(id)
}

// ran: an instance of the container started, or its exit was recorded (a
// failed start counts: the spec decided on it); an instance that was only
// created (adopted CREATED, or between create and start) has not run.
func (c *ctrState) ran() bool {
	return c.id != "" && (!c.startedAt.IsZero() || c.current != nil || c.last != nil)
}

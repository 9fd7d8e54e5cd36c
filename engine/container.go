package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/kubeletapi"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/volume"
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
	// ephemeral: an ephemeral container (engine/ephemeral.go); never
	// restarted, never ready, started whether or not the pod is initialized.
	ephemeral bool
	machine   *fsm.ContainerMachine

	id           string               // the current (newest) runtime instance; "" before the first create
	ids          []string             // every instance still in the runtime, oldest first
	created      map[string]time.Time // when each instance of ids was created (container GC's minimum age)
	imageRef     string
	runHash      string // spec hash the current instance was created from
	restartCount int32
	startedAt    time.Time
	current      *termination // the exit of the current instance
	last         *termination // the exit of the instance before
	exitStatus   *runtimeapi.ContainerStatus
	preStopDone  string // the instance whose preStop hook ran

	waitingReason, waitingMessage string
	pullFailedAt                  time.Time
	startFailedAt                 time.Time // a failed create or postStart hook entered the backoff

	// probe is the probe machine of the container; probeGrace is the grace
	// period of a kill for a failed probe (-1: none, the pod's applies).
	probe         *probeState
	probeGrace    int64
	probeDeadline time.Time // when probeGrace runs out
	probeKilled   bool      // the current instance was killed for a failed probe

	run    runner[fsm.ContainerEvent, fsm.ContainerAction]
	events []fsm.ContainerEvent
}

var _ fsm.ContainerGuards = (*ctrState)(nil)
var _ fsm.ContainerActions = (*ctrState)(nil)
var _ fsm.ContainerDurations = (*ctrState)(nil)

func newCtrState(p *podState, c *v1.Container, init, sidecar bool) *ctrState {
	cs := &ctrState{p: p, name: c.Name, init: init, sidecar: sidecar, probeGrace: -1}
	cs.probe = newProbeState(cs)
	cs.setSpec(c)
	cs.machine = fsm.NewContainerMachine(cs)
	cs.run = runner[fsm.ContainerEvent, fsm.ContainerAction]{
		kind: fsm.ContainerMachineName,
		who:  func() []any { return []any{"pod", p.key(), "container", cs.name} },
		fire: func(ev fsm.ContainerEvent) (step[fsm.ContainerAction], error) {
			st, err := cs.machine.Fire(ev)
			return stepOf(st.From, st.To, st.Event, st.Path, st.Actions, st.Row, st.Choices), err
		},
		run: func(ctx context.Context, a fsm.ContainerAction) error { return fsm.RunContainerAction(ctx, cs, a) },
		timers: func(now time.Time) []timer {
			var ts []timer
			for _, t := range cs.machine.Timers() {
				ev := t.Event
				ts = append(ts, timer{at: now.Add(fsm.ContainerDurationOf(cs, t.After)), fire: func(ctx context.Context) {
					cs.fire(ctx, ev)
					// The container may start again: the sync tick's
					// route lets the pod sync.
					p.fire(ctx, fsm.Route(fsm.InputSyncTick).Pod)
				}})
			}
			return ts
		},
		entered: func(ctx context.Context) { cs.enterHook(ctx, cs.machine.State()) },
		state:   func() string { return cs.machine.State().String() },
		guard: func(i int) string {
			r := fsm.ContainerTransitionTable[i]
			return rowGuard(r.Guard, r.HasGuard)
		},
		choice: func(i int) string {
			c := fsm.ContainerChoiceTable[i]
			return branchString(c.Guard, c.HasGuard, c.To)
		},
		instance: c.Name,
		since:    p.e.clock.Now(),
	}
	return cs
}

func (c *ctrState) key() string {
	return string(c.p.pod.UID) + "/" + c.name
}

// fire delivers ev to the container machine and carries out the steps
// (fireLoop).
func (c *ctrState) fire(ctx context.Context, ev fsm.ContainerEvent) {
	fireLoop(ctx, c.p.w, containerOwner+c.name, &c.run, &c.events, ev)
}

// containerOwner prefixes the timer owner of a container machine.
const containerOwner = "container/"

func (c *ctrState) raise(ev fsm.ContainerEvent) { c.events = append(c.events, ev) }

// enterHook keeps the waiting reason in step with the state entered.
// The probe machine learns that the container runs or stopped running.
func (c *ctrState) enterHook(ctx context.Context, s fsm.ContainerState) {
	if s != fsm.ContainerStateStopping {
		c.probeGrace = -1
	}
	c.probe.containerEntered(ctx, s)
	switch s {
	case fsm.ContainerStatePulling, fsm.ContainerStateCreating, fsm.ContainerStateStarting, fsm.ContainerStateRunning:
		c.waitingReason, c.waitingMessage = "", ""
		c.probeKilled = false
	case fsm.ContainerStatePullBackoff:
		if c.waitingReason == ReasonErrImagePull {
			// ErrImagePull for the failed attempt; the next sync tick
			// shows ImagePullBackOff while the backoff runs.
			c.p.w.refreshAfter(c.p.e.clock.Now().Add(time.Second))
		}
	case fsm.ContainerStateCrashloopBackoff:
		// The first restart waits 0 s and shows no back-off. A failed
		// create or postStart hook shows its own reason for the attempt
		// (kubelet: the sync where the start failed), and CrashLoopBackOff
		// from the next sync tick while the backoff runs.
		c.startFailedAt = time.Time{}
		if c.Crashloop() <= 0 {
			break
		}
		if c.waitingReason == ReasonCreateContainerConfig {
			// kubelet keeps CreateContainerConfigError: no instance
			// exited, so its sync shows no CrashLoopBackOff.
			break
		}
		if c.waitingReason == ReasonCreateContainer || c.waitingReason == ReasonPostStartHookError {
			c.startFailedAt = c.p.e.clock.Now()
			c.p.w.refreshAfter(c.startFailedAt.Add(time.Second))
			break
		}
		c.setCrashLoopBackOff()
	}
}

// setCrashLoopBackOff sets the waiting reason of a container in backoff.
func (c *ctrState) setCrashLoopBackOff() {
	c.waitingReason = ReasonCrashLoopBackOff
	c.waitingMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
		c.p.e.crashBackoff.Current(c.backoffKey()), c.name, c.p.pod.Name, c.p.pod.Namespace, c.p.pod.UID)
}

// noteSync: a sync that finds the container still in pull backoff reports
// ImagePullBackOff, as kubelet does after the first ErrImagePull; one that
// finds it in crash loop backoff after a failed create or postStart hook
// reports CrashLoopBackOff, as kubelet's next sync does.
func (c *ctrState) noteSync() {
	switch c.machine.State() {
	case fsm.ContainerStatePullBackoff:
		if c.waitingReason == ReasonErrImagePull && c.p.e.clock.Since(c.pullFailedAt) >= time.Second {
			c.waitingReason = ReasonImagePullBackOff
			c.waitingMessage = fmt.Sprintf("Back-off pulling image %q", c.spec.Image)
		}
	case fsm.ContainerStateCrashloopBackoff:
		if (c.waitingReason == ReasonCreateContainer || c.waitingReason == ReasonPostStartHookError) &&
			!c.startFailedAt.IsZero() && c.p.e.clock.Since(c.startFailedAt) >= time.Second {
			c.setCrashLoopBackOff()
		}
	}
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
// After a kill for a failed liveness or startup probe kubelet restarts at
// once when the container lived the current delay since its previous exit
// (doBackOff measures from the newest exited instance, and the killed one is
// still running in the status that sync read); otherwise the full delay.
func (c *ctrState) Crashloop() time.Duration {
	d := c.p.e.crashBackoff.Current(c.backoffKey())
	if c.probeKilled && d > 0 && c.last != nil && c.p.e.clock.Since(c.last.FinishedAt) >= d {
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

// stopGrace is the grace period of a stop now: the pod's remaining grace
// period, 0 once it ran out in the stopping state (forced).
func (c *ctrState) stopGrace() int64 {
	if c.machine.State() == fsm.ContainerStateStopping && c.forceStopDue() {
		return 0
	}
	if c.probeGrace >= 0 && !c.p.terminating() {
		// A kill for a failed probe with its own grace period; forced
		// once it ran out (the grace timer fired).
		left := int64(c.probeDeadline.Sub(c.p.e.clock.Now()).Round(time.Second) / time.Second)
		if c.machine.State() == fsm.ContainerStateStopping && left < 0 {
			return 0
		}
		return min(c.probeGrace, max(left, 1))
	}
	return c.p.remainingGrace(c.p.e.clock.Now())
}

// --- actions ---

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

// CountRestart advances the CrashLoopBackOff, except after a probe kill of
// a container's first instance: kubelet's doBackOff advances the backoff
// only when it finds an exited instance, and the sync that kills an
// instance for a failed probe restarts it from a status in which that
// instance still runs, so the first kill finds none (conformance scenario
// probe-liveness-exec: kubelet restarts at once after the first and the
// second kill, and backs off from the third).
func (c *ctrState) CountRestart(context.Context) error {
	if c.probeKilled && c.last == nil {
		return nil
	}
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
// stops it with the grace period that is left (0 once the grace timer
// expired); raises stopped.
func (c *ctrState) StopContainer(ctx context.Context) error {
	if c.id == "" {
		c.raise(fsm.ContainerEventStopped)
		return nil
	}
	g := c.runPreStop(ctx, c.stopGrace())
	sctx, cancel := context.WithTimeout(ctx, time.Duration(g+10)*time.Second)
	defer cancel()
	if err := stopContainer(sctx, c.p.e.rt, c.name, c.id, g); err != nil {
		return err
	}
	c.raise(fsm.ContainerEventStopped)
	return nil
}

// forceStopDue: the pod's grace period has run out (its remaining grace is
// then at most 1 s), so the grace timer of the stopping state fired for good.
func (c *ctrState) forceStopDue() bool {
	return c.p.grace >= 0 && c.p.e.clock.Now().After(c.p.graceDeadline)
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
		if m := c.terminationMessage(ctx, st); m != "" {
			if t.Message != "" {
				t.Message += ": "
			}
			t.Message += m
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
	if err := kubeletapi.LogTail(ctx, st.LogPath, podspec.MaxTerminationLogLines, tail); err != nil {
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

// forget drops an older instance that is gone from the runtime.
func (c *ctrState) forget(id string) {
	c.ids = slices.DeleteFunc(c.ids, func(x string) bool { return x == id })
	delete(c.created, id)
}

// ran: an instance of the container started, or its exit was recorded (a
// failed start counts: the spec decided on it); an instance that was only
// created (adopted CREATED, or between create and start) has not run.
func (c *ctrState) ran() bool {
	return c.id != "" && (!c.startedAt.IsZero() || c.current != nil || c.last != nil)
}

func (c *ctrState) setCreated(id string, at time.Time) {
	if c.created == nil {
		c.created = map[string]time.Time{}
	}
	c.created[id] = at
}

// adopt rebuilds the machine from the runtime's instances of this container
// (newest first): a running instance in a ready sandbox keeps running; a dead
// one goes through died so the spec decides about its restart.
//
// A newest instance that was created and never started (speclet died
// between CreateContainer and StartContainer) never ran: as under kubelet
// it has no start time and no exit (its status is waiting, not a
// ContainerStatusUnknown termination), and the next sync starts a new
// instance at once whatever the restart policy (kubelet's
// ShouldContainerBeRestarted restarts a created container; doBackOff finds
// no exited instance), counted one restart more than the created one
// (kubelet's startContainer). The machine resumes in waiting with the
// created instance current, so create_container counts that restart; the
// created instance is an older dead one for container GC.
func (c *ctrState) adopt(cs []*runtimeapi.Container, sandboxOK bool) {
	for i := len(cs) - 1; i >= 0; i-- {
		c.ids = append(c.ids, cs[i].Id)
		c.setCreated(cs[i].Id, time.Unix(0, cs[i].CreatedAt))
	}
	newest := cs[0]
	c.id = newest.Id
	c.restartCount = restartCountOf(newest.Annotations)
	c.runHash = newest.Annotations[AnnotationContainerHash]
	c.imageRef = newest.ImageRef
	if newest.State == runtimeapi.ContainerState_CONTAINER_CREATED {
		c.machine = fsm.NewContainerMachineAt(fsm.ContainerStateWaiting, c)
		return
	}
	c.startedAt = time.Unix(0, newest.CreatedAt)
	c.machine = fsm.NewContainerMachineAt(fsm.ContainerStateRunning, c)
	switch {
	case newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING && sandboxOK:
	case newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		// Its sandbox is gone: the instance must die.
		c.p.adoptEvents = append(c.p.adoptEvents, adoptEvent{c, fsm.ContainerEventSandboxDied})
	default:
		c.p.adoptEvents = append(c.p.adoptEvents, adoptEvent{c, fsm.ContainerEventDied})
	}
}

// requestInputs are what a container's config reads from the running pod:
// its addresses (the node's for a hostNetwork pod), the node's, the
// configMaps and secrets of its namespace (Config.VolumeAPI), and the
// service variables (Config.Services). Services not yet read are an error
// for a pod from the API server, as under kubelet; a static pod goes on
// with what there is.
func (p *podState) requestInputs(ctx context.Context) (func(*podspec.ContainerRequest), error) {
	var services []*v1.Service
	if list := p.e.cfg.Services; list != nil {
		var err error
		services, err = list()
		if err != nil && !config.IsStatic(p.pod) {
			return nil, err
		}
	}
	return func(r *podspec.ContainerRequest) {
		podIP := p.sandbox.podIP
		if p.pod.Spec.HostNetwork {
			podIP = p.e.cfg.NodeIP
		}
		if podIP != "" {
			r.PodIPs = []string{podIP}
		}
		if ip := p.e.cfg.NodeIP; ip != "" {
			r.HostIPs = []string{ip}
		}
		if api := p.e.cfg.VolumeAPI; api != nil {
			r.Objects = apiObjects{ctx: ctx, api: api, ns: p.pod.Namespace}
		}
		if p.e.cfg.Services != nil {
			r.ServiceEnv = podspec.ServiceEnv(services, p.pod.Namespace, p.pod.Spec.EnableServiceLinks)
		}
	}, nil
}

// apiObjects reads a namespace's configMaps and secrets for
// engine/podspec.
type apiObjects struct {
	ctx context.Context
	api volume.API
	ns  string
}

func (o apiObjects) ConfigMap(name string) (*v1.ConfigMap, error) {
	return o.api.GetConfigMap(o.ctx, o.ns, name)
}

func (o apiObjects) Secret(name string) (*v1.Secret, error) {
	return o.api.GetSecret(o.ctx, o.ns, name)
}

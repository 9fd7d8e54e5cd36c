package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/fsm"
)

// podState is the worker goroutine's view of one pod: the pod machine, one
// container machine per container, and what the runtime holds of the pod.
// It implements fsm.PodGuards, fsm.PodActions and fsm.PodDurations; every
// CRI call that changes the pod in the runtime is made by one of those
// actions or by a container machine's action.
type podState struct {
	w       *podWorker
	e       *Engine
	pod     *v1.Pod
	machine *fsm.PodMachine

	inits      []*ctrState // init containers (sidecars included), spec order
	containers []*ctrState // regular containers, spec order
	byName     map[string]*ctrState

	sandboxID      string
	sandboxCfg     *runtimeapi.PodSandboxConfig
	sandboxReady   bool
	sandboxAttempt uint32
	oldSandboxes   []string // sandboxes of earlier attempts, removed at cleanup
	podIP          string
	startTime      time.Time

	// Termination: the effective grace period (seconds) and when it began.
	killed        bool
	grace         int64
	graceDeadline time.Time
	forced        bool

	updatePending bool
	lastStatus    *v1.PodStatus

	// events raised by actions, fired in order after the running step.
	podEvents []fsm.PodEvent
	// container events that bring adopted containers in line with the
	// runtime, fired before the first input.
	adoptEvents []adoptEvent
}

type adoptEvent struct {
	c  *ctrState
	ev fsm.ContainerEvent
}

var _ fsm.PodGuards = (*podState)(nil)
var _ fsm.PodActions = (*podState)(nil)
var _ fsm.PodDurations = (*podState)(nil)

// newPodState builds the state of a new pod, or of a pod adopted from the
// runtime after a restart (ad != nil): its ready sandbox is reused and its
// containers' machines start in the state the runtime reports.
func newPodState(w *podWorker, pod *v1.Pod, ad *adoptedPod) *podState {
	s := &podState{w: w, e: w.e, pod: pod, byName: map[string]*ctrState{}, grace: -1}
	s.machine = fsm.NewPodMachine(s)
	s.setSpec(pod)
	if ad != nil {
		s.adopt(ad)
	}
	return s
}

// setSpec installs a (newer) pod spec and adds machines for new containers.
// Containers that left the spec keep their machines so they are stopped and
// removed with the pod.
func (s *podState) setSpec(pod *v1.Pod) {
	s.pod = pod
	add := func(c *v1.Container, init, sidecar bool) *ctrState {
		cs := s.byName[c.Name]
		if cs == nil {
			cs = newCtrState(s, c, init, sidecar)
			s.byName[c.Name] = cs
			if init {
				s.inits = append(s.inits, cs)
			} else {
				s.containers = append(s.containers, cs)
			}
		}
		cs.setSpec(c)
		return cs
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		add(c, true, c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways)
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], false, false)
	}
}

// all returns every container: regular ones first, then init containers and
// sidecars (the kill order: sidecars stop after the regular containers).
func (s *podState) all() []*ctrState {
	out := make([]*ctrState, 0, len(s.containers)+len(s.inits))
	out = append(out, s.containers...)
	return append(out, s.inits...)
}

func (s *podState) key() string { return s.pod.Namespace + "/" + s.pod.Name }

// fire delivers ev to the pod machine and carries out the step: it re-arms
// the pod's timers when the state was (re-)entered, runs the actions in order,
// then fires the events the actions raised, until none is left.
func (s *podState) fire(ctx context.Context, ev fsm.PodEvent) {
	s.podEvents = append(s.podEvents, ev)
	for len(s.podEvents) > 0 {
		ev := s.podEvents[0]
		s.podEvents = s.podEvents[1:]
		step, err := s.machine.Fire(ev)
		if err != nil {
			if !errors.Is(err, fsm.ErrNoTransition) {
				s.e.log.Error("pod machine", "pod", s.key(), "err", err)
			}
			continue
		}
		s.e.metrics.transition(fsm.PodMachineName, step.From.String(), step.To.String(), step.Event.String())
		if s.e.log.Enabled(ctx, slog.LevelDebug) {
			s.e.log.Debug("pod transition", "pod", s.key(), "from", step.From.String(), "event", step.Event.String(),
				"to", step.To.String(), "actions", fmt.Sprint(step.Actions), "row", step.Row, "choices", step.Choices)
		}
		s.e.progress.Add(1)
		if len(step.Path) > 0 {
			s.armPodTimers()
		}
		actions := append([]fsm.PodAction(nil), step.Actions...)
		for _, a := range actions {
			if err := fsm.RunPodAction(ctx, s, a); err != nil {
				s.e.log.Warn("pod action failed", "pod", s.key(), "action", a.String(), "err", err)
			}
		}
	}
}

// raise queues an event for the pod machine; fire delivers it after the
// running step's actions.
func (s *podState) raise(ev fsm.PodEvent) { s.podEvents = append(s.podEvents, ev) }

func (s *podState) armPodTimers() {
	ts := s.machine.Timers()
	now := s.e.clock.Now()
	s.w.clearTimers("")
	for i, t := range ts {
		s.w.armTimer("", i, uint8(t.Event), now.Add(fsm.PodDurationOf(s, t.After)))
	}
}

// --- guards ---

// NameTaken: a static pod whose full name another started pod holds, or that
// earlier successors wait for. A free name is claimed by this pod.
func (s *podState) NameTaken() bool {
	if !config.IsStatic(s.pod) {
		return false
	}
	return !s.e.claimName(fullName(s.pod), s.pod.UID)
}

// PodDone: every container finished and none may restart: the phase is
// Succeeded or Failed.
func (s *podState) PodDone() bool {
	v := s.view()
	ph := podPhase(s.pod, v)
	return ph == v1.PodSucceeded || ph == v1.PodFailed
}

func (s *podState) UpdatePending() bool {
	p := s.updatePending
	s.updatePending = false
	return p
}

func (s *podState) AllContainersStopped() bool {
	for _, c := range s.all() {
		if !c.stopped() {
			return false
		}
	}
	return true
}

// --- durations ---

func (s *podState) Resync() time.Duration      { return jitter(s.e.cfg.SyncFrequency) }
func (s *podState) SyncBackoff() time.Duration { return jitter(syncErrorBackoff) }

// --- actions ---

// SyncPod is kubelet's SyncPod: ensure the sandbox, then start the init
// containers one at a time (sidecars stay running), then the regular
// containers. Whether and how a container starts is its machine's decision;
// this action only picks which container is asked. Raises sync_ok or
// sync_failed.
func (s *podState) SyncPod(ctx context.Context) error {
	if err := s.syncPod(ctx); err != nil {
		s.raise(fsm.PodEventSyncFailed)
		return err
	}
	s.raise(fsm.PodEventSyncOk)
	return nil
}

func (s *podState) syncPod(ctx context.Context) error {
	if s.startTime.IsZero() {
		s.startTime = s.e.clock.Now()
	}
	// Kill what must die: running instances of an older spec (the
	// container machine restarts them through spec_changed).
	for _, c := range s.all() {
		if c.machine.State() == fsm.ContainerStateRunning && c.SpecChanged() {
			c.fire(ctx, fsm.ContainerEventKill)
		}
	}
	if !s.sandboxReady {
		if err := fsm.RunPodAction(ctx, s, fsm.PodActionRunSandbox); err != nil {
			return err
		}
		s.w.publishStatus() // Pending with ContainerCreating while images pull
	}
	// Init containers, one at a time; sidecars must be running before the
	// next init container starts.
	for _, c := range s.inits {
		if c.initDone() {
			continue
		}
		c.fire(ctx, fsm.ContainerEventStart)
		if !c.initDone() {
			s.noteBackoff()
			return ctx.Err()
		}
	}
	// Regular containers, started in parallel like a direct CRI client
	// would: their machines are independent.
	var wg sync.WaitGroup
	for _, c := range s.containers {
		if c.spec == nil || c.machine.State() != fsm.ContainerStateWaiting {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); c.fire(ctx, fsm.ContainerEventStart) }()
	}
	wg.Wait()
	s.noteBackoff()
	return ctx.Err()
}

// noteBackoff turns ErrImagePull into ImagePullBackOff for containers still
// in pull backoff at a later sync, as kubelet reports them.
func (s *podState) noteBackoff() {
	for _, c := range s.all() {
		c.noteSync()
	}
}

// RunSandbox creates a sandbox when none is ready and reads back its IP.
func (s *podState) RunSandbox(ctx context.Context) error {
	if s.sandboxID != "" {
		s.oldSandboxes = append(s.oldSandboxes, s.sandboxID)
		s.sandboxAttempt++
	}
	cfg := sandboxConfig(s.e.cfg.RootDir, s.pod, s.sandboxAttempt)
	id, ip, err := runSandbox(ctx, s.e.rt, cfg)
	if id != "" {
		s.sandboxID, s.sandboxCfg = id, cfg
	}
	if err != nil {
		return fmt.Errorf("pod %s: %w", s.key(), err)
	}
	s.sandboxReady, s.podIP = true, ip
	return nil
}

// kill records a termination request with grace period g seconds (forced: 0
// allowed); the effective grace period only shortens.
func (s *podState) kill(g int64, forced bool) bool {
	if !forced && g < 1 {
		g = 1
	}
	now := s.e.clock.Now()
	if !s.killed || g < s.remainingGrace(now) {
		s.killed = true
		s.grace = g
		s.forced = forced && g == 0
		s.graceDeadline = now.Add(time.Duration(g) * time.Second)
		return true
	}
	return false
}

// remainingGrace is what is left of the effective grace period, at least 1 s
// unless the kill was forced.
func (s *podState) remainingGrace(now time.Time) int64 {
	if !s.killed {
		return s.grace
	}
	left := int64(s.graceDeadline.Sub(now).Round(time.Second) / time.Second)
	if s.forced {
		return max(left, 0)
	}
	return max(left, 1)
}

// KillContainers stops every container with the remaining grace period:
// regular containers in parallel, then init containers and sidecars.
// Raises termination_done.
func (s *podState) KillContainers(ctx context.Context) error {
	if !s.killed {
		s.kill(podGrace(s.pod), false)
	}
	for _, group := range [][]*ctrState{s.containers, s.inits} {
		var wg sync.WaitGroup
		for _, c := range group {
			wg.Add(1)
			go func() { defer wg.Done(); c.fire(ctx, fsm.ContainerEventKill) }()
		}
		wg.Wait()
	}
	s.raise(fsm.PodEventTerminationDone)
	return ctx.Err()
}

// StopSandbox stops the pod's sandboxes (network and namespaces).
func (s *podState) StopSandbox(ctx context.Context) error {
	var errs []error
	for _, id := range s.sandboxIDs() {
		errs = append(errs, stopSandbox(ctx, s.e.rt, s.key(), id))
	}
	s.sandboxReady = false
	return errors.Join(errs...)
}

// RemovePod removes the pod's sandboxes from the runtime, which removes
// their containers with them (the CRI contract of RemovePodSandbox); only a
// container instance outside those sandboxes gets its own RemoveContainer.
// Raises cleanup_done when all calls succeeded.
func (s *podState) RemovePod(ctx context.Context) error {
	var errs []error
	sandboxes := map[string]bool{}
	for _, id := range s.sandboxIDs() {
		sandboxes[id] = true
	}
	for _, c := range s.all() {
		for _, id := range c.instances() {
			if sandboxes[c.sandboxOf[id]] {
				continue
			}
			if err := removeContainer(ctx, s.e.rt, c.name, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, id := range s.sandboxIDs() {
		errs = append(errs, removeSandbox(ctx, s.e.rt, s.key(), id))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, c := range s.all() {
		for _, id := range c.instances() {
			s.e.pleg.Forget(id)
		}
		c.ids = nil
		c.fire(ctx, fsm.ContainerEventRemoved)
	}
	s.sandboxID, s.oldSandboxes = "", nil
	s.raise(fsm.PodEventCleanupDone)
	return nil
}

func (s *podState) sandboxIDs() []string {
	ids := append([]string(nil), s.oldSandboxes...)
	if s.sandboxID != "" {
		ids = append(ids, s.sandboxID)
	}
	return ids
}

// ReleaseName gives up the static pod's full name; the next successor in the
// FIFO gets it and a name_free event.
func (s *podState) ReleaseName(ctx context.Context) error {
	s.e.releaseName(fullName(s.pod), s.pod.UID)
	s.w.finish()
	return nil
}

// ReportStatus recomputes the pod status from the machine states and
// publishes it.
func (s *podState) ReportStatus(ctx context.Context) error {
	s.w.publishStatus()
	return nil
}

// podGrace is the grace period a kill of pod asks for:
// deletionGracePeriodSeconds when set, else terminationGracePeriodSeconds
// (default 30 s).
func podGrace(pod *v1.Pod) int64 {
	g := int64(v1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if d := pod.DeletionGracePeriodSeconds; d != nil && *d < g {
		g = *d
	}
	return g
}

// forcedKill reports a kill that asked for 0 seconds explicitly.
func forcedKill(pod *v1.Pod) bool {
	return pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}

// adopt takes over what the runtime holds of the pod from a previous run.
//
// A pod with a ready sandbox was synced before the restart: its machine
// resumes in synced (a later kill goes through terminating and honours the
// grace period; a later update syncs it) and it holds its static name again.
func (s *podState) adopt(a *adoptedPod) {
	if sb := a.readySandbox(); sb != nil {
		s.sandboxID, s.sandboxReady, s.sandboxAttempt = sb.Id, true, sb.GetMetadata().GetAttempt()
		s.sandboxCfg = sandboxConfig(s.e.cfg.RootDir, s.pod, s.sandboxAttempt)
		s.startTime = time.Unix(0, sb.CreatedAt)
		s.machine = fsm.NewPodMachineAt(fsm.PodStateSynced, s)
		s.armPodTimers()
		if config.IsStatic(s.pod) || a.Name != "" {
			s.e.claimName(fullName(s.pod), s.pod.UID)
		}
	}
	for _, sb := range a.Sandboxes {
		if sb.Id != s.sandboxID {
			s.oldSandboxes = append(s.oldSandboxes, sb.Id)
		}
	}
	for name, cs := range a.Containers {
		c := s.byName[name]
		if c == nil {
			// A container the spec no longer has: keep a machine so it is
			// stopped and removed with the pod.
			c = newCtrState(s, &v1.Container{Name: name}, false, false)
			c.setSpec(nil)
			s.byName[name] = c
			s.containers = append(s.containers, c)
		}
		c.adopt(cs, cs[0].PodSandboxId == s.sandboxID && s.sandboxReady)
	}
}

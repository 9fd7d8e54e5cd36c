package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/fsm"
)

// podState is the worker goroutine's view of one pod: the pod machine, the
// sandbox machine, one container machine per container, and what the runtime
// holds of the pod. It implements fsm.PodGuards, fsm.PodActions and
// fsm.PodDurations; every CRI call that changes the pod in the runtime is
// made by one of those actions or by an action of the sandbox or a container
// machine.
type podState struct {
	w       *podWorker
	e       *Engine
	evicted *evictionOrder // the eviction manager evicted the pod: Failed, Evicted
	// deadlineExceeded: the pod ran past spec.activeDeadlineSeconds
	// (exceed_deadline): Failed, DeadlineExceeded.
	deadlineExceeded bool
	pod              *v1.Pod
	machine          *fsm.PodMachine
	sandbox          *sandboxState

	inits      []*ctrState // init containers (sidecars included), spec order
	containers []*ctrState // regular containers, spec order
	ephemerals []*ctrState // ephemeral containers, spec order
	byName     map[string]*ctrState

	startTime time.Time

	// For speclet_pod_start_duration_seconds: when the worker first saw the
	// pod (zero for a pod adopted from the runtime), the time its images
	// took to pull, and whether the start was observed.
	firstSeen    time.Time
	pullTime     time.Duration
	startCounted bool
	syncs        int // sync_pod runs so far (the first is operation "create")

	// The effective grace period of a kill (seconds, -1 before any kill),
	// when it ends, and whether 0 was asked for explicitly.
	grace         int64
	graceDeadline time.Time
	forced        bool

	lastStatus *v1.PodStatus

	// mounted holds the volumes mount_volumes set up at least once; a
	// later refresh failing for one of them does not hold the pod back.
	mounted map[string]bool

	run    runner[fsm.PodEvent, fsm.PodAction]
	events []fsm.PodEvent // raised by actions, fired after the running step
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
	s := &podState{w: w, e: w.e, pod: pod, byName: map[string]*ctrState{}, grace: -1, firstSeen: w.e.clock.Now()}
	s.machine = fsm.NewPodMachine(s)
	s.run = runner[fsm.PodEvent, fsm.PodAction]{
		kind: fsm.PodMachineName,
		who:  func() []any { return []any{"pod", s.key()} },
		fire: func(ev fsm.PodEvent) (step[fsm.PodAction], error) {
			st, err := s.machine.Fire(ev)
			return stepOf(st.From, st.To, st.Event, st.Path, st.Actions, st.Row, st.Choices), err
		},
		run: func(ctx context.Context, a fsm.PodAction) error { return fsm.RunPodAction(ctx, s, a) },
		timers: func(now time.Time) []timer {
			var ts []timer
			for _, t := range s.machine.Timers() {
				ev := t.Event
				d := fsm.PodDurationOf(s, t.After)
				if d < 0 {
					continue // no such timer for this pod (active_deadline without a deadline)
				}
				ts = append(ts, timer{at: now.Add(d), fire: func(ctx context.Context) { s.fire(ctx, ev) }})
			}
			return ts
		},
		entered: func(context.Context) { s.w.setPodState(s.machine.State()) },
		state:   func() string { return s.machine.State().String() },
		guard: func(i int) string {
			r := fsm.PodTransitionTable[i]
			return rowGuard(r.Guard, r.HasGuard)
		},
		choice: func(i int) string {
			c := fsm.PodChoiceTable[i]
			return branchString(c.Guard, c.HasGuard, c.To)
		},
		since: w.e.clock.Now(),
	}
	s.sandbox = newSandboxState(s)
	s.setSpec(pod)
	if ad != nil {
		s.adopt(ad)
	}
	return s
}

// fire delivers ev to the pod machine and carries out the steps (fireLoop).
func (s *podState) fire(ctx context.Context, ev fsm.PodEvent) {
	fireLoop(ctx, s.w, "pod", &s.run, &s.events, ev)
}

// raise queues an event for the pod machine; fire delivers it after the
// running step's actions.
func (s *podState) raise(ev fsm.PodEvent) { s.events = append(s.events, ev) }

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
			if c.Name != "" && s.ephemeralName(c.Name) {
				cs.ephemeral = true
				s.ephemerals = append(s.ephemerals, cs)
			} else if init {
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
	for i := range pod.Spec.EphemeralContainers {
		add(ephemeralContainer(&pod.Spec.EphemeralContainers[i]), false, false)
	}
}

// ephemeralName: the pod spec lists name among its ephemeral containers.
func (s *podState) ephemeralName(name string) bool {
	for i := range s.pod.Spec.EphemeralContainers {
		if s.pod.Spec.EphemeralContainers[i].Name == name {
			return true
		}
	}
	return false
}

// all returns every container: ephemeral and regular ones first, then init
// containers and sidecars (the kill order: sidecars stop after the regular
// containers).
func (s *podState) all() []*ctrState {
	out := make([]*ctrState, 0, len(s.ephemerals)+len(s.containers)+len(s.inits))
	out = append(out, s.ephemerals...)
	out = append(out, s.containers...)
	return append(out, s.inits...)
}

func (s *podState) key() string { return s.pod.Namespace + "/" + s.pod.Name }

// terminating: the pod machine has seen termination (the pod completed or
// is being killed).
func (s *podState) terminating() bool {
	switch s.machine.State() {
	case fsm.PodStateCompleting, fsm.PodStateCompleted, fsm.PodStateTerminating, fsm.PodStateTerminated, fsm.PodStateFinished:
		return true
	}
	return false
}

// initialized: every init container completed (a sidecar: runs). Guard
// start_blocked and the status's Initialized condition both read it.
func (s *podState) initialized() bool {
	for _, c := range s.inits {
		if !c.initDone() {
			return false
		}
	}
	return true
}

// noteRunning observes the pod's start the first time every regular
// container runs (kubelet's pod start: first seen to all containers
// running; the SLI without image pulls). publishStatus calls it on the
// worker goroutine, never while containers start in parallel.
func (s *podState) noteRunning() {
	if s.startCounted || s.firstSeen.IsZero() {
		return
	}
	for _, c := range s.containers {
		if c.spec != nil && c.machine.State() != fsm.ContainerStateRunning {
			return
		}
	}
	s.startCounted = true
	s.e.metrics.podStarted(s.e.clock.Since(s.firstSeen), s.pullTime)
}

// --- guards ---

// NameTaken: a static pod whose full name another UID holds or waits for
// ahead of this one.
func (s *podState) NameTaken() bool {
	return config.IsStatic(s.pod) && s.e.nameTaken(fullName(s.pod), s.pod.UID)
}

// PodDone: no container will run again. Every regular container machine is
// terminated or removed, or an init container is terminated after a failure
// (its restart policy forbids a retry, so the pod never initializes).
// Sidecars do not count.
func (s *podState) PodDone() bool {
	for _, c := range s.inits {
		if !c.sidecar && c.final() && !c.initDone() {
			return true
		}
	}
	for _, c := range s.containers {
		if c.spec != nil && !c.final() {
			return false
		}
	}
	return len(s.containers) > 0
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

func (s *podState) Resync() time.Duration { return jitter(s.e.cfg.SyncFrequency) }

// ActiveDeadline is what is left of spec.activeDeadlineSeconds since the
// pod's start time (0 once it ran out); -1, no timer, for a pod without a
// deadline or not started.
func (s *podState) ActiveDeadline() time.Duration {
	ads := s.pod.Spec.ActiveDeadlineSeconds
	if ads == nil || s.startTime.IsZero() {
		return -1
	}
	return max(0, s.startTime.Add(time.Duration(*ads)*time.Second).Sub(s.e.clock.Now()))
}

func (s *podState) SyncBackoff() time.Duration {
	return jitter(fsm.PodDurationDefaults[fsm.PodDurationSyncBackoff])
}

// --- actions ---

// Reason and message of a pod that ran past its activeDeadlineSeconds
// (kubelet's active deadline handler).
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// ExceedDeadline records that the pod ran past spec.activeDeadlineSeconds,
// with kubelet's DeadlineExceeded event (type Normal, as kubelet's).
func (s *podState) ExceedDeadline(context.Context) error {
	s.deadlineExceeded = true
	s.e.log.Info("pod ran past its active deadline", "pod", s.key(), "startTime", s.startTime)
	s.event(eventNormal, ReasonDeadlineExceeded, "%s", MessageDeadlineExceeded)
	return nil
}

// SyncPod is kubelet's SyncPod over the machines: the newest spec goes to
// every container (a running one whose spec changed stops), a dead sandbox's
// containers are stopped, the sandbox is asked to be ready, and then every
// container is asked to start; its guards decide whether it may now. Regular
// containers start in parallel, like a direct CRI client: their machines are
// independent. Raises sync_failed when a volume did not mount, there is no
// ready sandbox or ctx ended, else sync_ok: a failed container start is the
// container machine's (start_failed and its back-off).
func (s *podState) SyncPod(ctx context.Context) error {
	op := "sync"
	if s.syncs == 0 {
		op = "create"
	}
	s.syncs++
	defer func(t0 time.Time) { s.e.metrics.workerDuration(op, s.e.clock.Since(t0)) }(s.e.clock.Now())
	if s.startTime.IsZero() {
		s.startTime = s.e.clock.Now()
	}
	for _, c := range s.all() {
		c.fire(ctx, fsm.ContainerEventUpdate)
	}
	if s.sandbox.machine.State() == fsm.SandboxStateDead {
		s.each(ctx, fsm.ContainerEventSandboxDied)
	}
	if err := fsm.RunPodAction(ctx, s, fsm.PodActionMountVolumes); err != nil {
		s.raise(fsm.PodEventSyncFailed)
		return err
	}
	s.sandbox.fire(ctx, fsm.SandboxEventCreate)
	if s.sandbox.machine.State() != fsm.SandboxStateReady {
		// The spec decides what a done pod does without a sandbox
		// (syncing: sync_failed guarded by pod_done).
		s.noteBackoff()
		s.raise(fsm.PodEventSyncFailed)
		return errors.Join(ctx.Err(), s.sandbox.err)
	}
	s.w.publishStatus() // Pending with ContainerCreating while images pull
	// Ephemeral containers first, as kubelet starts them before init
	// containers: a pod that cannot initialize can still be debugged.
	for _, c := range s.ephemerals {
		c.fire(ctx, fsm.ContainerEventStart)
	}
	for _, c := range s.inits {
		c.fire(ctx, fsm.ContainerEventStart)
	}
	var wg sync.WaitGroup
	for _, c := range s.containers {
		wg.Add(1)
		go func() { defer wg.Done(); c.fire(ctx, fsm.ContainerEventStart) }()
	}
	wg.Wait()
	s.noteBackoff()
	if err := ctx.Err(); err != nil {
		s.raise(fsm.PodEventSyncFailed)
		return err
	}
	s.raise(fsm.PodEventSyncOk)
	return nil
}

// each delivers ev to every container: ephemeral and regular containers in
// parallel, then init containers and sidecars in parallel.
func (s *podState) each(ctx context.Context, ev fsm.ContainerEvent) {
	for _, group := range [][]*ctrState{append(append([]*ctrState(nil), s.ephemerals...), s.containers...), s.inits} {
		var wg sync.WaitGroup
		for _, c := range group {
			wg.Add(1)
			go func() { defer wg.Done(); c.fire(ctx, ev) }()
		}
		wg.Wait()
	}
}

// noteBackoff turns ErrImagePull into ImagePullBackOff for containers still
// in pull backoff at a later sync, as kubelet reports them.
func (s *podState) noteBackoff() {
	for _, c := range s.all() {
		c.noteSync()
	}
}

// kill records a termination request with grace period g seconds (forced: 0
// allowed); the effective grace period only shortens. It returns whether
// the grace period changed.
func (s *podState) kill(g int64, forced bool) bool {
	if !forced && g < 1 {
		g = 1
	}
	now := s.e.clock.Now()
	if s.grace < 0 || g < s.remainingGrace(now) {
		s.grace = g
		s.forced = forced && g == 0
		s.graceDeadline = now.Add(time.Duration(g) * time.Second)
		return true
	}
	return false
}

// remainingGrace is what is left of the effective grace period, at least 1 s
// unless the kill was forced; before any kill, the pod's own grace period.
func (s *podState) remainingGrace(now time.Time) int64 {
	if s.grace < 0 {
		return max(podGrace(s.pod), 1)
	}
	left := int64(s.graceDeadline.Sub(now).Round(time.Second) / time.Second)
	if s.forced {
		return max(left, 0)
	}
	return max(left, 1)
}

// KillContainers delivers kill to every container with the remaining grace
// period: regular containers in parallel, then init containers and
// sidecars. Raises termination_done.
func (s *podState) KillContainers(ctx context.Context) error {
	defer func(t0 time.Time) { s.e.metrics.workerDuration("kill", s.e.clock.Since(t0)) }(s.e.clock.Now())
	if s.grace < 0 {
		s.kill(podGrace(s.pod), false)
	}
	s.each(ctx, fsm.ContainerEventKill)
	s.raise(fsm.PodEventTerminationDone)
	return ctx.Err()
}

// StopSandbox delivers stop to the sandbox machine.
func (s *podState) StopSandbox(ctx context.Context) error {
	s.sandbox.fire(ctx, fsm.SandboxEventStop)
	return s.sandbox.err
}

// RemovePod removes every sandbox the pod had from the runtime, which
// removes their containers with them (the CRI contract of
// RemovePodSandbox; every container instance is created in one of them).
// Raises cleanup_done when all calls succeeded, after delivering removed to
// every container and the sandbox.
func (s *podState) RemovePod(ctx context.Context) error {
	if s.sandbox.machine.State() != fsm.SandboxStateStopped {
		return errors.New("sandbox not stopped yet")
	}
	var errs []error
	for _, id := range s.sandbox.ids {
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
	for _, id := range s.sandbox.ids {
		s.e.pleg.ForgetSandbox(id)
	}
	s.sandbox.fire(ctx, fsm.SandboxEventRemoved)
	if err := fsm.RunPodAction(ctx, s, fsm.PodActionUnmountVolumes); err != nil {
		return err
	}
	s.raise(fsm.PodEventCleanupDone)
	return nil
}

// MountVolumes sets up the pod's volumes (engine/volume). Every volume that
// fails is logged and recorded as a Warning event with kubelet's reason
// FailedMount and message ("MountVolume.SetUp failed for volume %q : cause"). It returns an error, so that sync_pod reports
// sync_failed before any runtime call, only when a volume failed that
// never mounted before (in this worker, or on disk from the agent's
// previous run): a running pod whose configMap refresh fails keeps its
// last files, as under kubelet.
func (s *podState) MountVolumes(ctx context.Context) error {
	err := s.e.volumes.Setup(ctx, s.pod)
	failed := map[string]bool{}
	var blocking []error
	for _, me := range mountErrors(err) {
		failed[me.Volume] = true
		s.e.log.Warn("volume mount failed", "reason", ReasonFailedMount, "pod", s.key(), "volume", me.Volume, "type", me.Type, "err", me.Err)
		s.event(eventWarning, ReasonFailedMount, "MountVolume.SetUp failed for volume %q : %v", me.Volume, me.Err)
		if !s.mounted[me.Volume] && !s.volumePresent(me.Volume) {
			blocking = append(blocking, me)
		}
	}
	if s.mounted == nil {
		s.mounted = map[string]bool{}
	}
	for _, v := range s.pod.Spec.Volumes {
		if !failed[v.Name] {
			s.mounted[v.Name] = true
		}
	}
	if len(blocking) > 0 {
		return fmt.Errorf("%s: %w", ReasonFailedMount, errors.Join(blocking...))
	}
	return nil
}

// volumePresent reports a volume set up before this worker existed (the
// agent restarted while the pod ran): its files stay in use when their
// refresh fails.
func (s *podState) volumePresent(name string) bool {
	for i := range s.pod.Spec.Volumes {
		if v := &s.pod.Spec.Volumes[i]; v.Name == name {
			return volume.Present(s.e.cfg.RootDir, s.pod, v)
		}
	}
	return false
}

// mountErrors unpacks the *volume.MountError of a Setup error.
func mountErrors(err error) []*volume.MountError {
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]*volume.MountError, 0, len(errs))
	for _, e := range errs {
		var me *volume.MountError
		if errors.As(e, &me) {
			out = append(out, me)
		} else {
			out = append(out, &volume.MountError{Volume: "?", Err: e})
		}
	}
	return out
}

// UnmountVolumes unmounts the pod's tmpfs volumes and forgets its tokens.
// Its directories are removed when the worker is purged (cleanup.go).
func (s *podState) UnmountVolumes(ctx context.Context) error {
	if err := s.e.volumes.TearDown(s.pod.UID); err != nil {
		return fmt.Errorf("unmount volumes of %s: %w", s.key(), err)
	}
	s.mounted = nil
	return nil
}

// ReleaseName leaves the static pod full name's queue; the next UID waiting
// for it gets name_free.
func (s *podState) ReleaseName(ctx context.Context) error {
	s.e.releaseName(fullName(s.pod), s.pod.UID)
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
// (default 30 s, the container machine's grace_period duration).
func podGrace(pod *v1.Pod) int64 {
	g := int64(fsm.ContainerDurationDefaults[fsm.ContainerDurationGracePeriod] / time.Second)
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
// grace period; a later update syncs it).
func (s *podState) adopt(a *adoptedPod) {
	s.firstSeen = time.Time{} // it started before the restart: no start to observe
	sb := s.sandbox.adopt(a)
	if sb != nil {
		s.startTime = time.Unix(0, sb.CreatedAt)
		s.machine = fsm.NewPodMachineAt(fsm.PodStateSynced, s)
		s.w.setPodState(fsm.PodStateSynced)
		s.w.setTimers("pod", s.run.timers(s.e.clock.Now()))
	}
	ready := s.sandbox.machine.State() == fsm.SandboxStateReady
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
		c.adopt(cs, cs[0].PodSandboxId == s.sandbox.id && ready)
	}
}

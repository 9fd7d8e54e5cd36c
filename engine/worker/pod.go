package worker

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/pods"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// podState is the worker goroutine's view of one pod: the pod machine, the
// sandbox machine, one container machine per container, and what the runtime
// holds of the pod. It implements fsm.PodGuards (pod.go); the
// pod machine's actions and durations are engine/pods' Pod, embedded, whose
// pods.Owner it is (pod_owner.go). Every CRI call that changes the pod in
// the runtime is made by one of those actions or by an action of the
// sandbox or a container machine.
type podState struct {
	pods.Pod // the start time, grace period, volumes, and the pod machine's actions and durations

	w       *Worker
	h       *Host
	evicted *Eviction // the eviction manager evicted the pod: Failed, Evicted
	pod     *v1.Pod
	machine *fsm.PodMachine
	sandbox *sandboxState

	inits      []*ctrState // init containers (sidecars included), spec order
	containers []*ctrState // regular containers, spec order
	ephemerals []*ctrState // ephemeral containers, spec order

	// For speclet_pod_start_duration_seconds: when the worker first saw the
	// pod (zero for a pod adopted from the runtime), the time its images
	// took to pull, and whether the start was observed.
	firstSeen    time.Time
	pullTime     time.Duration
	startCounted bool

	// lastStatus is the status last published, of the pod object pubFrom
	// (s.pod then).
	lastStatus *v1.PodStatus
	pubFrom    *v1.Pod

	run fire.Run[fsm.PodState, fsm.PodEvent, fsm.PodAction, fsm.PodGuard, *podState] // the pod machine in the fire loop
	// container events that bring adopted containers in line with the
	// runtime, fired before the first input.
	adoptEvents []adoptEvent
}

// podStep is a step of the pod machine as its observers see it (observe.go).
type podStep = fire.Step[fsm.PodState, fsm.PodEvent, fsm.PodAction, fsm.PodGuard, *podState]

type adoptEvent struct {
	c  *ctrState
	ev fsm.ContainerEvent
}

var _ fsm.PodImpl[op.Op] = (*podState)(nil)

// newPodState builds the state of a new pod, or of a pod adopted from the
// runtime after a restart (ad != nil): its ready sandbox is reused and its
// containers' machines start in the state the runtime reports.
func newPodState(w *Worker, pod *v1.Pod, ad *Adopted) *podState {
	s := &podState{w: w, h: w.h, pod: pod, firstSeen: w.h.Clock.Now()}
	s.Bind(s)
	s.machine = fsm.BindPodMachine(fsm.PodInitialState, s)
	s.run = fire.NewRun(s, podObservers)
	s.sandbox = newSandboxState(s)
	s.setSpec(pod)
	if ad != nil {
		s.adopt(ad)
	}
	return s
}

// fire delivers ev to the pod machine and carries out the steps (engine/fire).
func (s *podState) fire(ctx context.Context, ev fsm.PodEvent) { fire.Fire(ctx, s.machine, &s.run, ev) }

// raise queues an event for the pod machine; fire delivers it after the
// running step's actions.
func (s *podState) raise(ev fsm.PodEvent) { s.run.Raise(ev) }

func (s *podState) Sinks() *observe.Sinks { return &s.h.Sinks }
func (s *podState) Now() time.Time        { return s.h.Clock.Now() }
func (s *podState) Logger() *slog.Logger  { return s.h.Log }
func (s *podState) LogAttrs() []any       { return []any{"pod", s.key()} }
func (s *podState) Record() *history.Log  { return &s.w.hist }
func (s *podState) Instance() string      { return "" }
func (s *podState) PodUID() types.UID     { return s.pod.UID }

// podOwner is the timer owner of the pod machine.
const podOwner = "pod"

// timers are the timers of the pod machine's state, from now; a timer
// whose duration is negative is not armed (active_deadline without a
// deadline).
func (s *podState) timers(now time.Time) []schedule.Timer {
	return schedule.Of(s.machine.Timers(), now,
		func(d fsm.PodDuration) time.Duration { return fsm.PodDurationOf(s, d) },
		func(ctx context.Context, ev fsm.PodEvent, _ fsm.PodDuration) { s.fire(ctx, ev) })
}

// podEntered re-arms the timers of the state the pod machine entered and
// publishes the state to the sync loop.
func podEntered(_ context.Context, st *podStep) {
	if !st.Entered() {
		return
	}
	s := st.Owner
	s.w.setTimers(podOwner, s.timers(s.h.Clock.Now()))
	s.w.setPodState(st.To)
}

// setSpec installs a (newer) pod spec and adds machines for new containers.
// Containers that left the spec keep their machines so they are stopped and
// removed with the pod.
func (s *podState) setSpec(pod *v1.Pod) {
	s.pod = pod
	add := func(c *v1.Container, init, sidecar bool) *ctrState {
		cs := s.byName(c.Name)
		if cs == nil {
			cs = newCtrState(s, c, init, sidecar)
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

// byName is the container state named name, nil for none. Names are unique
// across a pod's init, regular and ephemeral containers; a pod has a few,
// so a scan costs less than a map kept per pod.
func (s *podState) byName(name string) *ctrState {
	for _, group := range [...][]*ctrState{s.containers, s.inits, s.ephemerals} {
		for _, c := range group {
			if c.name == name {
				return c
			}
		}
	}
	return nil
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
	s.h.Metrics.PodStarted(s.h.Clock.Since(s.firstSeen), s.pullTime)
}

// --- guards ---

// AdmissionRefused: the pod was refused admission when first declared.
func (s *podState) AdmissionRefused() bool { return s.w.refusal != nil }

// NameTaken: a static pod whose full name another UID holds or waits for
// ahead of this one.
func (s *podState) NameTaken() bool {
	return config.IsStatic(s.pod) && s.h.Engine.NameTaken(FullName(s.pod), s.pod.UID)
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
